package e2e

// The README's first command, go run ./demo: its own embedded server, its own worker
// running the demo binary as the test agent, the script to its end with --exit. And what
// became of starter demo.

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDemoRunsItsScriptAndExits(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "demo")
	out, err := exec.CommandContext(ctxFor(t, 10*time.Minute), "go", "build", "-o", bin, "../demo").CombinedOutput()
	require.NoError(t, err, "build ./demo: %s", out)
	dir := t.TempDir()
	cmd := exec.CommandContext(ctxFor(t, 3*time.Minute), bin, "--exit", "--dev.port", "0", "--dev.ui-port", "0",
		"--dev.db", filepath.Join(dir, "dev.db"), "--data-dir", dir, "--session", "demo-e2e")
	got, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", got)
	for _, want := range []string{
		"Every chunk of this reply was journaled by a Temporal workflow",
		"[turn 1 ended: end_turn]",
		"steer expecting turn 1: rejected stale_turn",
		"steer expecting turn 2: accepted, next token 2.1",
		"[steer 2.1 delivered: injected]",
		"cancel: cancelling",
		"[turn 2 ended: cancelled]",
		"== 4. the transcript, replayed from the journal",
		"go run ./starter status --session demo-e2e",
		"1. attach an editor:  go run ./starter acp --session demo-e2e",
		"2. open the deck:",
	} {
		require.Contains(t, string(got), want)
	}
}

func TestStarterDemoSaysWhereTheDemoWent(t *testing.T) {
	t.Parallel()
	out, errOut, code := starter(t, "demo", "--exit")
	require.Equal(t, 2, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "go run ./demo")
}

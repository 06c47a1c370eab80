package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/checkpoint"
)

// starter diff and export read the store the workers push to, with no Temporal in reach.
func TestDiffAndExportReadTheCheckpointStore(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	st, err := checkpoint.OpenStore(ctx, checkpoint.DefaultStoreURL(data), nil)
	require.NoError(t, err)
	sh := &checkpoint.Shadows{Dir: filepath.Join(data, "checkpoints", "sessions"), Store: st}
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello\n"), 0o644))
	_, err = sh.Checkpoint(ctx, "s1", ws, 1, "say hello")
	require.NoError(t, err)

	var out, errOut bytes.Buffer
	code := run([]string{"diff", "--session", "s1", "--stat", "--checkpoint-store", st.URL}, &out, &errOut)
	require.Equal(t, exitOK, code, errOut.String())
	require.Contains(t, out.String(), "hello.txt | 1 +")

	repo := t.TempDir()
	git := exec.Command("git", "init", "-q", repo)
	git.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	require.NoError(t, git.Run())
	out.Reset()
	code = run([]string{"export", "--session", "s1", "--branch", "tacp/s1", "--repo", repo, "--checkpoint-store", st.URL}, &out, &errOut)
	require.Equal(t, exitOK, code, errOut.String())
	require.True(t, strings.HasPrefix(out.String(), "branch tacp/s1 at "), out.String())
	show := exec.Command("git", "-C", repo, "show", "tacp/s1:hello.txt")
	b, err := show.Output()
	require.NoError(t, err)
	require.Equal(t, "hello\n", string(b))
}

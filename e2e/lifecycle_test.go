package e2e

// A worker's agents die with it: killed with SIGKILL (nothing of the worker runs: its
// reaper process stops the agents' process groups) or stopped with SIGTERM in the middle of
// a turn (a clean shutdown, no panic). The agent here is the testagent with -spawn-child: a
// helper in its process group that ignores SIGTERM and outlives the agent, as
// claude-agent-acp's node children did.

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/internal/proctree"
	"github.com/tacp-dev/tacp/signals"
)

// lifecycleWorker starts a worker process on a queue of its own whose agent has a child,
// runs /pids in a session and returns the worker, the session's client and id, and the
// agent's and its child's pids (killed at the end of t, should the test fail).
func lifecycleWorker(t *testing.T) (*exec.Cmd, *signals.Client, string, int, int) {
	t.Helper()
	queue := "tacp-lifecycle-" + signals.NewID()[:8]
	agent := fmt.Sprintf("%s -spawn-child -transcripts %s", testagent, filepath.Join(dataDir, "transcripts"))
	w := startWorkerProcess(t, queue, "TACP_E2E_AGENT="+agent)
	qc := signals.NewClient(tc, queue)
	id := session(t)
	_, err := qc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "/pids", ClientMessageID: "pids"})
	require.NoError(t, err)
	text := strings.Join(agentTexts(t, turnEnd(t, id, 1), 1), "")
	f := strings.Fields(text)
	require.Len(t, f, 3, text)
	agentPID, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	childPID, err := strconv.Atoi(f[2])
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = syscall.Kill(agentPID, syscall.SIGKILL)
		_ = syscall.Kill(childPID, syscall.SIGKILL)
	})
	require.True(t, proctree.Alive(agentPID) && proctree.Alive(childPID))
	return w, qc, id, agentPID, childPID
}

func TestWorkerKilledWithSIGKILLLeavesNoAgentBehind(t *testing.T) {
	t.Parallel()
	w, qc, id, agentPID, childPID := lifecycleWorker(t)
	// Mid-turn, as in production.
	_, err := qc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "/sleep 60s", ClientMessageID: "sleep"})
	require.NoError(t, err)
	waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventAgentUpdate && ev.TurnID == 2 })
	require.NoError(t, w.Process.Signal(syscall.SIGKILL))
	_ = w.Wait()
	require.Eventually(t, func() bool { return !proctree.Alive(agentPID) && !proctree.Alive(childPID) }, 30*time.Second, 50*time.Millisecond,
		"agent %d or its child %d outlived the worker killed with SIGKILL", agentPID, childPID)
}

func TestWorkerSIGTERMMidTurnShutsDownCleanly(t *testing.T) {
	t.Parallel()
	w, qc, id, agentPID, childPID := lifecycleWorker(t)
	_, err := qc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "/sleep 60s", ClientMessageID: "sleep"})
	require.NoError(t, err)
	waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventAgentUpdate && ev.TurnID == 2 })
	require.NoError(t, w.Process.Signal(syscall.SIGTERM))
	require.NoError(t, w.Wait(), "the worker exits 0: no panic while its turn releases the agent Close stopped")
	require.Eventually(t, func() bool { return !proctree.Alive(agentPID) && !proctree.Alive(childPID) }, 30*time.Second, 50*time.Millisecond,
		"agent %d or its child %d outlived the worker's shutdown", agentPID, childPID)
}

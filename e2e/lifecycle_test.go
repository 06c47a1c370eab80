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
	"github.com/tacp-dev/tacp/tacpclient"
)

// lifecycleWorker starts a worker process on a queue of its own whose agent has a child,
// runs /pids in a session and returns the worker, the session's client and id, and the
// agent's and its child's pids (killed at the end of t, should the test fail).
func lifecycleWorker(t *testing.T, env ...string) (*exec.Cmd, *tacpclient.Client, string, int, int) {
	t.Helper()
	queue := "tacp-lifecycle-" + signals.NewID()[:8]
	agent := fmt.Sprintf("%s -spawn-child -transcripts %s", testagent, filepath.Join(dataDir, "transcripts"))
	w := startWorkerProcess(t, queue, append([]string{"TACP_E2E_AGENT=" + agent}, env...)...)
	qc := tacpclient.NewClient(tc, queue)
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

// A worker started with an agent nice runs its agents, every thread, and what they start at
// that priority, and keeps its own.
func TestWorkerAgentNiceLowersTheAgentAndItsChildrenOnly(t *testing.T) {
	t.Parallel()
	w, _, _, agentPID, childPID := lifecycleWorker(t, "TACP_E2E_AGENT_NICE=5")
	for _, p := range []int{agentPID, childPID} {
		nices := proctree.ThreadNices(p)
		require.NotEmpty(t, nices)
		for _, n := range nices {
			require.Equal(t, 5, n, "a thread of process %d", p)
		}
	}
	for _, n := range proctree.ThreadNices(w.Process.Pid) {
		require.Equal(t, 0, n, "a thread of the worker")
	}
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

// pidsOf runs /pids as turn n of session id and returns the agent's and its child's pids.
func pidsOf(t *testing.T, qc *tacpclient.Client, id string, n int64) (int, int) {
	t.Helper()
	_, err := qc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "/pids", ClientMessageID: fmt.Sprintf("pids-%d", n)})
	require.NoError(t, err)
	f := strings.Fields(strings.Join(agentTexts(t, turnEnd(t, id, n), n), ""))
	require.Len(t, f, 3, f)
	agentPID, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	childPID, err := strconv.Atoi(f[2])
	require.NoError(t, err)
	return agentPID, childPID
}

// A closed session's agent (and what it started) is stopped on the worker that holds it,
// not left to the idle TTL: on the worker that ran its turns, and on the one that took the
// session over when that worker was killed.
func TestAClosedSessionsAgentIsStoppedWhereverItRuns(t *testing.T) {
	t.Parallel()
	gone := func(t *testing.T, pids ...int) {
		t.Helper()
		require.Eventually(t, func() bool {
			for _, p := range pids {
				if proctree.Alive(p) {
					return false
				}
			}
			return true
		}, 10*time.Second, 50*time.Millisecond, "the closed session's agent %v still runs", pids)
	}
	t.Run("OnItsWorker", func(t *testing.T) {
		t.Parallel()
		_, qc, id, agentPID, childPID := lifecycleWorker(t)
		_, err := qc.Close(ctxFor(t, 30*time.Second), id, signals.CloseRequest{Reason: "done"})
		require.NoError(t, err)
		waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventSessionClosed })
		gone(t, agentPID, childPID)
	})
	t.Run("AfterAFailover", func(t *testing.T) {
		t.Parallel()
		first, qc, id, agentPID, childPID := lifecycleWorker(t)
		startWorkerProcess(t, qc.TaskQueue, "TACP_E2E_AGENT="+fmt.Sprintf("%s -spawn-child -transcripts %s", testagent, filepath.Join(dataDir, "transcripts")))
		require.NoError(t, first.Process.Signal(syscall.SIGKILL))
		_ = first.Wait()
		gone(t, agentPID, childPID) // the killed worker's reaper
		// The next turn runs on the other worker, which now holds the session's agent.
		agentPID, childPID = pidsOf(t, qc, id, 2)
		require.True(t, proctree.Alive(agentPID) && proctree.Alive(childPID))
		t.Cleanup(func() {
			_ = syscall.Kill(agentPID, syscall.SIGKILL)
			_ = syscall.Kill(childPID, syscall.SIGKILL)
		})
		_, err := qc.Close(ctxFor(t, 30*time.Second), id, signals.CloseRequest{Reason: "done"})
		require.NoError(t, err)
		waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventSessionClosed })
		gone(t, agentPID, childPID)
	})
}

package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

// auxWorker starts an in-process worker on its own task queue with a short agent idle TTL,
// room for two live agents, and a short setup bound.
func auxWorker(t *testing.T) (*tacpworker.Worker, *tacpclient.Client) {
	t.Helper()
	return extraWorker(t, tc, tacpworker.Options{AgentIdleTTL: time.Second, MaxAgents: 2, InitTimeout: 2 * time.Second})
}

func TestIdleAgentIsStoppedAfterItsTTL(t *testing.T) {
	t.Parallel()
	w, qc := auxWorker(t)
	id := session(t)
	_, err := qc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "/chunks 1"})
	require.NoError(t, err)
	turnEnd(t, id, 1)
	require.NotZero(t, w.Host.AgentPID(id))
	require.Eventually(t, func() bool { return w.Host.AgentPID(id) == 0 }, 30*time.Second, 50*time.Millisecond,
		"the idle agent is stopped after its TTL")
}

// Past the cap of live agents, the least recently used idle agent is evicted, not the
// oldest: a, b, then a again, then c evicts b, and a keeps its process.
func TestLeastRecentlyUsedIdleAgentIsEvictedPastTheCap(t *testing.T) {
	t.Parallel()
	// An idle TTL longer than the test: only the cap may stop an agent here.
	w, qc := extraWorker(t, tc, tacpworker.Options{AgentIdleTTL: 10 * time.Minute, MaxAgents: 2, InitTimeout: 2 * time.Second})
	a, b, c := session(t)+"-a", session(t)+"-b", session(t)+"-c"
	turn := func(id string, n int64) int {
		t.Helper()
		_, err := qc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "/chunks 1"})
		require.NoError(t, err)
		turnEnd(t, id, n)
		pid := w.Host.AgentPID(id)
		require.NotZero(t, pid, "%s keeps its agent after its turn", id)
		return pid
	}
	pidA := turn(a, 1)
	pidB := turn(b, 1)
	require.Equal(t, pidA, turn(a, 2), "a's second turn reuses its agent: a is now the most recently used")
	turn(c, 1)
	// The cap is two: c's agent evicted b's, the least recently used, and a's lives on.
	require.Zero(t, w.Host.AgentPID(b), "b, the least recently used, was evicted (its pid was %d)", pidB)
	require.Equal(t, pidA, w.Host.AgentPID(a), "a, the most recently used, survived in the same process")
}

func TestMisbehavingAgentsEndTheTurnWithAClearError(t *testing.T) {
	t.Parallel()
	_, qc := auxWorker(t)
	for _, tc := range []struct{ name, agent, want string }{
		{"never answers initialize", profileHangs, "agent"},
		{"writes garbage", profileGarbage, "agent"},
		{"exits at once", profileExits, "agent"},
		{"no such program", profileMissing, "agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := session(t)
			_, err := qc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id, Agent: tc.agent}, signals.PromptRequest{Text: "hello"})
			require.NoError(t, err)
			evs := turnEnd(t, id, 1)
			kind, data := terminalData(t, evs)
			require.Equal(t, signals.EventTurnFailed, kind)
			require.Contains(t, data["error"], tc.want)
			t.Log(data["error"])
			checkInvariants(t, allEvents(t, id))
		})
	}
}

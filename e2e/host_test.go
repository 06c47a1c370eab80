package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/internal/tacpworker"
	"github.com/tacp-dev/tacp/signals"
)

// auxWorker starts an in-process worker on its own task queue with a short agent idle TTL,
// room for two live agents, and a short setup bound.
func auxWorker(t *testing.T) (*tacpworker.Worker, *signals.Client) {
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

func TestLeastRecentlyUsedIdleAgentIsEvictedPastTheCap(t *testing.T) {
	t.Parallel()
	w, qc := auxWorker(t)
	ids := []string{session(t) + "-a", session(t) + "-b", session(t) + "-c"}
	for _, id := range ids {
		_, err := qc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "/chunks 1"})
		require.NoError(t, err)
		turnEnd(t, id, 1)
	}
	// The cap is two: the third agent evicted the first, the least recently used.
	require.Zero(t, w.Host.AgentPID(ids[0]))
	require.NotZero(t, w.Host.AgentPID(ids[2]))
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

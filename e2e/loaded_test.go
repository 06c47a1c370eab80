package e2e

// A loaded worker is not a lost one: an agent slow to start (a cold node on a busy machine)
// must not go quiet for longer than the turn's heartbeat timeout, and an agent that never
// starts fails once, with what it printed.

import (
	"log/slog"
	"os"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/testagent/agent"
	"github.com/tacp-dev/tacp/worker/tacpworker"
	sessioncore "github.com/tacp-dev/tacp/workflows/session"
)

// An agent that takes 25 s to start — two and a half heartbeat timeouts — runs its turn
// once: one agent start, no turn.restarted, the turn ended.
func TestASlowStartingAgentRunsItsTurnOnce(t *testing.T) {
	t.Parallel()
	const delay = 25 * time.Second
	require.Greater(t, delay, 2*sessioncore.TurnHeartbeat, "the start outlasts the heartbeat timeout")
	starts := t.TempDir()
	_, qc := extraWorker(t, tc, tacpworker.Options{
		Profiles: []activities.Profile{{
			Name:    activities.DefaultProfile,
			Command: testAgentCmd("-start-delay", delay.String()),
			Env:     map[string]string{agent.StartsDirEnv: starts},
		}},
		InitTimeout: 2 * time.Minute,
		Logger:      slog.New(slog.NewTextHandler(&testLog{t: t, prefix: "worker: "}, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	id := session(t)
	_, err := qc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "/chunks 2"})
	require.NoError(t, err)
	evs := turnEnd(t, id, 1)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind, "%v", data)
	require.Equal(t, "end_turn", data["stop_reason"])
	require.Zero(t, countKindIn(evs, signals.EventTurnRestarted, 1), "the slow start was not taken for a lost worker")
	entries, err := os.ReadDir(starts)
	require.NoError(t, err)
	require.Len(t, entries, 1, "one agent start")
	checkInvariants(t, allEvents(t, id))
}

// An agent that prints why it cannot start and then never answers fails the turn once, when
// the worker's setup bound passes, and the error says what it printed.
func TestAnAgentThatNeverStartsFailsOnceWithWhatItPrinted(t *testing.T) {
	t.Parallel()
	starts := t.TempDir()
	_, qc := extraWorker(t, tc, tacpworker.Options{
		Profiles: []activities.Profile{
			// Each start leaves a file in starts, prints its reason and waits for a login
			// that never comes: past the heartbeat timeout, but alive and beating.
			{Name: "waits", Command: `sh -c 'touch "$STARTS/$$"; echo "please log in first: run agent login" >&2; sleep 600'`, Env: map[string]string{"STARTS": starts}},
			{Name: "dies", Command: `sh -c 'echo "no API key: set AGENT_API_KEY" >&2; exit 3'`},
		},
		InitTimeout: sessioncore.TurnHeartbeat + 5*time.Second,
	})
	for _, c := range []struct{ profile, printed string }{
		{"waits", "please log in first: run agent login"},
		{"dies", "no API key: set AGENT_API_KEY"},
	} {
		t.Run(c.profile, func(t *testing.T) {
			t.Parallel()
			id := session(t)
			_, err := qc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id, Agent: c.profile}, signals.PromptRequest{Text: "hello"})
			require.NoError(t, err)
			evs := turnEnd(t, id, 1)
			kind, data := terminalData(t, evs)
			require.Equal(t, signals.EventTurnFailed, kind)
			require.Contains(t, data["error"], c.printed, "the error says what the agent printed")
			require.Zero(t, countKindIn(evs, signals.EventTurnRestarted, 1), "failed once, not as lost workers")
			if c.profile == "waits" {
				entries, err := os.ReadDir(starts)
				require.NoError(t, err)
				require.Len(t, entries, 1, "the agent that never started was started once")
			}
		})
	}
}

// A fresh worker learns its agents when it starts: the first editor's initialize, before
// any turn ran anywhere, advertises what the profile's agent supports (images, MCP servers).
func TestAFreshWorkersFirstInitializeAdvertisesItsAgent(t *testing.T) {
	t.Parallel()
	queue := "tacp-probe-" + signals.NewID()[:8]
	w, _ := extraWorker(t, tc, tacpworker.Options{
		TaskQueue:   queue,
		Profiles:    []activities.Profile{{Name: activities.DefaultProfile, Command: testAgentCmd("-settings")}},
		MCP:         activities.MCPPolicy{Mode: activities.MCPHTTP},
		ProbeAgents: true,
	})
	select {
	case <-w.Probed():
	case <-ctxFor(t, 2*time.Minute).Done():
		t.Fatal("the worker never finished learning its agents")
	}
	a := startACP(t, "--task-queue", queue)
	first, err := a.conn.Initialize(ctxFor(t, 30*time.Second), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	require.NoError(t, err)
	require.Equal(t, acp.PromptCapabilities{Image: true, EmbeddedContext: true}, first.AgentCapabilities.PromptCapabilities)
	require.Equal(t, acp.McpCapabilities{Http: true, Sse: true}, first.AgentCapabilities.McpCapabilities)
	require.Zero(t, w.Host.AgentPID(""), "the probe's agent is stopped")
}

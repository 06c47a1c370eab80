package activities

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// turnStarted returns the turn_started reports of turn, in the order they went out: sent
// alone, carried by a batch, or carried by the attempt's result.
func (c *signalRecorder) turnStarted(turn int64) []signals.TurnStartedSignal {
	var out []signals.TurnStartedSignal
	for _, s := range c.all() {
		switch v := s.arg.(type) {
		case signals.TurnStartedSignal:
			if v.TurnID == turn {
				out = append(out, v)
			}
		case signals.TurnEventsSignal:
			if v.TurnID == turn && v.Started != nil {
				out = append(out, *v.Started)
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.results {
		if r.turn == turn && r.res.Started != nil {
			out = append(out, *r.res.Started)
		}
	}
	return out
}

// Never forget silently (contract §10): a worker whose agent cannot load the session's agent
// session says so on turn_started, for the session to journal agent.context_lost.
func TestRunTurnReportsContextLostWhenTheLoadFails(t *testing.T) {
	rig := newTurnRig(t, t.TempDir())
	res := rig.mustRun(turnInput("s1", 1, rig.agent(), "hello"))
	require.Empty(t, rig.rec.turnStarted(1)[0].ContextLost, "a new session has nothing to lose")

	other := newTurnRig(t, t.TempDir()) // its agent keeps its transcripts elsewhere
	other.runner.MissingWorkspace = MissingWorkspaceEmpty
	other.runner.NoCarryContext = true
	in := turnInput("s1", 2, other.agent(), "again")
	in.AgentSessionID = res.AgentSessionID
	res2 := other.mustRun(in)
	require.NotEqual(t, res.AgentSessionID, res2.AgentSessionID)
	started := other.rec.turnStarted(2)
	require.NotEmpty(t, started)
	cl := started[len(started)-1].ContextLost
	require.NotNil(t, cl)
	require.Contains(t, cl.Reason, "session/load failed")
	require.Equal(t, res.AgentSessionID, cl.LostSessionID)
	require.Equal(t, res2.AgentSessionID, cl.NewSessionID)
	require.Zero(t, cl.Carried, "carrying context is off on this worker")
	// The workspace did not follow either: journaled, and the turn went on (the operator chose "empty").
	require.Equal(t, signals.WorkspaceMissingEmpty, started[0].WorkspaceMissing.Action)
}

// Failover without duplicates: an attempt that loads the agent session the lost attempt had
// sent the prompt into does not send it again; it asks the agent to continue.
func TestRunTurnDoesNotResendAPromptTheLoadedSessionHolds(t *testing.T) {
	transcripts := t.TempDir()
	rig := newTurnRig(t, transcripts)
	res := rig.mustRun(turnInput("s1", 1, rig.agent(), "hello"))

	other := newTurnRig(t, transcripts)
	other.runner.MissingWorkspace = MissingWorkspaceEmpty
	in := turnInput("s1", 2, other.agent(), "the prompt the lost attempt sent")
	in.AgentSessionID = res.AgentSessionID
	in.AttemptBase = 1
	in.Resume = &signals.TurnProgress{AgentSessionID: res.AgentSessionID, PromptSent: true}
	res2 := other.mustRun(in)
	require.Equal(t, int32(2), res2.Attempt, "numbered on from the attempt on the previous host")
	require.Equal(t, res.AgentSessionID, res2.AgentSessionID)
	started := other.rec.turnStarted(2)
	require.True(t, started[len(started)-1].Resumed)
	text := strings.Join(joinedTexts(t, other.rec.events(2)), "")
	require.NotContains(t, text, "the prompt the lost attempt sent")
	// Told to go on, the testagent (as a real agent) continues the last prompt it had.
	require.Contains(t, text, "hello")

	// Without the heartbeat's word that the prompt went out, it is sent.
	third := newTurnRig(t, transcripts)
	third.runner.MissingWorkspace = MissingWorkspaceEmpty
	in.Resume = &signals.TurnProgress{AgentSessionID: res.AgentSessionID}
	in.TurnID = 3
	third.mustRun(in)
	require.Contains(t, strings.Join(joinedTexts(t, third.rec.events(3)), ""), "the prompt the lost attempt sent")
}

// Workspaces: a session whose workspace is not on the worker that takes its turn fails the
// turn with a message that says what to do, unless the operator chose to go on empty.
func TestRunTurnFailsWhenTheWorkspaceDidNotFollow(t *testing.T) {
	rig := newTurnRig(t, t.TempDir())
	res := rig.mustRun(turnInput("s1", 1, rig.agent(), "hello"))
	other := newTurnRig(t, t.TempDir())
	in := turnInput("s1", 2, other.agent(), "again")
	in.AgentSessionID = res.AgentSessionID
	_, err := other.run(in)
	require.ErrorContains(t, err, "workspace is not on this worker")
	started := other.rec.turnStarted(2)
	require.Len(t, started, 1)
	require.Equal(t, signals.WorkspaceMissingFailed, started[0].WorkspaceMissing.Action)
	// It stays missing: the failed turn left no empty workspace behind.
	_, err = other.run(in)
	require.ErrorContains(t, err, "workspace is not on this worker")
}

// Never forget silently, carried over: the new agent session's first prompt is the session's
// transcript (asked of the session by the transcript query, for the turns before this one,
// bounded as the worker says) and then the turn's prompt; a failed query costs only the seed.
func TestRunTurnSeedsANewAgentSessionWithTheTranscript(t *testing.T) {
	rig := newTurnRig(t, t.TempDir())
	res := rig.mustRun(turnInput("s1", 1, rig.agent(), "remember w01"))
	require.Empty(t, rig.rec.queries, "a turn that lost nothing asks for no transcript")

	other := newTurnRig(t, t.TempDir()) // its agent cannot load the first one's session
	other.runner.MissingWorkspace = MissingWorkspaceEmpty
	other.runner.CarryContextBytes = 4096
	const seed = "[earlier] user: remember w01"
	other.rec.transcript = func(signals.TranscriptRequest) (signals.TranscriptResult, error) {
		return signals.TranscriptResult{Text: seed, Turns: 1, Truncated: true}, nil
	}
	in := turnInput("s1", 2, other.agent(), "/received")
	in.AgentSessionID = res.AgentSessionID
	other.mustRun(in)
	require.Equal(t, []signals.TranscriptRequest{{BeforeTurn: 2, MaxBytes: 4096}}, other.rec.queries)
	started := other.rec.turnStarted(2)
	cl := started[len(started)-1].ContextLost
	require.NotNil(t, cl)
	require.Equal(t, len(seed), cl.Carried)
	require.True(t, cl.CarriedTruncated)
	received := strings.Join(joinedTexts(t, other.rec.events(2)), "")
	require.Contains(t, received, seed)
	require.True(t, strings.HasSuffix(strings.TrimSpace(received), "/received"), "the prompt comes after the transcript: %q", received)

	// The query fails: agent.context_lost all the same, nothing carried, the turn goes on.
	third := newTurnRig(t, t.TempDir())
	third.runner.MissingWorkspace = MissingWorkspaceEmpty
	in.TurnID = 3
	third.mustRun(in)
	require.Len(t, third.rec.queries, 1)
	started = third.rec.turnStarted(3)
	cl = started[len(started)-1].ContextLost
	require.NotNil(t, cl)
	require.Zero(t, cl.Carried)
	require.NotContains(t, strings.Join(joinedTexts(t, third.rec.events(3)), ""), seed)
}

// Never forget silently (contract §10): a retry whose lost attempt's beats never reached the
// server still loads the agent session that attempt opened — the session knows it from
// turn_started — and, not knowing whether the prompt went out, sends it.
func TestARetryWithoutTheLostAttemptsBeatsLoadsTheAgentSessionTheSessionKnows(t *testing.T) {
	transcripts := t.TempDir()
	rig := newTurnRig(t, transcripts)
	res := rig.mustRun(turnInput("s1", 1, rig.agent(), "hello"))

	other := newTurnRig(t, transcripts)
	other.runner.MissingWorkspace = MissingWorkspaceEmpty
	other.rec.status = func() signals.Status { return signals.Status{AgentSessionID: res.AgentSessionID} }
	in := turnInput("s1", 1, other.agent(), "the prompt of the lost attempt")
	in.AttemptBase = 1 // the first attempt was lost before its beats said anything
	res2 := other.mustRun(in)
	require.Equal(t, res.AgentSessionID, res2.AgentSessionID, "the retry loaded the agent session the lost attempt opened")
	started := other.rec.turnStarted(1)
	require.Nil(t, started[len(started)-1].ContextLost)
	require.False(t, started[len(started)-1].Resumed)
	require.Contains(t, strings.Join(joinedTexts(t, other.rec.events(1)), ""), "the prompt of the lost attempt")
}

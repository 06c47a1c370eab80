package session

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// lastCmd is the last command the rig carried out, as it prints it.
func (r *coreRig) lastCmd() string { return r.cmdLog[len(r.cmdLog)-1] }

// Reference: contract §6, Continue-as-new, also mid-turn: a turn continues as new only
// once the session knows the host that runs its attempt, and the next run adopts the attempt
// from that host (ResumeTurn) with what it knows of the attempt's progress.
func TestResume_ContinueAsNewWaitsForTheAttemptsHostAndTheNextRunAdoptsIt(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	_, err := do[signals.PromptResult](r, signals.UpdatePrompt, signals.PromptRequest{Text: "go", ClientMessageID: "m1"})
	require.NoError(t, err)
	require.Equal(t, []string{"start-turn"}, r.settle())
	r.info.Suggested = true
	require.Empty(t, r.settle(), "no host known: the next run could not adopt the attempt")
	r.signal(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 1,
		Started: &signals.TurnStartedSignal{HostQueue: "host1", AgentSessionID: "a1"},
		Events:  []json.RawMessage{[]byte(`{"update":{"sessionUpdate":"agent_message_chunk"}}`)}})
	require.Equal(t, []string{"continue-as-new", "resume-turn"}, r.settle())
	require.Equal(t, "resume-turn turn=1 attempt=1 host=host1 limited=false", r.lastCmd())
	c := r.core.resumeTurn()
	require.Equal(t, &signals.TurnProgress{AgentSessionID: "a1", PromptSent: true}, c.Resume, "a batch came: the prompt is in the agent session")
	require.Equal(t, "go", c.Input.Text)
	require.Empty(t, r.settle(), "resumed once")

	r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, Batches: 1, StopReason: "end_turn"})
	require.Contains(t, eventKinds(r.newEvents()), "turn.ended")
	require.Nil(t, r.core.Turn)
}

// Reference: contract §6: a cancel sent to one run's drive of a turn is asked again of
// the next run's, after it adopted the attempt.
func TestResume_ACancelSentBeforeContinueAsNewIsSentAgain(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.startTurn("go", "m1")
	_, err := do[signals.CancelResult](r, signals.UpdateCancel, signals.CancelRequest{})
	require.NoError(t, err)
	require.Equal(t, []string{"request-cancel", "deliver"}, r.settle())
	r.answer(signals.DeliveryResult{Taken: true}, nil, false)
	r.info.Suggested = true
	require.Equal(t, []string{"continue-as-new", "resume-turn", "request-cancel"}, r.settle())
}

// Reference: contract §11, Limits: a limited turn's wait continues as new; the next run waits
// out the rest (ResumeTurn Limited), at once when a person already asked to retry now.
func TestResume_ALimitedWaitContinuesAsNew(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.limitTurn(coreEpoch.Add(time.Hour))
	r.signal(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 1, Events: []json.RawMessage{[]byte(`{}`)}})
	_, err := do[signals.RetryNowResult](r, signals.UpdateRetryNow, signals.RetryNowRequest{})
	require.NoError(t, err)
	require.Equal(t, []string{"retry-now"}, r.settle())
	r.info.Suggested = true
	require.Equal(t, []string{"continue-as-new", "resume-turn"}, r.settle())
	require.Equal(t, "resume-turn turn=1 attempt=1 host= limited=true", r.lastCmd())
	c := r.core.resumeTurn()
	require.True(t, c.RetryNow)
	require.Equal(t, int32(1), c.LimitWaits)
	require.Equal(t, "host1", c.Limited.HostQueue)
}

package session

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// limitTurn starts turn 1 and has its attempt 1 limited after batch 1, until retryAt.
func (r *coreRig) limitTurn(retryAt time.Time) {
	r.t.Helper()
	r.startTurn("go", "m1")
	r.signal(signals.SignalTurnLimited, signals.TurnLimitedSignal{
		TurnID: 1, Attempt: 1, Batches: 1, HostQueue: "host1", AgentSessionID: "a1",
		Limit: signals.LimitInfo{Reason: signals.LimitRateLimited, Message: "Claude is temporarily rate limited.", RetryAt: retryAt, Backoff: true},
	})
}

// Reference: contract §11, Limits: turn.limited is journaled after the attempt's last batch,
// the session waits (waiting_limit, its clock paused), and the next attempt's turn.restarted
// ends the wait and says why it ran.
func TestCore_LimitedTurnWaitsAndTheNextAttemptEndsTheWait(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	retryAt := coreEpoch.Add(2 * time.Minute)
	r.limitTurn(retryAt)
	r.newEvents()
	require.Equal(t, signals.StateRunning, r.core.state(), "turn.limited waits for batch 1")
	require.Nil(t, r.core.Status().WaitingLimit)
	r.signal(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 1, Events: []json.RawMessage{[]byte(`{"update":{"sessionUpdate":"agent_message_chunk"}}`)}})
	require.Equal(t, []string{"agent.update", "turn.limited"}, eventKinds(r.newEvents()))
	st := r.core.Status()
	require.Equal(t, signals.StateWaitingLimit, st.State)
	require.NotNil(t, st.WaitingLimit)
	require.Equal(t, retryAt, st.WaitingLimit.RetryAt)
	require.Nil(t, st.TurnDeadline, "the clock is paused while the turn waits")
	require.Equal(t, &retryAt, r.core.waitingUntil())
	require.Contains(t, r.core.details(), "waiting for the usage limit to reset at 2026-12-01 12:02:00 UTC (backing off")
	require.Contains(t, r.core.details(), "Claude is temporarily rate limited.")
	r.core.build.Confidential = true
	require.NotContains(t, r.core.details(), "Claude is temporarily", "a confidential session shows no provider's words")
	r.core.build.Confidential = false
	_, err := do[signals.SteerResult](r, signals.UpdateSteer, signals.SteerRequest{Text: "x", ExpectedTurnID: "1"})
	require.Error(t, err, "no steer reaches a turn that waits")

	r.advance(2 * time.Minute)
	r.signal(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 2, HostQueue: "host2"})
	evs := r.newEvents()
	require.Equal(t, []string{"turn.restarted"}, eventKinds(evs))
	require.Contains(t, string(evs[0].Data), "attempt 1 was limited (rate_limited); its wait ended at 12:02:00 UTC; attempt 2 runs the prompt again")
	require.Equal(t, signals.StateRunning, r.core.state())
	require.Nil(t, r.core.waitingUntil())
	require.NotNil(t, r.core.Status().TurnDeadline, "the clock runs again")
	r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 2, StopReason: "end_turn"})
	require.Equal(t, []string{"turn.ended"}, eventKinds(r.newEvents()))
}

// Reference: contract §11, Limits: retry_now ends the wait (journaled with who asked, handed to
// the drive once); nothing waits → no_live_turn; an observer may not.
func TestCore_RetryNowIsSentOnceAndOnlyWhileATurnWaits(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	_, err := do[signals.RetryNowResult](r, signals.UpdateRetryNow, signals.RetryNowRequest{})
	require.ErrorContains(t, err, "waits for a limit")
	r.limitTurn(coreEpoch.Add(time.Hour))
	r.signal(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 1})
	r.newEvents()
	_, err = do[signals.Status](r, signals.UpdateAttach, signals.AttachRequest{ViewerID: "obs", Role: signals.RoleObserver, LeaseSeconds: 60})
	require.NoError(t, err)
	require.Error(t, validateErr(r, signals.UpdateRetryNow, signals.RetryNowRequest{ViewerID: "obs"}))
	require.Error(t, validateErr(r, signals.UpdateRetryNow, signals.RetryNowRequest{TurnID: 2}))
	_, err = do[signals.RetryNowResult](r, signals.UpdateRetryNow, signals.RetryNowRequest{AnsweredBy: "alice"})
	require.NoError(t, err)
	_, err = do[signals.RetryNowResult](r, signals.UpdateRetryNow, signals.RetryNowRequest{AnsweredBy: "bob"})
	require.NoError(t, err, "a second retry_now is answered, journals nothing")
	require.Equal(t, []string{"turn.retry_now"}, eventKinds(r.newEvents()))
	require.Equal(t, []string{"retry-now"}, r.settle())
	require.Empty(t, r.settle(), "sent once")
	r.signal(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 2, HostQueue: "host1"})
	require.Contains(t, string(r.newEvents()[0].Data), "a retry now by alice ended its wait")
}

// Reference: contract §11, Limits: cancel ends the wait as it ends any turn.
func TestCore_CancelEndsALimitsWait(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.limitTurn(coreEpoch.Add(time.Hour))
	r.signal(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 1})
	_, err := do[signals.CancelResult](r, signals.UpdateCancel, signals.CancelRequest{})
	require.NoError(t, err)
	require.Contains(t, r.settle(), "request-cancel")
	r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, StopReason: "cancelled"})
	require.Nil(t, r.core.Turn)
	require.Equal(t, "cancelled", r.core.LastOutcome)
}

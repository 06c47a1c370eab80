package session

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

const askSchema = `{"type":"object","properties":{"question_0":{"type":"string","oneOf":[{"const":"left","title":"left"},{"const":"right","title":"right"}]}},"required":["question_0"]}`

func (r *coreRig) ask(id string) {
	r.t.Helper()
	r.signal(signals.SignalElicitationRequested, signals.ElicitationRequestedSignal{
		TurnID: 1, Attempt: 1, RequestID: id, Mode: signals.ElicitationForm, Message: "Which approach?", Schema: json.RawMessage(askSchema),
	})
}

// Reference: contract §11, A person's request: a question is journaled, suspends the session
// and pauses the clock; an answer that does not fit the form is refused and changes nothing;
// the first valid answer wins, names who gave it, and is delivered into the turn.
func TestCore_QuestionFirstValidAnswerWins(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.startTurn("go", "m1")
	r.newEvents()
	r.ask("q1.1.1")
	require.Equal(t, []string{"elicitation.requested"}, eventKinds(r.newEvents()))
	st := r.core.Status()
	require.Equal(t, signals.StateSuspended, st.State)
	require.Len(t, st.PendingElicitations, 1)
	require.Nil(t, st.TurnDeadline, "the clock is paused while a person is asked")
	_, _, awaiting := r.core.searchAttributes()
	require.True(t, awaiting)
	require.Contains(t, r.core.details(), "waiting for an answer to *Which approach?* (`q1.1.1`, turn 1)")
	r.core.build.Confidential = true
	require.Contains(t, r.core.details(), "waiting for an answer to a question (`q1.1.1`, turn 1)")
	require.NotContains(t, r.core.details(), "Which approach")
	r.core.build.Confidential = false

	bad := signals.ElicitationRespondRequest{RequestID: "q1.1.1", Action: signals.ActionAccept, Content: json.RawMessage(`{"question_0":"middle"}`)}
	require.ErrorContains(t, validateErr(r, signals.UpdateElicitationRespond, bad), "question_0 must be one of left, right")
	_, err := do[signals.ElicitationRespondResult](r, signals.UpdateElicitationRespond, bad)
	require.Error(t, err)
	require.Empty(t, r.newEvents(), "a refused answer changes nothing")
	require.Error(t, validateErr(r, signals.UpdateElicitationRespond, signals.ElicitationRespondRequest{RequestID: "q9", Action: signals.ActionAccept}))
	require.Error(t, validateErr(r, signals.UpdateElicitationRespond, signals.ElicitationRespondRequest{RequestID: "q1.1.1", Action: "maybe"}))

	res, err := do[signals.ElicitationRespondResult](r, signals.UpdateElicitationRespond, signals.ElicitationRespondRequest{RequestID: "q1.1.1", Action: signals.ActionAccept, Content: json.RawMessage(`{"question_0":"right"}`), AnsweredBy: "alice"})
	require.NoError(t, err)
	require.Equal(t, "alice", res.Resolution.AnsweredBy)
	again, err := do[signals.ElicitationRespondResult](r, signals.UpdateElicitationRespond, signals.ElicitationRespondRequest{RequestID: "q1.1.1", Action: signals.ActionDecline, AnsweredBy: "bob"})
	require.NoError(t, err)
	require.Equal(t, res.Resolution, again.Resolution, "a later answer gets the first one back")
	require.Equal(t, []string{"elicitation.resolved"}, eventKinds(r.newEvents()))
	require.Equal(t, signals.StateRunning, r.core.state())
	r.settle()
	require.NotNil(t, r.sent)
	require.Equal(t, signals.DeliverElicitation, r.sent.Kind)
	require.JSONEq(t, `{"question_0":"right"}`, string(r.sent.Content))
}

// Reference: contract §11: the deadline fails closed with cancel (delivered); the turn's end
// withdraws what is still open (not delivered: the runner answers the agent itself).
func TestCore_QuestionDeadlineCancelsAndTheTurnsEndWithdraws(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1", PermissionTimeout: "1m"})
	r.startTurn("go", "m1")
	r.ask("q1.1.1")
	r.settle()
	r.newEvents()
	r.ring()
	evs := r.newEvents()
	require.Equal(t, []string{"elicitation.resolved"}, eventKinds(evs))
	var res signals.ElicitationResolution
	require.NoError(t, json.Unmarshal(evs[0].Data, &res))
	require.Equal(t, signals.ActionCancel, res.Action)
	require.Equal(t, signals.DecidedByDeadline, res.DecidedBy)
	r.settle()
	require.NotNil(t, r.sent, "the agent is told cancel")
	r.answer(signals.DeliveryResult{}, nil, false)

	r.advance(time.Second)
	r.ask("q1.1.2")
	r.newEvents()
	r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
	evs = r.newEvents()
	require.Equal(t, []string{"elicitation.resolved", "turn.ended"}, eventKinds(evs))
	require.Contains(t, string(evs[0].Data), `"decided_by":"cancel"`)
	require.Empty(t, r.core.Elicitations)
}

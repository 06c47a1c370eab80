package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/tacp-dev/tacp/workflows/session"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
)

// The session shell under the SDK's test environment. Each turn's RunTurn activity is
// played by a mock that runs until the session cancels it (runTurnsUntilCancelled); the
// tests play the turn runner by sending its signals. The real runner runs in the e2e tests,
// and a recorded history replays its commands.

// seenTurn, when set, is handed every turn's input as its RunTurn starts.
var seenTurn func(signals.TurnInput)

// registerRunTurn names the RunTurn activity in env, for runTurnsUntilCancelled to play.
func registerRunTurn(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivityWithOptions(func(context.Context, signals.RunTurnInput) (signals.RunTurnResult, error) {
		panic("played by runTurnsUntilCancelled")
	}, activity.RegisterOptions{Name: signals.ActivityRunTurn})
}

// runTurnsUntilCancelled plays every RunTurn of env's sessions: it reports nothing and ends
// only when cancelled. It waits on the workflow's clock, so the test environment's timers
// (the harness's steps, the session's own) fire while it runs. The environment takes no
// registration after it.
func runTurnsUntilCancelled(env *testsuite.TestWorkflowEnvironment) {
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		var in signals.RunTurnInput
		if info.ActivityType.Name == signals.ActivityRunTurn && seenTurn != nil && args.Get(&in) == nil {
			seenTurn(in.TurnInput)
		}
	})
	env.OnActivity(signals.ActivityRunTurn, mock.Anything, mock.Anything).
		After(100*365*24*time.Hour).
		Return(signals.RunTurnResult{}, nil)
}

type harness struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment
	at  time.Duration
	// released is what ReleaseAgent was asked, in order.
	released []signals.ReleaseAgentRequest
}

func newHarness(t *testing.T) *harness {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(quiet{})
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(SessionWorkflow, workflow.RegisterOptions{Name: signals.SessionWorkflowType})
	registerRunTurn(env)
	h := &harness{t: t, env: env}
	env.RegisterActivityWithOptions(func(_ context.Context, req signals.ReleaseAgentRequest) error {
		h.released = append(h.released, req)
		return nil
	}, activity.RegisterOptions{Name: signals.ActivityReleaseAgent})
	return h
}

// steerRunningTurn prompts turn 1, reports it running on host1 and steers it ("go left",
// accepted), a step each.
func (h *harness) steerRunningTurn() {
	h.step(func() { h.prompt("work", "m1", func(signals.PromptResult, error) {}) })
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 1, HostQueue: "host1"})
	})
	h.step(func() {
		h.update(signals.UpdateSteer, signals.SteerRequest{Text: "go left", ExpectedTurnID: "1", ClientMsgID: "c1"}, func(_ any, err error) {
			require.NoError(h.t, err)
		})
	})
}

// step runs fn one simulated second after the previous step.
func (h *harness) step(fn func()) {
	h.at += time.Second
	h.env.RegisterDelayedCallback(fn, h.at)
}

// update sends an update and hands its outcome to check.
func (h *harness) update(name string, arg any, check func(result any, err error)) {
	h.env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
		OnReject: func(err error) { check(nil, err) },
		OnAccept: func() {},
		OnComplete: func(res any, err error) {
			check(res, err)
		},
	}, arg)
}

func (h *harness) prompt(text, id string, check func(signals.PromptResult, error)) {
	h.update(signals.UpdatePrompt, signals.PromptRequest{Text: text, ClientMessageID: id}, func(res any, err error) {
		var r signals.PromptResult
		if err == nil {
			r = res.(signals.PromptResult)
		}
		check(r, err)
	})
}

func (h *harness) events() []signals.Event {
	v, err := h.env.QueryWorkflow(signals.QueryEvents, signals.EventsRequest{})
	require.NoError(h.t, err)
	var res signals.EventsResult
	require.NoError(h.t, v.Get(&res))
	return res.Events
}

func (h *harness) status() signals.Status {
	v, err := h.env.QueryWorkflow(signals.QueryStatus)
	require.NoError(h.t, err)
	var st signals.Status
	require.NoError(h.t, v.Get(&st))
	return st
}

func kinds(evs []signals.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

func rejectionType(t *testing.T, err error) string {
	t.Helper()
	rej, ok := rejection.As(err)
	require.True(t, ok, "want a rejection, got %v", err)
	return rej.Type
}

func (h *harness) run(cfg any) error {
	runTurnsUntilCancelled(h.env)
	h.env.ExecuteWorkflow(signals.SessionWorkflowType, cfg)
	require.True(h.t, h.env.IsWorkflowCompleted())
	return h.env.GetWorkflowError()
}

func (h *harness) closeSession() {
	h.step(func() { h.update(signals.UpdateClose, signals.CloseRequest{Reason: "test"}, func(any, error) {}) })
}

func TestSession_TurnLoopJournalsEveryBatchOnceAndEndsTheTurn(t *testing.T) {
	h := newHarness(t)
	h.step(func() {
		h.prompt("hello", "m1", func(r signals.PromptResult, err error) {
			require.NoError(t, err)
			require.Equal(t, signals.PromptResult{TurnID: 1, Position: 0}, r)
		})
	})
	h.step(func() {
		require.Equal(t, signals.StateRunning, h.status().State)
		require.Equal(t, "1", h.status().SteerToken)
		h.prompt("second", "m2", func(r signals.PromptResult, err error) {
			require.NoError(t, err)
			require.Equal(t, signals.PromptResult{TurnID: 2, Position: 1}, r)
		})
		h.env.SignalWorkflow(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 1, AgentSessionID: "a1"})
		h.env.SignalWorkflow(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 1, Events: []json.RawMessage{chunk("a"), chunk("b")}})
		// A repeated delivery of batch 1 is dropped.
		h.env.SignalWorkflow(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 1, Events: []json.RawMessage{chunk("a"), chunk("b")}})
		h.env.SignalWorkflow(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 2, Events: []json.RawMessage{chunk("c")}})
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn", Batches: 2})
	})
	h.step(func() {
		st := h.status()
		require.Equal(t, int64(2), st.TurnID, "the queued prompt starts when the first turn ends")
		require.Equal(t, "a1", st.AgentSessionID)
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 2, Attempt: 1, StopReason: "end_turn"})
	})
	h.step(func() {
		require.Equal(t, []string{
			"session.started", "prompt.accepted", "turn.started", "prompt.accepted",
			"agent.update", "agent.update", "agent.update", "turn.ended",
			"turn.started", "turn.ended",
		}, kinds(h.events()))
		require.Equal(t, signals.StateIdle, h.status().State)
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
}

func TestSession_TurnFinishedWaitsForItsLastBatch(t *testing.T) {
	h := newHarness(t)
	h.step(func() { h.prompt("hello", "m1", func(signals.PromptResult, error) {}) })
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn", Batches: 1})
	})
	h.step(func() {
		require.Equal(t, signals.StateRunning, h.status().State, "batch 1 has not arrived")
		h.env.SignalWorkflow(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 1, Events: []json.RawMessage{chunk("late")}})
	})
	h.step(func() {
		require.Equal(t, []string{"session.started", "prompt.accepted", "turn.started", "agent.update", "turn.ended"}, kinds(h.events()))
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
}

// Reference: contract §3, a rejected update changes nothing and writes no history. The
// journal is compared once every update has been answered, in the next step.
func TestSession_RejectedUpdatesWriteNothing(t *testing.T) {
	h := newHarness(t)
	var before []signals.Event
	answered := 0
	h.step(func() {
		before = h.events()
		h.update(signals.UpdateSteer, signals.SteerRequest{Text: "x", ExpectedTurnID: "1"}, func(_ any, err error) {
			require.Equal(t, signals.RejectNoLiveTurn, rejectionType(t, err))
			answered++
		})
		h.prompt("   ", "m1", func(_ signals.PromptResult, err error) {
			require.Equal(t, signals.RejectInvalidRequest, rejectionType(t, err))
			answered++
		})
		h.update(signals.UpdateCancel, signals.CancelRequest{}, func(_ any, err error) {
			require.Equal(t, signals.RejectNoLiveTurn, rejectionType(t, err))
			answered++
		})
	})
	h.step(func() {
		require.Equal(t, 3, answered, "every update was answered")
		require.Equal(t, before, h.events())
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
}

func TestSession_SteeringOffIsNoSteerChannel(t *testing.T) {
	h := newHarness(t)
	h.step(func() { h.prompt("work", "m1", func(signals.PromptResult, error) {}) })
	h.step(func() {
		h.update(signals.UpdateSteer, signals.SteerRequest{Text: "x", ExpectedTurnID: "0"}, func(_ any, err error) {
			rej, _ := rejection.As(err)
			require.Equal(t, signals.RejectStaleTurn, rej.Type)
			require.Equal(t, signals.StaleTurnDetails{Expected: "0", Actual: "1"}, rej.Details)
		})
		h.update(signals.UpdateSteer, signals.SteerRequest{Text: "x", ExpectedTurnID: "1"}, func(_ any, err error) {
			require.Equal(t, signals.RejectNoSteerChannel, rejectionType(t, err))
		})
	})
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, StopReason: "end_turn"})
	})
	h.closeSession()
	off := false
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1", Steering: &off}))
}

func TestSession_AcceptedSteerWaitsForTheTurnsHost(t *testing.T) {
	h := newHarness(t)
	h.step(func() { h.prompt("work", "m1", func(signals.PromptResult, error) {}) })
	h.step(func() {
		// The turn has not reported its host yet: the steer is accepted and waits.
		h.update(signals.UpdateSteer, signals.SteerRequest{Text: "go left", ExpectedTurnID: "1", ClientMsgID: "c1"}, func(res any, err error) {
			require.NoError(t, err)
			require.Equal(t, "1.1", res.(signals.SteerResult).NextExpectedTurnID)
		})
	})
	h.step(func() {
		require.Equal(t, "1.1", h.status().SteerToken)
		// The turn ends before any host reported: the steer could not be carried, which is
		// journaled before the turn's end (contract §6, Steer delivery).
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, StopReason: "end_turn"})
	})
	h.step(func() {
		evs := h.events()
		require.Equal(t, []string{"session.started", "prompt.accepted", "turn.started", "steer.accepted", "steer.delivered", "turn.ended"}, kinds(evs))
		var d signals.SteerDeliveredData
		require.NoError(t, json.Unmarshal(evs[4].Data, &d))
		require.Equal(t, signals.SteerDeliveredData{Offset: 1, How: signals.HowFailed, Error: "the turn ended before the steer reached it"}, d)
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
}

func TestSession_SignalTwinJournalsItsRejection(t *testing.T) {
	h := newHarness(t)
	h.step(func() {
		h.env.SignalWorkflow(signals.UpdatePrompt, signals.PromptRequest{Text: "", ClientMessageID: "m1"})
		h.env.SignalWorkflow(signals.UpdateSteer, signals.SteerRequest{Text: "x", ExpectedTurnID: "3", ClientMsgID: "s1"})
	})
	h.step(func() {
		evs := h.events()
		require.Equal(t, []string{"session.started", "prompt.rejected", "steer.rejected"}, kinds(evs))
		var d signals.RejectedData
		require.NoError(t, json.Unmarshal(evs[2].Data, &d))
		require.Equal(t, signals.RejectNoLiveTurn, d.Type)
		h.env.SignalWorkflow(signals.UpdatePrompt, signals.PromptRequest{Text: "ok", ClientMessageID: "m2"})
	})
	h.step(func() {
		require.Equal(t, int64(1), h.status().TurnID, "an accepted prompt signal starts a turn")
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, StopReason: "end_turn"})
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
}

func TestSession_CancelMarksTheTurnCancellingOnce(t *testing.T) {
	h := newHarness(t)
	h.step(func() { h.prompt("/sleep 1m", "m1", func(signals.PromptResult, error) {}) })
	h.step(func() {
		h.update(signals.UpdateCancel, signals.CancelRequest{}, func(res any, err error) {
			require.NoError(t, err)
			require.Equal(t, signals.CancelCancelling, res.(signals.CancelResult).Outcome)
			st := h.status()
			require.Equal(t, signals.StateCancelling, st.State)
			require.Empty(t, st.SteerToken, "a cancelling turn takes no steers")
		})
		h.update(signals.UpdateCancel, signals.CancelRequest{TurnID: 1}, func(res any, err error) {
			require.NoError(t, err)
			require.Equal(t, signals.CancelAlreadyCancelling, res.(signals.CancelResult).Outcome)
		})
	})
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "cancelled"})
	})
	h.step(func() {
		evs := h.events()
		require.Equal(t, []string{"session.started", "prompt.accepted", "turn.started", "turn.cancelling", "turn.ended"}, kinds(evs), string(evs[len(evs)-1].Data))
		require.JSONEq(t, `{"stop_reason":"cancelled"}`, string(evs[4].Data))
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
}

func TestSession_CloseRejectsPromptsAndEndsAfterTheTurn(t *testing.T) {
	h := newHarness(t)
	h.step(func() {
		h.prompt("one", "m1", func(signals.PromptResult, error) {})
		h.prompt("two", "m2", func(signals.PromptResult, error) {})
	})
	h.closeSession()
	h.step(func() {
		h.prompt("three", "m3", func(_ signals.PromptResult, err error) {
			require.Equal(t, signals.RejectSessionClosed, rejectionType(t, err))
		})
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, StopReason: "cancelled"})
	})
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
	evs := h.events()
	last := evs[len(evs)-1]
	require.Equal(t, signals.EventSessionClosed, last.Kind)
	require.JSONEq(t, `{"reason":"test","dropped":["m2"]}`, string(last.Data))
}

// canInput extracts the input a run continued as new with.
func canInput(t *testing.T, err error) session.RunInput {
	t.Helper()
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	var cfg session.RunInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &cfg))
	return cfg
}

func TestSession_ContinueAsNewMidTurnCarriesJournalDedupAndTheLiveTurn(t *testing.T) {
	// Run 1: a turn running with one batch journaled, then the server suggests
	// continue-as-new.
	h := newHarness(t)
	h.step(func() { h.prompt("long", "m1", func(signals.PromptResult, error) {}) })
	h.step(func() {
		h.prompt("queued", "m2", func(signals.PromptResult, error) {})
		h.env.SignalWorkflow(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 1, AgentSessionID: "a1", HostQueue: "host1"})
		h.env.SignalWorkflow(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 1, Events: []json.RawMessage{chunk("a")}})
	})
	h.step(func() {
		// Delivered without a workflow task of its own: it sits in its channel when the next
		// task continues as new, and must be drained, not lost.
		h.env.SignalWorkflowSkippingWorkflowTask(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 2, Events: []json.RawMessage{chunk("b")}})
	})
	h.step(func() { h.env.SetContinueAsNewSuggested(true) })
	next := canInput(t, h.run(signals.SessionConfig{SessionID: "s1"}))
	run1 := h.events()
	require.Equal(t, "agent.update", run1[len(run1)-1].Kind)

	// Run 2 starts from the carried state.
	h2 := newHarness(t)
	h2.step(func() {
		st := h2.status()
		require.Equal(t, 2, st.Run)
		require.Equal(t, int64(1), st.TurnID)
		require.Equal(t, "1", st.SteerToken)
		require.Len(t, st.Queue, 1)
		require.Equal(t, run1, h2.events(), "the journal tail crosses continue-as-new unchanged")
		h2.prompt("long", "m1", func(r signals.PromptResult, err error) {
			require.NoError(t, err)
			require.True(t, r.Duplicate, "the dedup index crosses continue-as-new")
			require.Equal(t, int64(1), r.TurnID)
		})
		// Batch 2 was journaled in run 1: a redelivery is dropped; batch 3 is new.
		h2.env.SignalWorkflow(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 2, Events: []json.RawMessage{chunk("b")}})
		h2.env.SignalWorkflow(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 3, Events: []json.RawMessage{chunk("c")}})
		h2.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn", Batches: 3})
	})
	h2.step(func() {
		require.Equal(t, int64(2), h2.status().TurnID, "the carried queue runs next")
		h2.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 2, StopReason: "end_turn"})
	})
	h2.closeSession()
	require.NoError(t, h2.run(next))
	evs := h2.events()
	for i, ev := range evs {
		require.Equal(t, evs[0].Seq+int64(i), ev.Seq, "seq is contiguous across runs")
	}
	require.Equal(t, []string{"agent.update", "turn.ended", "turn.started", "turn.ended", "session.closed"}, kinds(evs[len(run1):]))
}

func TestSession_InvalidConfigFailsTheStart(t *testing.T) {
	h := newHarness(t)
	err := h.run(signals.SessionConfig{SessionID: "bad/id"})
	require.ErrorContains(t, err, "invalid session id")
}

// quiet drops the test environment's logs.
type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}

func TestSession_CloseDropsTheQueueEvenWhileADeliveryIsInFlight(t *testing.T) {
	h := newHarness(t)
	// The cancel that close delivers is still in flight when the turn ends: the fake host
	// reports the turn's end before it answers the delivery (the test environment handles
	// the signal before the activity's result, in the order they were posted).
	h.env.RegisterActivityWithOptions(func(ctx context.Context, d signals.Delivery) (signals.DeliveryResult, error) {
		if d.Kind == signals.DeliverCancel {
			h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "cancelled"})
		}
		return signals.DeliveryResult{}, nil
	}, activity.RegisterOptions{Name: signals.ActivityDeliver})
	h.step(func() {
		h.prompt("one", "m1", func(signals.PromptResult, error) {})
		h.prompt("two", "m2", func(signals.PromptResult, error) {})
	})
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 1, HostQueue: "host1"})
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
	evs := h.events()
	for _, ev := range evs {
		require.False(t, ev.Kind == signals.EventTurnStarted && ev.TurnID == 2, "no turn starts after close")
	}
	last := evs[len(evs)-1]
	require.Equal(t, signals.EventSessionClosed, last.Kind)
	require.JSONEq(t, `{"reason":"test","dropped":["m2"]}`, string(last.Data))
}

// A steer injected into a turn is reported before that turn's end, even when the runner's
// early turn_finished reaches the session before the Deliver activity's result does (it
// did in 4 of 7 runs with real agents).
func TestSession_SteerDeliveredBeforeTheTurnEndsWhenTurnFinishedOvertakesIt(t *testing.T) {
	h := newHarness(t)
	// A host that answers the delivery when it is done (no Async): the agent answered with
	// the steer injected, and the runner's early turn_finished overtakes the delivery's
	// result, which the host sends after it.
	h.env.RegisterActivityWithOptions(func(_ context.Context, d signals.Delivery) (signals.DeliveryResult, error) {
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
		return signals.DeliveryResult{How: signals.HowInjected}, nil
	}, activity.RegisterOptions{Name: signals.ActivityDeliver})
	h.steerRunningTurn()
	h.step(func() {
		evs := h.events()
		require.Equal(t, []string{"session.started", "prompt.accepted", "turn.started", "steer.accepted", "steer.delivered", "turn.ended"}, kinds(evs))
		var d signals.SteerDeliveredData
		require.NoError(t, json.Unmarshal(evs[4].Data, &d))
		require.Equal(t, signals.HowInjected, d.How)
		require.Equal(t, signals.StateIdle, h.status().State)
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
}

// A turn's usage counters are summed into the session's; its gauges (objects: the agent's
// context window and cumulative cost, from usage_update) are kept as the latest value.
func TestSession_UsageSumsCountersAndKeepsTheLatestGauges(t *testing.T) {
	h := newHarness(t)
	finish := func(turn int64, usage string) {
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: turn, Attempt: 1, StopReason: "end_turn", Usage: json.RawMessage(usage)})
	}
	h.step(func() { h.prompt("one", "m1", func(signals.PromptResult, error) {}) })
	h.step(func() {
		finish(1, `{"inputTokens":10,"totalTokens":38,"cachedReadTokens":5,"context":{"used":30,"size":200000},"cost":{"amount":0.01,"currency":"USD"}}`)
	})
	h.step(func() { h.prompt("two", "m2", func(signals.PromptResult, error) {}) })
	// An agent that reports only usage_update (codex-acp): no counters, the gauges move on.
	h.step(func() { finish(2, `{"context":{"used":900,"size":200000},"cost":{"amount":0.03,"currency":"USD"}}`) })
	h.step(func() {
		got, err := json.Marshal(h.status().Usage)
		require.NoError(t, err)
		require.JSONEq(t, `{"inputTokens":10,"totalTokens":38,"cachedReadTokens":5,
			"context":{"used":900,"size":200000},"cost":{"amount":0.03,"currency":"USD"}}`, string(got))
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
}

// status.agent names what serves the session: the worker's default when the session names
// no agent, never "".
func TestSession_StatusNamesTheDefaultAgent(t *testing.T) {
	for _, tt := range []struct{ agent, want string }{{"", "default"}, {"claude", "claude"}} {
		h := newHarness(t)
		h.step(func() {
			require.Equal(t, tt.want, h.status().Agent)
			var d signals.SessionStartedData
			require.NoError(t, json.Unmarshal(h.events()[0].Data, &d))
			require.Equal(t, tt.want, d.Agent)
		})
		h.closeSession()
		require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1", Agent: tt.agent}))
	}
}

// Affinity (contract §10): turn_finished names the worker that ran the turn, so the session
// knows where its agent lives even when the turn ended before its turn_started arrived (a
// quick turn: the runner sends turn_started alongside the prompt).
func TestSession_TurnFinishedNamesTheAgentsHost(t *testing.T) {
	h := newHarness(t)
	h.step(func() {
		h.prompt("quick", "m1", func(_ signals.PromptResult, err error) { require.NoError(t, err) })
	})
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn", AgentSessionID: "a1", HostQueue: "host-a"})
	})
	h.step(func() {
		st := h.status()
		require.Equal(t, signals.StateIdle, st.State)
		require.Equal(t, "host-a", st.AgentHost, "the next turn goes to the worker that ran this one")
		// The late turn_started of the finished turn changes nothing.
		h.env.SignalWorkflow(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 1, HostQueue: "host-a", AgentSessionID: "a1"})
	})
	h.step(func() { require.Equal(t, "host-a", h.status().AgentHost) })
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
	// Closed, the session ends its agent on the worker that holds it (not at the idle TTL).
	require.Equal(t, []signals.ReleaseAgentRequest{{SessionID: "s1", Closed: true}}, h.released)
}

// Reference: contract §6, Steer delivery, and signals/delivery.go (the async contract): the
// session sends Deliver with Async and a DeliveryID; a host that answers Taken frees the
// lane (the next steer goes out before the first one's outcome), and the delivery_outcome
// signals the turn sends afterwards journal steer.delivered before the turn's end.
func TestSession_AsyncSteerIsTakenAndItsOutcomeArrivesBySignal(t *testing.T) {
	h := newHarness(t)
	var sent []signals.Delivery
	h.env.RegisterActivityWithOptions(func(_ context.Context, d signals.Delivery) (signals.DeliveryResult, error) {
		sent = append(sent, d)
		return signals.DeliveryResult{Taken: true}, nil
	}, activity.RegisterOptions{Name: signals.ActivityDeliver})
	h.steerRunningTurn()
	h.step(func() {
		h.update(signals.UpdateSteer, signals.SteerRequest{Text: "go right", ExpectedTurnID: "1.1", ClientMsgID: "c2"}, func(_ any, err error) {
			require.NoError(t, err)
		})
	})
	h.step(func() {
		require.Len(t, sent, 2, "the second steer went out before the first one's outcome")
		for i, d := range sent {
			require.Equal(t, signals.DeliverSteer, d.Kind)
			require.True(t, d.Async)
			require.NotEmpty(t, d.DeliveryID)
			require.EqualValues(t, i+1, d.Offset)
		}
		require.NotContains(t, kinds(h.events()), signals.EventSteerDelivered)
		for i, how := range []string{signals.HowInterrupted, signals.HowInjected} {
			h.env.SignalWorkflow(signals.SignalDeliveryOutcome, signals.DeliveryOutcome{
				DeliveryID: sent[i].DeliveryID, Kind: signals.DeliverSteer, TurnID: 1, Attempt: 1, Offset: sent[i].Offset, How: how,
			})
		}
		// An outcome nobody awaits is ignored: it must not fail the workflow task.
		h.env.SignalWorkflow(signals.SignalDeliveryOutcome, signals.DeliveryOutcome{DeliveryID: "unknown", Kind: signals.DeliverSteer, TurnID: 1, Attempt: 1, How: signals.HowInjected})
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
	})
	h.step(func() {
		evs := h.events()
		require.Equal(t, []string{"session.started", "prompt.accepted", "turn.started", "steer.accepted", "steer.accepted", "steer.delivered", "steer.delivered", "turn.ended"}, kinds(evs))
		require.JSONEq(t, `{"offset":1,"how":"interrupted"}`, string(evs[5].Data))
		require.JSONEq(t, `{"offset":2,"how":"injected"}`, string(evs[6].Data))
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
}

// Reference: contract §6, Steer delivery (never forgotten silently): a turn that reports its
// end without the outcome of a steer it took waits outcomeWait for it on the session's
// alarm timer, then journals the steer failed before its end.
func TestSession_ATakenSteerWithoutOutcomeFailsOnTheAlarm(t *testing.T) {
	h := newHarness(t)
	h.env.RegisterActivityWithOptions(func(context.Context, signals.Delivery) (signals.DeliveryResult, error) {
		return signals.DeliveryResult{Taken: true}, nil
	}, activity.RegisterOptions{Name: signals.ActivityDeliver})
	h.step(func() { h.prompt("work", "m1", func(signals.PromptResult, error) {}) })
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 1, HostQueue: "host1"})
	})
	h.step(func() {
		h.update(signals.UpdateSteer, signals.SteerRequest{Text: "go left", ExpectedTurnID: "1"}, func(_ any, err error) { require.NoError(t, err) })
	})
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
	})
	h.step(func() {
		require.Equal(t, signals.StateRunning, h.status().State, "the end waits for the steer's outcome")
	})
	h.at += session.OutcomeWait
	h.step(func() {
		evs := h.events()
		require.Equal(t, []string{"session.started", "prompt.accepted", "turn.started", "steer.accepted", "steer.delivered", "turn.ended"}, kinds(evs))
		require.JSONEq(t, `{"offset":1,"how":"failed","error":"the turn ended before it reported the steer"}`, string(evs[4].Data))
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
}

// An operator's cancellation of the workflow closes the session as a close does: the live
// turn is cancelled, the session waits for its end, stops the agent on its host, journals
// session.closed with the operator's cause, and the run completes (a closed session).
func TestSession_OperatorCancellationClosesTheSessionLikeAClose(t *testing.T) {
	h := newHarness(t)
	h.step(func() {
		h.prompt("one", "m1", func(signals.PromptResult, error) {})
		h.prompt("two", "m2", func(signals.PromptResult, error) {})
	})
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 1, HostQueue: "host1", AgentSessionID: "a1"})
	})
	h.step(func() { h.env.CancelWorkflow() })
	h.step(func() {
		require.Equal(t, signals.StateCancelling, h.status().State, "the turn is cancelled, not abandoned")
		h.prompt("three", "m3", func(_ signals.PromptResult, err error) {
			require.Equal(t, signals.RejectSessionClosed, rejectionType(t, err))
		})
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "cancelled", HostQueue: "host1"})
	})
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}), "the run completes: the session is closed")
	evs := h.events()
	last := evs[len(evs)-1]
	require.Equal(t, signals.EventSessionClosed, last.Kind)
	require.JSONEq(t, `{"reason":"cancelled by an operator","dropped":["m2"]}`, string(last.Data))
	require.Contains(t, kinds(evs), signals.EventTurnCancelling)
	require.Equal(t, signals.StateClosed, h.status().State)
	require.Equal(t, []signals.ReleaseAgentRequest{{SessionID: "s1", Closed: true}}, h.released, "the agent is stopped on its host")
}

// Every handler of a session says what it is in the Temporal UI: each update, each signal
// (an update's twin, or an internal signal marked so), each query.
func TestSession_EveryHandlerHasADescription(t *testing.T) {
	for _, u := range session.Updates {
		require.NotEmpty(t, updateDescriptions[u.Name()], "update %s", u.Name())
	}
	for _, name := range session.SignalOrder {
		require.NotEmpty(t, signalDescription(name), "signal %s", name)
	}
	for _, name := range session.RunnerSignals {
		require.Contains(t, signalDescription(name), "internal", "signal %s", name)
	}
	for _, name := range []string{signals.QueryStatus, signals.QueryEvents, signals.QueryTranscript} {
		require.NotEmpty(t, queryDescriptions[name], "query %s", name)
	}
}

// chunk is an agent_message_chunk of text, as a runner journals it.
func chunk(text string) json.RawMessage {
	return json.RawMessage(`{"sessionId":"a1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":` + strconv.Quote(text) + `}}}`)
}

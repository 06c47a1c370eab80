package session

// Tests that drive the session core synchronously, as raft's tests drive raft.go: no
// workflow environment, no clock; time is what the test hands in. scenario_test.go runs
// the data-driven files of testdata/scenarios with the same harness.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
)

// coreEpoch is when every core test starts.
var coreEpoch = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// fakeEnv answers the core's Env: warnings recorded as lines.
type fakeEnv struct {
	warnings []string
}

func (e *fakeEnv) Warn(msg string, kv ...any) {
	e.warnings = append(e.warnings, fmt.Sprint(append([]any{msg}, kv...)...))
}

// coreRig is a session core driven as the shell drives it: every input through Step, then
// the shell's loop (Wake: Ready, carried out by CarryOut) with the rig as its Executor. A
// drive's start and a cancel or retry request are answered at once; a delivery stays
// in flight until the test answers it; continue-as-new starts the next run's core from the
// carried state.
type coreRig struct {
	t    testing.TB
	core *Core
	env  *fakeEnv
	now  time.Time
	seen int64 // the last journal seq reported
	// info is what the run reports of its history: a test makes it continue as new.
	info RunInfo
	// holdStarts: a drive's start is not answered (its DriveStarted never comes).
	holdStarts bool
	// sent is the delivery in flight, when there is one.
	sent *signals.Delivery
	// inputs are the inputs of the turns started, in order.
	inputs []signals.TurnInput
	// closed: the run ended with session.closed (Close); it takes no more commands.
	closed bool
	// alarm is the timer armed; sa the search attributes last upserted; details the
	// Current Details last set.
	alarm   *Alarm
	sa      *SearchAttrs
	upserts int // search-attribute upserts carried out
	details string
	// cmds are the commands carried out since the last settle, as the scenarios print them.
	cmds    []string
	metrics []string
	// cmdLog is every command carried out, as cmds prints it.
	cmdLog []string
	// what the scenario printed last
	printedAlarm *Alarm
	printedSA    *SearchAttrs
}

func newCoreRig(t testing.TB, cfg signals.SessionConfig) *coreRig {
	t.Helper()
	c, err := ResolveConfig(cfg)
	require.NoError(t, err)
	env := &fakeEnv{}
	core, err := New(coreEpoch, c, Build{}, env, nil)
	require.NoError(t, err)
	r := &coreRig{t: t, core: core, env: env, now: coreEpoch}
	r.run()
	return r
}

// rigExec is the rig as the shell's Executor.
type rigExec struct{ r *coreRig }

func (r *coreRig) did(cmd string) {
	r.cmds = append(r.cmds, cmd)
	r.cmdLog = append(r.cmdLog, cmd)
}

func (x rigExec) StartTurn(c StartTurn) {
	x.r.did("start-turn")
	x.r.inputs = append(x.r.inputs, c.Input)
	if !x.r.holdStarts {
		x.r.input(DriveStarted{TurnID: c.Input.TurnID})
	}
}

func (x rigExec) ResumeTurn(c ResumeTurn) {
	x.r.did(fmt.Sprintf("resume-turn turn=%d attempt=%d host=%s limited=%t", c.Input.TurnID, c.Attempt, c.HostQueue, c.Limited != nil))
	x.r.input(DriveStarted{TurnID: c.Input.TurnID})
}

func (x rigExec) Deliver(c Deliver) {
	d := c.Delivery
	x.r.sent = &d
	x.r.did(fmt.Sprintf("deliver %s turn=%d attempt=%d async=%t id=%s host=%s", d.Kind, d.TurnID, d.Attempt, d.Async, d.DeliveryID, c.HostQueue))
}

func (x rigExec) RequestCancel(RequestCancel) {
	x.r.did("request-cancel")
	x.r.input(RequestDone{})
}

func (x rigExec) RetryNow(RetryNow) {
	x.r.did("retry-now")
	x.r.input(RequestDone{})
}

func (x rigExec) Close(Close) (bool, error) {
	x.r.did("close")
	x.r.closed = true
	return true, nil
}

// ContinueAsNew starts the next run from the carried state, as SessionWorkflow does; its
// history starts short.
func (x rigExec) ContinueAsNew(c ContinueAsNew) (bool, error) {
	r := x.r
	r.did(fmt.Sprintf("continue-as-new auto-upgrade=%t", c.AutoUpgrade))
	cfg, err := ResolveConfig(c.Input.SessionConfig)
	require.NoError(r.t, err)
	next, err := New(r.now, cfg, r.core.build, r.env, c.Input.Carried)
	require.NoError(r.t, err)
	r.core, r.info, r.alarm = next, RunInfo{}, nil
	return false, nil
}

func (x rigExec) Show(sa *SearchAttrs, details string) {
	x.r.details = details
	if sa != nil {
		x.r.sa = sa
		x.r.upserts++
	}
}

func (x rigExec) Arm(a *Alarm) {
	if a != nil {
		x.r.alarm = a
	}
}

func (x rigExec) Record(ms []Metric) {
	for _, m := range ms {
		x.r.metrics = append(x.r.metrics, fmt.Sprintf("%s %v", m.Name, m.Tags))
	}
}

// run turns the shell's loop until it has nothing ready: what the shell does after every
// input that wakes it.
func (r *coreRig) run() {
	r.t.Helper()
	for range 100 {
		if r.closed || !r.core.HasReady(r.info) {
			return
		}
		end, err := Wake(r.core, rigExec{r}, r.now, r.info, false)
		require.NoError(r.t, err)
		if end {
			return
		}
	}
	r.t.Fatalf("the core kept having something ready")
}

// input steps the core with one input (not an update) and runs the loop.
func (r *coreRig) input(in Input) {
	r.t.Helper()
	_, err := r.core.Step(r.now, in)
	require.NoError(r.t, err)
	r.run()
}

// update sends an update as the SDK does: its validator, then its handler; then the loop.
func (r *coreRig) update(name string, req any) (any, error) {
	r.t.Helper()
	if _, err := r.core.Validate(name, req); err != nil {
		return nil, err
	}
	res, err := r.core.Step(r.now, UpdateInput{Name: name, Req: req})
	r.run()
	return res, err
}

// do is update with the result's type.
func do[Res any](r *coreRig, name string, req any) (Res, error) {
	r.t.Helper()
	res, err := r.update(name, req)
	out, _ := res.(Res)
	return out, err
}

// steerSent starts turn 1 and steers it ("left"), the steer's delivery sent: r.sent.
func (r *coreRig) steerSent() {
	r.t.Helper()
	r.startTurn("go", "m1")
	_, err := do[signals.SteerResult](r, signals.UpdateSteer, signals.SteerRequest{Text: "left", ExpectedTurnID: "1"})
	require.NoError(r.t, err)
	r.settle()
}

// advance moves the clock by d.
func (r *coreRig) advance(d time.Duration) { r.now = r.now.Add(d) }

// newEvents returns the events journaled since the last call.
func (r *coreRig) newEvents() []signals.Event {
	var out []signals.Event
	for _, ev := range r.core.Journal.Events {
		if ev.Seq > r.seen {
			out = append(out, ev)
		}
	}
	if n := len(out); n > 0 {
		r.seen = out[n-1].Seq
	}
	return out
}

// signal feeds one signal (JSON-encoded payload) and runs the loop.
func (r *coreRig) signal(name string, payload any) {
	r.t.Helper()
	raw, err := json.Marshal(payload)
	require.NoError(r.t, err)
	r.input(SignalInput{Name: name, Raw: raw})
}

// settle runs the loop and returns the commands carried out since the last settle (their
// names).
func (r *coreRig) settle() []string {
	r.run()
	var out []string
	for _, c := range r.cmds {
		name, _, _ := strings.Cut(c, " ")
		out = append(out, name)
	}
	r.cmds = nil
	return out
}

// answer feeds the result of the delivery in flight.
func (r *coreRig) answer(res signals.DeliveryResult, err error, hostGone bool) signals.Delivery {
	r.t.Helper()
	require.NotNil(r.t, r.sent, "no delivery in flight")
	d := *r.sent
	r.sent = nil
	r.input(DeliveryAnswered{Delivery: d, Result: res, Err: err, HostGone: hostGone})
	return d
}

// ring moves the clock to the armed alarm, which fires, as the shell's timer does.
func (r *coreRig) ring() {
	r.t.Helper()
	require.NotNil(r.t, r.alarm, "no alarm armed")
	r.now, r.alarm = r.alarm.At, nil
	end, err := Wake(r.core, rigExec{r}, r.now, r.info, true)
	require.NoError(r.t, err)
	if !end {
		r.run()
	}
}

// startTurn prompts and starts the turn on host1: the usual start of a test.
func (r *coreRig) startTurn(text, id string) int64 {
	r.t.Helper()
	res, err := do[signals.PromptResult](r, signals.UpdatePrompt, signals.PromptRequest{Text: text, ClientMessageID: id})
	require.NoError(r.t, err)
	r.settle()
	r.signal(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: res.TurnID, Attempt: 1, HostQueue: "host1"})
	return res.TurnID
}

func eventKinds(evs []signals.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

func (c command) String() string {
	switch c {
	case cmdNone:
		return "none"
	case cmdClose:
		return "close"
	case cmdContinueAsNew:
		return "continue-as-new"
	case cmdRequestCancel:
		return "request-cancel"
	case cmdDeliver:
		return "deliver"
	case cmdStartTurn:
		return "start-turn"
	case cmdRetryNow:
		return "retry-now"
	}
	return fmt.Sprintf("command(%d)", int(c))
}

// Reference: contract §6, Turns: a prompt starts a turn when none runs; the next waits behind
// it; a repeated client_message_id returns its original result and starts nothing.
func TestCore_PromptsQueueBehindTheRunningTurn(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.newEvents()
	first, err := do[signals.PromptResult](r, signals.UpdatePrompt, signals.PromptRequest{Text: "one", ClientMessageID: "m1"})
	require.NoError(t, err)
	require.Equal(t, []string{"start-turn"}, r.settle())
	second, err := do[signals.PromptResult](r, signals.UpdatePrompt, signals.PromptRequest{Text: "two", ClientMessageID: "m2"})
	require.NoError(t, err)
	require.Equal(t, 1, second.Position)
	again, err := do[signals.PromptResult](r, signals.UpdatePrompt, signals.PromptRequest{Text: "one", ClientMessageID: "m1"})
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, first.TurnID, again.TurnID)
	require.Empty(t, r.settle(), "nothing starts while turn 1 runs")
	r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, StopReason: "end_turn"})
	require.Equal(t, []string{"start-turn"}, r.settle())
	require.Equal(t, []string{"prompt.accepted", "turn.started", "prompt.accepted", "turn.ended", "turn.started"}, eventKinds(r.newEvents()))
}

// Reference: contract §6, Turns and §5 (the invariant): a turn_finished waits for every batch
// its attempt sent before it, whatever order the signals arrive in.
func TestCore_FinishWaitsForTheLastBatch(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.startTurn("go", "m1")
	r.newEvents()
	r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn", Batches: 2})
	require.Empty(t, r.newEvents(), "batches 1 and 2 are still on their way")
	r.signal(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 1, Events: []json.RawMessage{chunk("a")}})
	require.Equal(t, []string{"agent.update"}, eventKinds(r.newEvents()), "the end still waits for batch 2")
	r.signal(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 2, Events: []json.RawMessage{chunk("b")}})
	require.Equal(t, []string{"agent.update", "turn.ended"}, eventKinds(r.newEvents()))
	require.Equal(t, cmdNone, r.core.next(RunInfo{}))
}

// Reference: contract §6, Turns (attempt watermarks): a batch at or below the attempt's
// watermark is a redelivery and journals nothing; a batch or report of an older attempt is
// dropped; a newer attempt supersedes the old one with turn.restarted.
func TestCore_AttemptWatermarks(t *testing.T) {
	cases := []struct {
		name  string
		feed  func(r *coreRig)
		kinds []string
	}{
		{"a batch journals once", func(r *coreRig) {
			for range 2 {
				r.signal(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 1, Events: []json.RawMessage{chunk("a")}})
			}
		}, []string{"agent.update"}},
		{"an older attempt is dropped", func(r *coreRig) {
			r.signal(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 2, Batch: 1, Events: []json.RawMessage{chunk("a")}})
			r.signal(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 5, Events: []json.RawMessage{chunk("old")}})
			r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
		}, []string{"turn.restarted", "agent.update"}},
		{"a newer attempt starts its batches from 1", func(r *coreRig) {
			r.signal(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 3, Events: []json.RawMessage{chunk("a")}})
			r.signal(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 2, Batch: 1, Events: []json.RawMessage{chunk("b")}})
		}, []string{"agent.update", "turn.restarted", "agent.update"}},
		{"another turn's signals are dropped", func(r *coreRig) {
			r.signal(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 7, Attempt: 1, Batch: 1, Events: []json.RawMessage{chunk("a")}})
			r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 7, StopReason: "end_turn"})
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
			r.startTurn("go", "m1")
			r.newEvents()
			tc.feed(r)
			require.Equal(t, tc.kinds, nilIfEmpty(eventKinds(r.newEvents())))
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// Reference: contract §6, Steer delivery: an accepted steer is delivered into the running turn
// with Async; the live turn taking it frees the lane at once (a cancel behind it goes out
// without waiting for the round trip), and its delivery_outcome journals steer.delivered.
func TestCore_AsyncSteerFreesTheLaneAndItsOutcomeIsJournaled(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.startTurn("go", "m1")
	_, err := do[signals.SteerResult](r, signals.UpdateSteer, signals.SteerRequest{Text: "left", ExpectedTurnID: "1", ClientMsgID: "c1"})
	require.NoError(t, err)
	require.Equal(t, []string{"deliver"}, r.settle())
	require.True(t, r.sent.Async)
	require.NotEmpty(t, r.sent.DeliveryID)
	steer := r.answer(signals.DeliveryResult{Taken: true}, nil, false)
	r.newEvents()
	_, err = do[signals.CancelResult](r, signals.UpdateCancel, signals.CancelRequest{})
	require.NoError(t, err)
	require.Equal(t, []string{"request-cancel", "deliver"}, r.settle(), "the cancel goes out while the steer's round trip runs")
	require.Equal(t, signals.DeliverCancel, r.sent.Kind)
	r.answer(signals.DeliveryResult{Taken: true}, nil, false)
	r.signal(signals.SignalDeliveryOutcome, signals.DeliveryOutcome{DeliveryID: steer.DeliveryID, Kind: signals.DeliverSteer, TurnID: 1, Attempt: 1, Offset: 1, How: signals.HowInterrupted})
	r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "cancelled"})
	evs := r.newEvents()
	require.Equal(t, []string{"turn.cancelling", "steer.delivered", "turn.ended"}, eventKinds(evs))
	require.JSONEq(t, `{"offset":1,"how":"interrupted"}`, string(evs[1].Data))
}

// Reference: contract §6, Steer delivery: a steer is never forgotten silently; a turn that
// ends without reporting a taken steer's outcome gets steer.delivered failed before its
// turn.ended, and so does a lost attempt's steer before turn.restarted.
func TestCore_ATakenSteerWithoutOutcomeFailsBeforeTheTurnEnds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		end   func(r *coreRig)
		kinds []string
		error string
	}{
		{"the turn's end waits, then its workflow ends", func(r *coreRig) {
			r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
			require.Empty(r.t, r.newEvents(), "the end waits for the steer's outcome")
			r.input(DriveEnded{TurnID: 1})
		}, []string{"steer.delivered", "turn.ended"}, "the turn ended before it reported the steer"},
		{"the turn's end waits, then the alarm gives up", func(r *coreRig) {
			r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
			require.Empty(r.t, r.newEvents(), "the end waits for the steer's outcome")
			start := r.now
			r.ring()
			require.Equal(r.t, OutcomeWait, r.now.Sub(start))
		}, []string{"steer.delivered", "turn.ended"}, "the turn ended before it reported the steer"},
		{"the turn's drive fails", func(r *coreRig) {
			r.input(DriveEnded{TurnID: 1, Failure: "terminated"})
		}, []string{"steer.delivered", "turn.failed"}, "the turn ended before it reported the steer"},
		{"the attempt is lost", func(r *coreRig) {
			r.signal(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 2, HostQueue: "host2"})
		}, []string{"steer.delivered", "turn.restarted"}, "attempt 1 was given up before it reported the steer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
			r.steerSent()
			r.answer(signals.DeliveryResult{Taken: true}, nil, false)
			r.newEvents()
			tc.end(r)
			evs := r.newEvents()
			require.Equal(t, tc.kinds, eventKinds(evs))
			var d signals.SteerDeliveredData
			require.NoError(t, json.Unmarshal(evs[0].Data, &d))
			require.Equal(t, signals.SteerDeliveredData{Offset: 1, How: signals.HowFailed, Error: tc.error}, d)
			require.Empty(t, r.core.Awaiting)
		})
	}
}

// Reference: contract §6, Steer delivery: a delivery_outcome that names no steer awaiting its
// outcome (an unknown id, a stale turn or attempt, a repeat) is ignored and never fails the
// session; a malformed one is dropped with a warning.
func TestCore_UnknownOrStaleDeliveryOutcomesAreIgnored(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.steerSent()
	d := r.answer(signals.DeliveryResult{Taken: true}, nil, false)
	r.newEvents()
	for _, o := range []signals.DeliveryOutcome{
		{DeliveryID: "nope", Kind: signals.DeliverSteer, TurnID: 1, Attempt: 1, How: signals.HowInjected},
		{DeliveryID: d.DeliveryID, Kind: signals.DeliverSteer, TurnID: 2, Attempt: 1, How: signals.HowInjected},
		{DeliveryID: d.DeliveryID, Kind: signals.DeliverSteer, TurnID: 1, Attempt: 3, How: signals.HowInjected},
		{},
	} {
		r.signal(signals.SignalDeliveryOutcome, o)
	}
	r.input(SignalInput{Name: signals.SignalDeliveryOutcome, Raw: json.RawMessage(`"not an object"`)})
	require.Empty(t, r.newEvents())
	require.Len(t, r.env.warnings, 1)
	r.signal(signals.SignalDeliveryOutcome, signals.DeliveryOutcome{DeliveryID: d.DeliveryID, Kind: signals.DeliverSteer, TurnID: 1, Attempt: 1, How: signals.HowInjected})
	r.signal(signals.SignalDeliveryOutcome, signals.DeliveryOutcome{DeliveryID: d.DeliveryID, Kind: signals.DeliverSteer, TurnID: 1, Attempt: 1, How: signals.HowInjected})
	require.Equal(t, []string{"steer.delivered"}, eventKinds(r.newEvents()), "the repeat is ignored")
}

// Reference: contract §6, Steer delivery: the outcome of a taken steer may overtake the
// Deliver's own result; it is journaled once, and the turn's end no longer waits for the
// result.
func TestCore_AnOutcomeThatOvertakesItsTakenResultIsJournaledOnce(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.steerSent()
	r.newEvents()
	r.signal(signals.SignalDeliveryOutcome, signals.DeliveryOutcome{DeliveryID: r.sent.DeliveryID, Kind: signals.DeliverSteer, TurnID: 1, Attempt: 1, How: signals.HowInjected})
	r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
	require.Equal(t, []string{"steer.delivered", "turn.ended"}, eventKinds(r.newEvents()))
	r.answer(signals.DeliveryResult{Taken: true}, nil, false)
	require.Empty(t, r.newEvents())
	require.Empty(t, r.core.Awaiting)
}

// Reference: contract §6, Steer delivery (the steer-before-end hold): a runner that answers
// a delivery only when it is done (no Async: an older worker) still has its steer's outcome
// journaled before the turn's end, even when the turn_finished overtakes the result.
func TestCore_SteerInFlightHoldsTheTurnsEnd(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.steerSent()
	r.newEvents()
	r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
	require.Empty(t, r.newEvents(), "the end waits for the steer in flight")
	r.answer(signals.DeliveryResult{How: signals.HowInjected}, nil, false)
	require.Equal(t, []string{"steer.delivered", "turn.ended"}, eventKinds(r.newEvents()))
}

// Reference: contract §6, Belts (1) grace and (2) deadline, and Permissions (deadline →
// expired): every alarm is an absolute time; the core names the earliest, and firing it
// handles everything due.
func TestCore_Alarms(t *testing.T) {
	cases := []struct {
		name  string
		setup func(r *coreRig)
		kinds []string
	}{
		{"grace ends: the turn is cancelled", func(r *coreRig) {
			_, err := do[signals.Status](r, signals.UpdateAttach, signals.AttachRequest{ViewerID: "v1", Role: signals.RoleController, LeaseSeconds: 3600})
			require.NoError(r.t, err)
			_, err = do[signals.DetachResult](r, signals.UpdateDetach, signals.DetachRequest{ViewerID: "v1"})
			require.NoError(r.t, err)
		}, []string{"viewer.grace_started", "turn.cancelling"}},
		{"a lease lapses: grace starts", func(r *coreRig) {
			_, err := do[signals.Status](r, signals.UpdateAttach, signals.AttachRequest{ViewerID: "v1", Role: signals.RoleController, LeaseSeconds: 30})
			require.NoError(r.t, err)
		}, []string{"viewer.grace_started"}},
		{"the deadline passes", func(r *coreRig) {}, []string{"turn.cancelling"}},
		{"an asked permission expires", func(r *coreRig) {
			r.signal(signals.SignalPermissionRequested, signals.PermissionRequestedSignal{TurnID: 1, Attempt: 1, RequestID: "p1",
				ToolCall: json.RawMessage(`{"kind":"edit","title":"write"}`), Options: []signals.PermissionOption{{OptionID: "no", Name: "No", Kind: "reject_once"}}})
		}, []string{"permission.requested", "permission.resolved"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newCoreRig(t, signals.SessionConfig{SessionID: "s1", GraceWindow: "1m", TurnDeadline: "10m", PermissionTimeout: "2m", Policy: "ask_always"})
			r.startTurn("go", "m1")
			r.newEvents()
			tc.setup(r)
			r.ring()
			require.Equal(t, tc.kinds, eventKinds(r.newEvents()))
		})
	}
}

// describe prints events as scenario files do: kind, turn and data.
func describe(evs []signals.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%s turn=%d %s\n", e.Kind, e.TurnID, e.Data)
	}
	return b.String()
}

// Reference: contract §6, Continue-as-new, also mid-turn: when the server suggests it or the
// run passes a threshold, the session continues as new at the next boundary, a running
// turn included, but never with a command in flight (it must resolve in this run); at
// idle an eighth of the threshold is enough.
func TestCore_NextContinuesAsNewOnlyWithNothingInFlight(t *testing.T) {
	cases := []struct {
		name  string
		setup func(r *coreRig)
		info  RunInfo
		want  command
	}{
		{"idle, nothing suggested", func(*coreRig) {}, RunInfo{HistoryLength: 10}, cmdNone},
		{"the server suggests it", func(*coreRig) {}, RunInfo{Suggested: true}, cmdContinueAsNew},
		{"idle past an eighth of max_run_events", func(*coreRig) {}, RunInfo{HistoryLength: 1000}, cmdContinueAsNew},
		{"a running turn below max_run_events", func(r *coreRig) { r.startTurn("go", "m1") }, RunInfo{HistoryLength: 1000}, cmdNone},
		{"a running turn past max_run_events", func(r *coreRig) { r.startTurn("go", "m1") }, RunInfo{HistoryLength: 8000}, cmdContinueAsNew},
		{"a command in flight", func(r *coreRig) { r.core.pending = 1 }, RunInfo{Suggested: true}, cmdNone},
		{"a turn whose workflow is not known to exist yet", func(r *coreRig) {
			r.holdStarts = true
			_, err := do[signals.PromptResult](r, signals.UpdatePrompt, signals.PromptRequest{Text: "go", ClientMessageID: "m1"})
			require.NoError(r.t, err)
			require.Equal(r.t, []string{"start-turn"}, r.settle())
		}, RunInfo{Suggested: true}, cmdNone},
		{"closing with nothing in flight closes first", func(r *coreRig) {
			_, err := do[signals.CloseResult](r, signals.UpdateClose, signals.CloseRequest{})
			require.NoError(r.t, err)
		}, RunInfo{Suggested: true}, cmdClose},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newCoreRig(t, signals.SessionConfig{SessionID: "s1", MaxRunEvents: 8000})
			tc.setup(r)
			require.Equal(t, tc.want, r.core.next(tc.info))
		})
	}
}

// Reference: contract §6, Turns: cancel marks the live turn cancelling once, resolves its open
// requests, and next cancels the turn's drive before it delivers the cancel.
func TestCore_NextRequestsTheCancelOnce(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.startTurn("go", "m1")
	res, err := do[signals.CancelResult](r, signals.UpdateCancel, signals.CancelRequest{})
	require.NoError(t, err)
	require.Equal(t, signals.CancelCancelling, res.Outcome)
	res, err = do[signals.CancelResult](r, signals.UpdateCancel, signals.CancelRequest{TurnID: 1})
	require.NoError(t, err)
	require.Equal(t, signals.CancelAlreadyCancelling, res.Outcome)
	require.Equal(t, []string{"request-cancel", "deliver"}, r.settle())
	require.Equal(t, signals.DeliverCancel, r.sent.Kind)
	r.answer(signals.DeliveryResult{Taken: true}, nil, false)
	require.Empty(t, r.settle())
}

// Reference: contract §6, Continue-as-new, also mid-turn: the state carries everything — the
// running turn, its open requests and rules, the steers it took whose outcomes are awaited,
// the journal — and the next run goes on where this one stopped.
func TestCore_CarriedStateContinuesTheTurn(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1", Policy: "ask_always"})
	r.steerSent()
	steer := r.answer(signals.DeliveryResult{Taken: true}, nil, false)
	r.signal(signals.SignalPermissionRequested, signals.PermissionRequestedSignal{TurnID: 1, Attempt: 1, RequestID: "p1",
		ToolCall: json.RawMessage(`{"kind":"edit","title":"e"}`), Options: []signals.PermissionOption{{OptionID: "y", Kind: "allow_once"}}})
	r.settle()
	r.info.Suggested = true
	// The next run adopts the attempt from its host (the turn is the session's own).
	require.Equal(t, []string{"continue-as-new", "resume-turn"}, r.settle())
	require.Equal(t, "resume-turn turn=1 attempt=1 host=host1 limited=false", r.cmdLog[len(r.cmdLog)-1])
	next := r.core
	require.Equal(t, 2, next.Run)
	require.Equal(t, signals.StateSuspended, next.state())
	r.newEvents()
	r.signal(signals.SignalDeliveryOutcome, signals.DeliveryOutcome{DeliveryID: steer.DeliveryID, Kind: signals.DeliverSteer, TurnID: 1, Attempt: 1, How: signals.HowInjected})
	_, err := do[signals.PermissionRespondResult](r, signals.UpdatePermissionRespond, signals.PermissionRespondRequest{RequestID: "p1", OptionID: "y"})
	require.NoError(t, err)
	r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
	require.Equal(t, []string{"steer.delivered", "permission.resolved", "turn.ended"}, eventKinds(r.newEvents()))
}

// validateErr is an update's validator's answer.
func validateErr(r *coreRig, name string, req any) error {
	_, err := r.core.Validate(name, req)
	return err
}

// Reference: contract §3: every update is in the one table, and the signals drain in the
// order every recorded history was written with (a new update's twin drains last).
func TestCore_TheUpdateTableAndTheDrainOrder(t *testing.T) {
	require.Equal(t, []string{
		signals.SignalTurnStarted, signals.SignalTurnEvents, signals.SignalTurnLimited,
		signals.SignalPermissionRequested, signals.SignalElicitationRequested,
		signals.SignalDeliveryOutcome, signals.SignalTurnFinished,
		signals.UpdatePrompt, signals.UpdateSteer, signals.UpdateCancel,
		signals.UpdatePermissionRespond, signals.UpdatePermissionForget, signals.UpdateSetPolicy,
		signals.UpdateAttach, signals.UpdateDetach, signals.UpdateClose, signals.UpdateSetMode,
		signals.UpdateSetConfigOption, signals.SignalWake, signals.UpdateRetryNow,
		signals.UpdateElicitationRespond, signals.UpdateSetMcpServers, signals.UpdateSetTitle,
		signals.SignalElicitationCompleted,
	}, SignalOrder)
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	_, err := r.core.Step(r.now, UpdateInput{Name: "nope"})
	require.ErrorContains(t, err, `unknown update "nope"`)
	_, err = r.core.Step(r.now, UpdateInput{Name: signals.UpdateSetTitle, Req: signals.SteerRequest{}})
	rej, ok := rejection.As(err)
	require.True(t, ok)
	require.Equal(t, signals.RejectInvalidRequest, rej.Type, "a request of the wrong type is refused, not a panic")
}

// Reference: contract §6 "Turns", "Steer", "Cancel": a prompt, a steer and a cancel journal
// who sent them (by), and a by that cannot name anyone is refused and changes nothing.
func TestCore_PromptSteerAndCancelNameWhoDidThem(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.newEvents()
	for _, bad := range []string{strings.Repeat("x", signals.MaxByBytes+1), "two\nlines", "\xff"} {
		require.Error(t, validateErr(r, signals.UpdatePrompt, signals.PromptRequest{Text: "go", ClientMessageID: "m0", By: bad}), "by %q", bad)
	}
	require.Empty(t, r.newEvents(), "a refused prompt changes nothing")

	_, err := do[signals.PromptResult](r, signals.UpdatePrompt, signals.PromptRequest{Text: "go", ClientMessageID: "m1", By: "deck:alice"})
	require.NoError(t, err)
	r.settle()
	r.signal(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 1, HostQueue: "host1"})
	require.Error(t, validateErr(r, signals.UpdateSteer, signals.SteerRequest{Text: "left", ExpectedTurnID: "1", By: "a\x00b"}))
	_, err = do[signals.SteerResult](r, signals.UpdateSteer, signals.SteerRequest{Text: "left", ExpectedTurnID: "1", By: "cli:bob@laptop"})
	require.NoError(t, err)
	require.Error(t, validateErr(r, signals.UpdateCancel, signals.CancelRequest{By: strings.Repeat("y", signals.MaxByBytes+1)}))
	_, err = do[signals.CancelResult](r, signals.UpdateCancel, signals.CancelRequest{By: "acp:Zed 1.0 (viewer v1)"})
	require.NoError(t, err)

	by := map[string]string{}
	for _, ev := range r.newEvents() {
		var d struct{ By string }
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		if d.By != "" {
			by[ev.Kind] = d.By
		}
	}
	require.Equal(t, map[string]string{
		signals.EventPromptAccepted: "deck:alice",
		signals.EventSteerAccepted:  "cli:bob@laptop",
		signals.EventTurnCancelling: "acp:Zed 1.0 (viewer v1)",
	}, by)
}

// chunk is an agent_message_chunk of text, as a runner journals it.
func chunk(text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"sessionId": "a1", "update": map[string]any{
		"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text},
	}})
	return b
}

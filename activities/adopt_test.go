package activities

// Tests of adoption (adopt.go): a turn attempt outlives the run of the session that
// scheduled it, and the run after it takes it over. RunTurn runs as an activity of the SDK's
// activity test environment, with the real testagent; the test ends the activity's context
// with a cause as the SDK does: the heartbeat's *serviceerror.NotFound when the session's
// run is gone (it continued as new), a CanceledError when the session asks for a cancel.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/tacp-dev/tacp/internal/proctree"
	"github.com/tacp-dev/tacp/signals"
)

// activityRun is one RunTurn activity under way: end ends its context with a cause.
type activityRun struct {
	end  context.CancelCauseFunc
	done chan runOutcome

	mu    sync.Mutex
	beats []signals.TurnProgress
}

type runOutcome struct {
	res signals.RunTurnResult
	err error
}

// start runs in as an activity of its own, in the background.
func (r *turnRig) start(in signals.RunTurnInput) *activityRun {
	r.t.Helper()
	bg, end := context.WithCancelCause(context.Background())
	r.t.Cleanup(func() { end(nil) })
	run := &activityRun{end: end, done: make(chan runOutcome, 1)}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetTestTimeout(2 * time.Minute)
	env.SetWorkerOptions(worker.Options{BackgroundActivityContext: bg})
	env.RegisterActivityWithOptions(r.runner.RunTurn, activity.RegisterOptions{Name: signals.ActivityRunTurn})
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var p signals.TurnProgress
		if details.HasValues() && details.Get(&p) == nil {
			run.mu.Lock()
			run.beats = append(run.beats, p)
			run.mu.Unlock()
		}
	})
	if in.SessionWorkflowID == "" {
		in.SessionWorkflowID = signals.SessionWorkflowID(in.SessionID)
	}
	go func() {
		var out runOutcome
		val, err := env.ExecuteActivity(signals.ActivityRunTurn, in)
		if out.err = err; err == nil {
			if out.err = val.Get(&out.res); out.err == nil {
				r.rec.result(in.TurnID, out.res)
			}
		}
		run.done <- out
	}()
	return run
}

// wait returns the activity's outcome.
func (a *activityRun) wait(t *testing.T) runOutcome {
	t.Helper()
	select {
	case out := <-a.done:
		return out
	case <-time.After(2 * time.Minute):
		t.Fatal("the activity did not return")
		return runOutcome{}
	}
}

func (a *activityRun) beatCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.beats)
}

func (a *activityRun) lastBeat() signals.TurnProgress {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.beats[len(a.beats)-1]
}

// runGoneErr is the cause the SDK cancels an activity's context with when its heartbeat
// finds the activity's run closed.
func runGoneErr() error {
	return &serviceerror.NotFound{Message: "workflow execution already completed"}
}

// adopting is the adopting RunTurn the session's next run schedules for attempt of in.
func adopting(in signals.RunTurnInput, attempt int32) signals.RunTurnInput {
	in.Adopt, in.AttemptBase = true, attempt
	return in
}

// waitPermission waits for the turn's permission request.
func (r *turnRig) waitPermission(t *testing.T) signals.PermissionRequestedSignal {
	t.Helper()
	require.Eventually(t, func() bool { return len(r.rec.permissions()) == 1 }, time.Minute, 5*time.Millisecond)
	return r.rec.permissions()[0]
}

// answer answers the permission request p as the session would, through Deliver.
func (r *turnRig) answer(t *testing.T, session string, p signals.PermissionRequestedSignal, optionID string) {
	t.Helper()
	_, err := r.host.Deliver(context.Background(), signals.Delivery{
		Kind: signals.DeliverPermission, SessionID: session, TurnID: p.TurnID, Attempt: p.Attempt,
		RequestID: p.RequestID, Outcome: signals.OutcomeSelected, OptionID: optionID,
	})
	require.NoError(t, err)
}

// requireAppErr requires err to be an ApplicationError of type typ and returns it.
func requireAppErr(t *testing.T, err error, typ string) *temporal.ApplicationError {
	t.Helper()
	var ae *temporal.ApplicationError
	require.True(t, errors.As(err, &ae), "an ApplicationError: %v", err)
	require.Equal(t, typ, ae.Type(), "%v", err)
	return ae
}

// requireHandedOver requires the answer of an activity that no longer answers for its
// attempt (its result goes nowhere).
func requireHandedOver(t *testing.T, out runOutcome) {
	t.Helper()
	require.ErrorIs(t, out.err, activity.ErrResultPending, "its result goes nowhere: the SDK sends none")
}

// The session continues as new mid-turn: the attempt's activity meets NotFound, and the
// attempt is held, streaming on with the same agent process, until the next run's adopting
// RunTurn answers for it: its heartbeats, and its end (end_turn, reported once). An adopter
// whose run is gone in turn is adopted again.
func TestAHeldAttemptRunsOnAndItsAdopterReturnsItsEnd(t *testing.T) {
	rig := newTurnRig(t, "")
	in := turnInput("s1", 1, rig.agent(), "/permission edit main.go")
	orig := rig.start(in)
	perm := rig.waitPermission(t)
	pid := rig.host.AgentPID("s1")
	require.NotZero(t, pid)

	orig.end(runGoneErr())
	requireHandedOver(t, orig.wait(t))
	a := rig.host.heldAttempt(attemptKey{"s1", 1, 1})
	require.NotNil(t, a)
	require.Nil(t, a.beatCtx(), "held: its beats go nowhere, not to a context whose run is gone")

	first := rig.start(adopting(in, 1))
	require.Eventually(t, func() bool { return first.beatCount() > 0 }, time.Minute, 5*time.Millisecond, "the adopter beats at once")
	require.True(t, first.lastBeat().PromptSent, "the attempt's progress, on the adopter's heartbeat")
	first.end(runGoneErr())
	requireHandedOver(t, first.wait(t))
	require.Nil(t, a.beatCtx())

	second := rig.start(adopting(in, 1))
	require.Eventually(t, func() bool { return second.beatCount() > 0 }, time.Minute, 5*time.Millisecond)
	rig.answer(t, "s1", perm, "allow_always")
	out := second.wait(t)
	require.NoError(t, out.err)
	require.Equal(t, "end_turn", out.res.StopReason)
	require.Equal(t, int32(1), out.res.Attempt)

	require.Equal(t, []string{"permission: selected allow_always"}, joinedTexts(t, rig.rec.events(1)), "the agent streamed on through the hand-overs")
	require.Equal(t, pid, rig.host.AgentPID("s1"), "one agent process, alive between turns")
	require.Len(t, rig.rec.turnStarted(1), 1, "one attempt started, reported once")
	require.Empty(t, rig.rec.reports(1).finished, "the result is the report")
}

// The adopter may come before the attempt's activity noticed its run is gone (heartbeats
// are throttled): it takes over at once, and the activity before it returns without
// touching the turn, though its context ends when it returns.
func TestAnAdopterTakesOverBeforeTheOriginalNoticed(t *testing.T) {
	rig := newTurnRig(t, "")
	in := turnInput("s1", 1, rig.agent(), "/permission edit main.go")
	orig := rig.start(in)
	perm := rig.waitPermission(t)

	adopter := rig.start(adopting(in, 1))
	requireHandedOver(t, orig.wait(t))
	orig.end(temporal.NewCanceledError("a cancel of the closed run"))
	rig.answer(t, "s1", perm, "allow_once")
	out := adopter.wait(t)
	require.NoError(t, out.err)
	require.Equal(t, "end_turn", out.res.StopReason)
	require.Equal(t, []string{"permission: selected allow_once"}, joinedTexts(t, rig.rec.events(1)))
	require.Empty(t, rig.rec.reports(1).finished)
}

// The session continued as new just as the turn ended: the attempt ended while held, and
// its adopter, coming after the end, returns its outcome at once (the remembered result is
// the turn's report).
func TestAnAdopterAfterTheEndReturnsTheRememberedOutcome(t *testing.T) {
	rig := newTurnRig(t, "")
	in := turnInput("s1", 1, rig.agent(), "/permission edit main.go")
	orig := rig.start(in)
	perm := rig.waitPermission(t)
	orig.end(runGoneErr())
	requireHandedOver(t, orig.wait(t))
	a := rig.host.heldAttempt(attemptKey{"s1", 1, 1})
	require.NotNil(t, a)

	rig.answer(t, "s1", perm, "allow_once")
	<-a.ended
	require.Empty(t, rig.rec.reports(1).finished)

	for range 2 { // as often as it is asked for, within AdoptWait
		out := rig.start(adopting(in, 1)).wait(t)
		require.NoError(t, out.err)
		require.Equal(t, "end_turn", out.res.StopReason)
	}
	require.Empty(t, rig.rec.reports(1).finished, "the result is the report")
}

// A held attempt nobody adopts within AdoptWait ends as an attempt whose activity was lost
// (its agent stopped, the cause the NotFound), and is forgotten AdoptWait after its end.
func TestAHeldAttemptNobodyAdoptsEndsAfterAdoptWait(t *testing.T) {
	rig := newTurnRig(t, "")
	rig.runner.AdoptWait = 300 * time.Millisecond
	in := turnInput("s1", 1, rig.agent(), "/permission edit main.go")
	orig := rig.start(in)
	rig.waitPermission(t)
	key := attemptKey{"s1", 1, 1}
	a := rig.host.heldAttempt(key)
	require.NotNil(t, a)
	orig.end(runGoneErr())
	requireHandedOver(t, orig.wait(t))

	select {
	case <-a.ended:
	case <-time.After(time.Minute):
		t.Fatal("the held attempt did not end")
	}
	ae := requireAppErr(t, a.err, signals.TypeAttemptLost)
	require.Contains(t, ae.Error(), "turn attempt lost")
	var nf *serviceerror.NotFound
	require.True(t, errors.As(a.err, &nf), "the cause: the run is gone (%v)", a.err)
	require.Empty(t, a.res.StopReason)
	require.Zero(t, rig.host.AgentPID("s1"), "its agent was stopped")
	require.Empty(t, rig.rec.reports(1).finished, "no turn_finished: the turn did not end")

	require.Eventually(t, func() bool { return rig.host.heldAttempt(key) == nil }, time.Minute, 5*time.Millisecond, "forgotten")
	_, err := rig.run(adopting(in, 1))
	requireAppErr(t, err, signals.TypeNothingToAdopt)
}

// The session cancels the turn through its adopter (the cancel backstop): the turn ends
// cancelled, as a cancel of the attempt's own activity ends it.
func TestACancelOfTheAdopterCancelsTheTurn(t *testing.T) {
	rig := newTurnRig(t, "")
	in := turnInput("s1", 1, rig.agent(), "/sleep 60s")
	orig := rig.start(in)
	require.Eventually(t, func() bool {
		for _, x := range messageTexts(decodeUpdates(t, rig.rec.events(1))) {
			if x == "." {
				return true
			}
		}
		return false
	}, time.Minute, 5*time.Millisecond)
	orig.end(runGoneErr())
	requireHandedOver(t, orig.wait(t))

	adopter := rig.start(adopting(in, 1))
	require.Eventually(t, func() bool { return adopter.beatCount() > 0 }, time.Minute, 5*time.Millisecond, "adopted")
	adopter.end(temporal.NewCanceledError())
	out := adopter.wait(t)
	require.NoError(t, out.err)
	require.Equal(t, "cancelled", out.res.StopReason)
	require.Empty(t, rig.rec.reports(1).finished, "the result is the report")
	require.NotZero(t, rig.host.AgentPID("s1"), "the agent answered cancelled and lives on")
}

// An adopter on a host that does not hold the attempt: a retryable nothing_to_adopt, and
// nothing runs.
func TestAdoptingAnAttemptThisHostDoesNotHold(t *testing.T) {
	rig := newTurnRig(t, "")
	_, err := rig.run(adopting(turnInput("s1", 1, rig.agent(), "hello"), 1))
	ae := requireAppErr(t, err, signals.TypeNothingToAdopt)
	require.False(t, ae.NonRetryable(), "retried as a new attempt")
	require.Contains(t, ae.Error(), "nothing to adopt")
	require.Zero(t, rig.host.AgentPID("s1"), "no agent started")
	require.Empty(t, rig.rec.all(), "nothing reported")

	// A turn of the session that ran here does not make another attempt of it adoptable.
	res := rig.mustRun(turnInput("s1", 1, rig.agent(), "hello"))
	require.Equal(t, int32(1), res.Attempt)
	_, err = rig.run(adopting(turnInput("s1", 1, rig.agent(), "hello"), 2))
	requireAppErr(t, err, signals.TypeNothingToAdopt)
}

// An attempt whose activity is lost while its agent starts (the worker stops, the server no
// longer holds it) ends as a lost attempt, retried on another worker: the agent's start was
// cut short, it did not fail, so the turn does not fail as the agent's error.
func TestAnAttemptLostWhileItsAgentStartsIsRetried(t *testing.T) {
	rig := newTurnRig(t, "")
	run := rig.start(turnInput("s1", 1, rig.agent("-start-delay", "30s"), "hi"))
	run.end(errors.New("the worker stops"))
	out := run.wait(t)
	ae := requireAppErr(t, out.err, signals.TypeAttemptLost)
	require.False(t, ae.NonRetryable(), "retried: %v", out.err)
}

// An operator terminates the session mid-turn: the attempt's activity meets NotFound as
// after a continue-as-new, but the session's latest run has ended and no run will adopt the
// attempt. It ends at once, well within AdoptWait, and the session's agent stops instead of
// idling until its TTL.
func TestAHeldAttemptOfATerminatedSessionEndsAndItsAgentStops(t *testing.T) {
	rig := newTurnRig(t, "")
	rig.runner.AdoptWait = time.Hour // only the session's end may end the hold
	rig.rec.mu.Lock()
	rig.rec.ended = enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED
	rig.rec.mu.Unlock()
	in := turnInput("s1", 1, rig.agent(), "/sleep 60s")
	orig := rig.start(in)
	require.Eventually(t, func() bool { return rig.host.AgentPID("s1") != 0 }, time.Minute, 5*time.Millisecond)
	pid := rig.host.AgentPID("s1")

	orig.end(runGoneErr())
	requireHandedOver(t, orig.wait(t))
	a := rig.host.heldAttempt(attemptKey{"s1", 1, 1})
	require.NotNil(t, a)
	select {
	case <-a.ended:
	case <-time.After(time.Minute):
		t.Fatal("the attempt of a terminated session is still held")
	}
	require.ErrorContains(t, context.Cause(a.ctx), "the session's workflow was terminated")
	require.Eventually(t, func() bool { return !proctree.Alive(pid) }, time.Minute, 10*time.Millisecond, "the agent of a terminated session stops")
	require.Zero(t, rig.host.AgentPID("s1"))
}

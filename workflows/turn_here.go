package workflows

// A Here turn (contract §6 "Turns", §10): the session drives its turn's RunTurn activity
// itself, in a goroutine of its run, instead of starting a TurnWorkflow child. The child
// cost a person's first token its start, its first workflow task and a second activity
// dispatch, and a short prompt a dozen history events; the session's own activity costs
// three events and no round trip before the activity is scheduled.
//
// A child outlived the run that started it (ABANDON); an activity belongs to its run. When
// the session continues as new while the turn runs, the attempt goes on on its host (its
// agent, its reports: they go to the session's workflow id), and the next run adopts it
// (ResumeTurn): a RunTurn on the attempt's host queue with Adopt answers for that attempt
// from then on (its heartbeats, its cancel, its result). When that host does not take the
// adoption in time, or no longer holds the attempt, the turn runs a new attempt on the
// session queue, which loads the agent session as after a lost worker (turn.restarted). A
// limited turn's wait is the session's own timer, and a later run waits out the rest.

import (
	"encoding/json"
	"fmt"

	"github.com/tacp-dev/tacp/workflows/session"

	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
)

// hereTurn is the Here turn this run drives: its drive's cancel and its retry-now channel.
type hereTurn struct {
	turnID   int64
	cancel   workflow.CancelFunc
	retryNow workflow.Channel
}

// driveHere starts this run's drive of a Here turn: first is its first round (the attempts
// of a new turn, an adoption, the rest of a wait). Its start is known at once
// (ChildStarted); its end comes back as ChildEnded.
func (s *shell) driveHere(ctx workflow.Context, in signals.TurnInput, run signals.RunTurnInput, first round) {
	tctx, cancel := workflow.WithCancel(ctx)
	h := &hereTurn{turnID: in.TurnID, cancel: cancel, retryNow: workflow.NewBufferedChannel(ctx, 1)}
	s.here = h
	_, _ = s.core.Step(workflow.Now(ctx), session.ChildStarted{TurnID: in.TurnID})
	workflow.Go(tctx, func(ctx workflow.Context) {
		err := driveTurn(ctx, hereSide{s, h}, in, run, first)
		ended := session.ChildEnded{TurnID: in.TurnID}
		if err != nil {
			ended.Failure = err.Error()
		}
		_, _ = s.core.Step(workflow.Now(ctx), ended)
		s.stepped = true
	})
}

// startHere drives a new Here turn.
func (s *shell) startHere(ctx workflow.Context, c session.StartTurn) {
	run := signals.RunTurnInput{TurnInput: c.Input, SessionWorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, InSession: true}
	s.driveHere(ctx, c.Input, run, runAttempts)
}

// resumeHere goes on with the Here turn an earlier run drove (ResumeTurn).
func (s *shell) resumeHere(ctx workflow.Context, c session.ResumeTurn) {
	run := signals.RunTurnInput{
		TurnInput: c.Input, SessionWorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID,
		InSession: true, AttemptBase: c.Attempt, LimitWaits: c.LimitWaits,
	}
	if l := c.Limited; l != nil {
		// The wait of attempt l.Attempt: the run before reported it (turn_limited).
		res := signals.RunTurnResult{
			Attempt: l.Attempt, Batches: l.Batches, AgentSessionID: l.AgentSessionID, Host: l.HostQueue,
			Limited: &l.Limit,
		}
		run.LimitWaits = max(c.LimitWaits-1, 0) // the wait under way is counted when it ends
		s.driveHere(ctx, c.Input, run, func(ctx workflow.Context, in signals.TurnInput, run *signals.RunTurnInput) (signals.RunTurnResult, error) {
			return waitOut(ctx, hereSide{s, s.here}, in, run, res, c.RetryNow)
		})
		return
	}
	s.driveHere(ctx, c.Input, run, func(ctx workflow.Context, in signals.TurnInput, run *signals.RunTurnInput) (signals.RunTurnResult, error) {
		return adoptAttempt(ctx, in, run, c, func() bool { return s.core.LiveTurnByID(c.Input.TurnID) != nil })
	})
}

// adoptAttempt adopts attempt c.Attempt from c.HostQueue, the host that runs it; when the
// host does not take the adoption within the heartbeat timeout (or the affinity wait, if
// longer), or answers that it does not
// hold the attempt, or is lost after it, the turn runs a new attempt on the session queue,
// numbered after it and resuming from what the session or the adoption knew of it — unless
// the turn is no longer live (live: its end reached the session meanwhile).
func adoptAttempt(ctx workflow.Context, in signals.TurnInput, run *signals.RunTurnInput, c session.ResumeTurn, live func() bool) (signals.RunTurnResult, error) {
	run.Adopt = true
	o := runTurnOptions(in, 1)
	// A host lost mid-turn is noticed after the heartbeat timeout anyway; the adoption waits
	// as long before it gives up a live attempt (a new one restarts the agent's work).
	o.TaskQueue, o.ScheduleToStartTimeout = c.HostQueue, max(in.AffinityWait, in.Heartbeat, session.DefaultAffinityWait)
	o.Summary = fmt.Sprintf("turn %d: the new run adopts attempt %d on the worker that runs it (taken within %s, or the turn moves)", in.TurnID, c.Attempt, o.ScheduleToStartTimeout)
	actx := workflow.WithActivityOptions(ctx, o)
	var res signals.RunTurnResult
	err := workflow.ExecuteActivity(actx, signals.ActivityRunTurn, *run).Get(actx, &res)
	next := afterHostAttempt(err)
	if !next.Fallback || !live() {
		return res, err
	}
	workflow.GetLogger(ctx).Info("the adopted attempt moves to the session queue", "why", next.Why, "host", c.HostQueue, "error", err)
	// The adopting activity was no attempt of the turn: the next one is numbered after the
	// adopted attempt.
	run.Adopt, run.AttemptBase, run.Resume = false, c.Attempt, next.Resume
	if run.Resume == nil {
		run.Resume = c.Resume
	}
	in.HostQueue = ""
	run.TurnInput.HostQueue = ""
	return runAttempts(ctx, in, run)
}

// hereSide is a Here turn's side: the session's own core.
type hereSide struct {
	s *shell
	h *hereTurn
}

func (x hereSide) limited(ctx workflow.Context, sig signals.TurnLimitedSignal) error {
	x.report(ctx, signals.SignalTurnLimited, sig)
	return nil
}

func (x hereSide) finished(ctx workflow.Context, fin signals.TurnFinishedSignal) error {
	x.report(ctx, signals.SignalTurnFinished, fin)
	return nil
}

func (x hereSide) retryNow(workflow.Context) workflow.ReceiveChannel { return x.h.retryNow }

// report steps the core with the report a TurnWorkflow would have signalled.
func (x hereSide) report(ctx workflow.Context, name string, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode %s: %v", name, err)) // plain data: cannot fail
	}
	_, _ = x.s.core.Step(workflow.Now(ctx), session.SignalInput{Name: name, Raw: raw})
	x.s.stepped = true
}

// cancelHere cancels this run's drive of turn turnID (its activity is asked to cancel, and
// the drive reports the turn cancelled); a drive of another turn, or none, is left alone.
func (s *shell) cancelHere(turnID int64) {
	if s.here != nil && s.here.turnID == turnID {
		s.here.cancel()
	}
}

// retryHere ends the wait of this run's drive of turn turnID.
func (s *shell) retryHere(turnID int64) {
	if s.here != nil && s.here.turnID == turnID {
		s.here.retryNow.SendAsync(nil)
	}
}

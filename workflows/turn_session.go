package workflows

// The session's drive of its turn (contract §6 "Turns", §10): the session runs its turn's
// RunTurn activity itself, in a goroutine of its run (driveTurn, turn.go), and hears its
// outcome in the same run; the turn costs the session three history events and no round
// trip before the activity is scheduled.
//
// An activity belongs to its run. When the session continues as new while the turn runs,
// the attempt goes on on its host (its agent, its reports: they go to the session's
// workflow id), and the next run adopts it (ResumeTurn): a RunTurn on the attempt's host
// queue with Adopt answers for that attempt from then on (its heartbeats, its cancel, its
// result). When that host does not take the adoption in time, or no longer holds the
// attempt, the turn runs a new attempt on the session queue, which loads the agent session
// as after a lost worker (turn.restarted). A limited turn's wait is the session's own
// timer, and a later run waits out the rest.

import (
	"encoding/json"
	"fmt"

	"github.com/tacp-dev/tacp/workflows/session"

	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
)

// liveDrive is the turn this run drives: its drive's cancel and its retry-now channel.
type liveDrive struct {
	turnID   int64
	cancel   workflow.CancelFunc
	retryNow workflow.Channel
}

// runDrive starts this run's drive of a turn: first is its first round (the attempts of a
// new turn, an adoption, the rest of a wait). Its start is known at once (DriveStarted);
// its end comes back as DriveEnded.
func (s *shell) runDrive(ctx workflow.Context, in signals.TurnInput, run signals.RunTurnInput, first round) {
	tctx, cancel := workflow.WithCancel(ctx)
	h := &liveDrive{turnID: in.TurnID, cancel: cancel, retryNow: workflow.NewBufferedChannel(ctx, 1)}
	s.drive = h
	_, _ = s.core.Step(workflow.Now(ctx), session.DriveStarted{TurnID: in.TurnID})
	workflow.Go(tctx, func(ctx workflow.Context) {
		err := driveTurn(ctx, coreSide{s, h}, in, run, first)
		ended := session.DriveEnded{TurnID: in.TurnID}
		if err != nil {
			ended.Failure = err.Error()
		}
		_, _ = s.core.Step(workflow.Now(ctx), ended)
		s.stepped = true
	})
}

// startDrive drives a new turn.
func (s *shell) startDrive(ctx workflow.Context, c session.StartTurn) {
	run := signals.RunTurnInput{TurnInput: c.Input, SessionWorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID}
	s.runDrive(ctx, c.Input, run, runAttempts)
}

// resumeDrive goes on with the turn an earlier run drove (ResumeTurn).
func (s *shell) resumeDrive(ctx workflow.Context, c session.ResumeTurn) {
	run := signals.RunTurnInput{
		TurnInput: c.Input, SessionWorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID,
		AttemptBase: c.Attempt, LimitWaits: c.LimitWaits,
	}
	if l := c.Limited; l != nil {
		// The wait of attempt l.Attempt: the run before reported it (turn_limited).
		res := signals.RunTurnResult{
			Attempt: l.Attempt, Batches: l.Batches, AgentSessionID: l.AgentSessionID, Host: l.HostQueue,
			Limited: &l.Limit,
		}
		run.LimitWaits = max(c.LimitWaits-1, 0) // the wait under way is counted when it ends
		s.runDrive(ctx, c.Input, run, func(ctx workflow.Context, in signals.TurnInput, run *signals.RunTurnInput) (signals.RunTurnResult, error) {
			return waitOut(ctx, coreSide{s, s.drive}, in, run, res, c.RetryNow)
		})
		return
	}
	s.runDrive(ctx, c.Input, run, func(ctx workflow.Context, in signals.TurnInput, run *signals.RunTurnInput) (signals.RunTurnResult, error) {
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

// coreSide is the drive's side: the session's own core.
type coreSide struct {
	s *shell
	h *liveDrive
}

func (x coreSide) limited(ctx workflow.Context, sig signals.TurnLimitedSignal) error {
	x.report(ctx, signals.SignalTurnLimited, sig)
	return nil
}

func (x coreSide) finished(ctx workflow.Context, fin signals.TurnFinishedSignal) error {
	x.report(ctx, signals.SignalTurnFinished, fin)
	return nil
}

func (x coreSide) retryNow(workflow.Context) workflow.ReceiveChannel { return x.h.retryNow }

// report steps the core with the drive's report, as the signal of that name would.
func (x coreSide) report(ctx workflow.Context, name string, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode %s: %v", name, err)) // plain data: cannot fail
	}
	_, _ = x.s.core.Step(workflow.Now(ctx), session.SignalInput{Name: name, Raw: raw})
	x.s.stepped = true
}

// cancelDrive cancels this run's drive of turn turnID (its activity is asked to cancel, and
// the drive reports the turn cancelled); a drive of another turn, or none, is left alone.
func (s *shell) cancelDrive(turnID int64) {
	if s.drive != nil && s.drive.turnID == turnID {
		s.drive.cancel()
	}
}

// retryDrive ends the wait of this run's drive of turn turnID.
func (s *shell) retryDrive(turnID int64) {
	if s.drive != nil && s.drive.turnID == turnID {
		s.drive.retryNow.SendAsync(nil)
	}
}

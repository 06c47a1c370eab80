package workflows

// The drive of one turn: the RunTurn activity with its retries and failover (affinity.go),
// the waits for a provider's limit (turn_limits.go), and the outcome reported to the
// session's core. The session runs it in a goroutine of its run (turn_session.go).

import (
	"errors"
	"fmt"
	"time"

	"github.com/tacp-dev/tacp/workflows/session"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
)

// turnAttempts bounds the RunTurn attempts of a round: a lost worker is retried on another
// worker, and a round whose attempts were all lost is followed by another (attemptLost):
// only a failure that is not a lost worker fails the turn.
const turnAttempts = 3

// attemptLost reports whether a RunTurn ended because its worker was lost: its heartbeats
// stopped (the server's heartbeat timeout) or its runner saw its activity given up
// (signals.TypeAttemptLost). resume is how far it got, from its last heartbeat.
func attemptLost(err error) (lost bool, resume *signals.TurnProgress) {
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		if te.TimeoutType() != enumspb.TIMEOUT_TYPE_HEARTBEAT {
			return false, nil
		}
		var p signals.TurnProgress
		if te.HasLastHeartbeatDetails() && te.LastHeartbeatDetails(&p) == nil && p.AgentSessionID != "" {
			resume = &p
		}
		return true, resume
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == signals.TypeAttemptLost {
		var p signals.TurnProgress
		if ae.HasDetails() && ae.Details(&p) == nil && p.AgentSessionID != "" {
			resume = &p
		}
		return true, resume
	}
	return false, nil
}

// turnSide is where a turn's drive reports to and hears from its session.
type turnSide interface {
	// limited tells the session the attempt was limited (turn_limited).
	limited(ctx workflow.Context, sig signals.TurnLimitedSignal) error
	// finished tells the session the turn's outcome (turn_finished); ctx may be cancelled.
	finished(ctx workflow.Context, fin signals.TurnFinishedSignal) error
	// retryNow is where the session's retry_now arrives.
	retryNow(ctx workflow.Context) workflow.ReceiveChannel
}

// round runs one round of a turn's drive: its attempts (runAttempts), or, for a turn a
// session resumes after continuing as new, its adoption or the rest of its wait.
type round func(ctx workflow.Context, in signals.TurnInput, run *signals.RunTurnInput) (signals.RunTurnResult, error)

// driveTurn drives one turn: its first round, the waits for limits and the rounds after
// them, and the outcome for the session.
func driveTurn(ctx workflow.Context, side turnSide, in signals.TurnInput, run signals.RunTurnInput, first round) error {
	res, err := first(ctx, in, &run)
	// A limited attempt: wait on the timer and run the prompt again (turn_limits.go).
	for err == nil && res.Limited != nil {
		res, err = waitLimit(ctx, side, in, &run, res)
	}
	return side.finished(ctx, turnFinished(in.TurnID, res, err))
}

// runAttempts runs the RunTurn attempts of one round of the turn: on the host that holds
// the agent first, then on the session's queue, numbered on from run.AttemptBase.
func runAttempts(ctx workflow.Context, in signals.TurnInput, run *signals.RunTurnInput) (res signals.RunTurnResult, err error) {
	base, fallback := run.AttemptBase, true
	if in.HostQueue != "" {
		res, fallback, err = runOnHost(ctx, in, run)
	}
	if fallback {
		attempts := max(turnAttempts-(run.AttemptBase-base), 1)
		for {
			actx := workflow.WithActivityOptions(ctx, runTurnOptions(in, attempts))
			err = workflow.ExecuteActivity(actx, signals.ActivityRunTurn, *run).Get(actx, &res)
			lost, resume := attemptLost(err)
			if !lost || ctx.Err() != nil {
				break
			}
			// Every attempt's worker was lost (killed, or gone from the cluster): the turn
			// runs again, numbered on, and is never failed for it. Each attempt follows a
			// real loss; the turn's deadline bounds them all.
			workflow.GetLogger(ctx).Warn("every attempt's worker was lost: the turn runs again", "attempts", attempts, "error", err)
			run.AttemptBase += attempts
			attempts = turnAttempts
			if resume != nil {
				run.Resume = resume
			}
			res = signals.RunTurnResult{}
		}
		// No orphans: the turn ran elsewhere; the host the session left stops its idle agent
		// (it holds one when it was alive but slow to take the turn).
		if in.HostQueue != "" && res.Host != "" && res.Host != in.HostQueue {
			defer releaseAgent(ctx, in, res.Host)
		}
	}
	return res, err
}

// runTurnOptions are the RunTurn activity's options, with attempts attempts.
func runTurnOptions(in signals.TurnInput, attempts int32) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: in.StartToClose,
		HeartbeatTimeout:    in.Heartbeat,
		WaitForCancellation: true,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Second,
			MaximumAttempts:        attempts,
			NonRetryableErrorTypes: []string{signals.TypeAgentError},
		},
		Summary: fmt.Sprintf("turn %d: the agent works on the prompt (up to %d attempts)", in.TurnID, turnAttempts),
	}
}

// runOnHost runs the turn's first attempt on the host queue of the worker that holds the
// agent (contract §10): one attempt, taken within AffinityWait or not at all. fallback says
// the turn goes on on the session's queue, numbered on from the attempt (run is updated).
func runOnHost(ctx workflow.Context, in signals.TurnInput, run *signals.RunTurnInput) (res signals.RunTurnResult, fallback bool, err error) {
	wait := in.AffinityWait
	if wait <= 0 {
		wait = session.DefaultAffinityWait
	}
	o := runTurnOptions(in, 1)
	o.TaskQueue, o.ScheduleToStartTimeout = in.HostQueue, wait
	o.Summary = fmt.Sprintf("turn %d on the worker that holds the agent (taken within %s, or the turn moves)", in.TurnID, wait)
	hctx := workflow.WithActivityOptions(ctx, o)
	err = workflow.ExecuteActivity(hctx, signals.ActivityRunTurn, *run).Get(hctx, &res)
	next := afterHostAttempt(err)
	if next.Fallback {
		workflow.GetLogger(ctx).Info("turn falls back to the session queue", "why", next.Why, "host", in.HostQueue)
		// Numbered on from the attempts before this round (a limited turn's earlier rounds).
		run.AttemptBase, run.Resume = run.AttemptBase+next.Base, next.Resume
		res = signals.RunTurnResult{}
	}
	return res, next.Fallback, err
}

// turnFinished is the turn_finished report of a turn whose RunTurn ended with res and err.
func turnFinished(turnID int64, res signals.RunTurnResult, err error) signals.TurnFinishedSignal {
	fin := signals.TurnFinishedSignal{TurnID: turnID}
	var appErr *temporal.ApplicationError
	var timeoutErr *temporal.TimeoutError
	switch {
	case err == nil:
		fin.StopReason, fin.Attempt, fin.Batches = res.StopReason, res.Attempt, res.Batches
		fin.AgentSessionID, fin.Usage, fin.HostQueue = res.AgentSessionID, res.Usage, res.Host
		fin.Events, fin.Started = res.Events, res.Started // what no turn_events carried
		fin.Checkpoint = res.Checkpoint
	case temporal.IsCanceledError(err):
		fin.StopReason = "cancelled"
	case errors.As(err, &appErr):
		fin.Error = appErr.Message()
		var partial signals.RunTurnResult
		if appErr.HasDetails() && appErr.Details(&partial) == nil {
			fin.Attempt, fin.Batches, fin.AgentSessionID = partial.Attempt, partial.Batches, partial.AgentSessionID
			fin.Checkpoint = partial.Checkpoint
		}
	case errors.As(err, &timeoutErr):
		fin.Error = fmt.Sprintf("turn activity timed out (%s) after %d attempts: its worker was lost", timeoutErr.TimeoutType(), turnAttempts)
		fin.Orphaned = true
	default:
		fin.Error = err.Error()
	}
	return fin
}

// releaseAgent asks the host the session left to stop the session's idle agent: best effort,
// bounded by releaseTimeout (a host that is gone never takes it).
func releaseAgent(ctx workflow.Context, in signals.TurnInput, newHost string) {
	rctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              in.HostQueue,
		ScheduleToStartTimeout: releaseTimeout,
		StartToCloseTimeout:    releaseTimeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:                "stop the session's idle agent on the host it left",
	})
	rctx, _ = workflow.NewDisconnectedContext(rctx)
	_ = workflow.ExecuteActivity(rctx, signals.ActivityReleaseAgent, signals.ReleaseAgentRequest{SessionID: in.SessionID, NewHost: newHost}).Get(rctx, nil)
}

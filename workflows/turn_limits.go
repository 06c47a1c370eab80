package workflows

// A limited turn's wait (contract §11 "Limits"): the runner answered an attempt Limited (the
// model provider limited it, signals/limits.go); the turn's drive tells the session
// (turn_limited, journaled turn.limited), waits on a durable timer until the limit's
// RetryAt, and runs the same prompt again as the turn's next attempt, on the host that holds
// the agent first. A retry_now signal (the session's, when a person asks) ends the wait
// early; the turn's cancel ends it cancelled. The timer is the server's, so the wait
// survives the worker and the server restarting.

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
)

// waitLimit tells the session that the attempt that answered res was limited, waits out the
// limit and runs the turn's next round; its result is that round's (a cancel during the
// wait: the context's error).
func waitLimit(ctx workflow.Context, side turnSide, in signals.TurnInput, run *signals.RunTurnInput, res signals.RunTurnResult) (signals.RunTurnResult, error) {
	retryNow := side.retryNow(ctx)
	for retryNow.ReceiveAsync(nil) { // a retry_now of an earlier wait is spent
	}
	sig := signals.TurnLimitedSignal{
		TurnID: in.TurnID, Attempt: res.Attempt, Batches: res.Batches,
		AgentSessionID: res.AgentSessionID, HostQueue: res.Host, Limit: *res.Limited,
	}
	if err := side.limited(ctx, sig); err != nil {
		return signals.RunTurnResult{}, err
	}
	return waitOut(ctx, side, in, run, res, false)
}

// waitOut waits until the limit's RetryAt, or a retry_now (at once when retryNow: a person
// asked already), and runs the turn's next round, numbered on from res.Attempt.
func waitOut(ctx workflow.Context, side turnSide, in signals.TurnInput, run *signals.RunTurnInput, res signals.RunTurnResult, retryNow bool) (signals.RunTurnResult, error) {
	lim := *res.Limited
	wait := lim.RetryAt.Sub(workflow.Now(ctx))
	if wait > 0 && !retryNow {
		tctx, stop := workflow.WithCancel(ctx)
		timer := workflow.NewTimerWithOptions(tctx, wait, workflow.TimerOptions{
			Summary: fmt.Sprintf("turn %d waits for the %s limit until %s", in.TurnID, lim.Reason, lim.RetryAt.UTC().Format("15:04:05 UTC")),
		})
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(timer, func(workflow.Future) {})
		sel.AddReceive(side.retryNow(ctx), func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
		sel.Select(ctx)
		stop()
		if ctx.Err() != nil { // the turn was cancelled while it waited
			return signals.RunTurnResult{}, temporal.NewCanceledError()
		}
	}
	next := in
	next.HostQueue, next.AgentSessionID = res.Host, res.AgentSessionID
	if next.AgentSessionID == "" {
		next.AgentSessionID = in.AgentSessionID
	}
	*run = signals.RunTurnInput{
		TurnInput: next, SessionWorkflowID: run.SessionWorkflowID,
		AttemptBase: res.Attempt, LimitWaits: run.LimitWaits + 1,
	}
	return runAttempts(ctx, next, run)
}

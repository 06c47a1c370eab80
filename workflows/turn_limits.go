package workflows

// A limited turn's wait (contract §11 "Limits"): the runner answered an attempt Limited (the
// model provider limited it, signals/limits.go); the TurnWorkflow tells the session
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

// waitLimit waits out the limit of the attempt that answered res and runs the turn's next
// round; its result is that round's (a cancel during the wait: the context's error).
func waitLimit(ctx workflow.Context, in signals.TurnInput, run *signals.RunTurnInput, res signals.RunTurnResult) (signals.RunTurnResult, error) {
	lim := *res.Limited
	retryNow := workflow.GetSignalChannel(ctx, signals.SignalTurnRetryNow)
	for retryNow.ReceiveAsync(nil) { // a retry_now of an earlier wait is spent
	}
	sig := signals.TurnLimitedSignal{
		TurnID: in.TurnID, Attempt: res.Attempt, Batches: res.Batches,
		AgentSessionID: res.AgentSessionID, HostQueue: res.Host, Limit: lim,
	}
	if err := workflow.SignalExternalWorkflow(ctx, signals.SessionWorkflowID(in.SessionID), "", signals.SignalTurnLimited, sig).Get(ctx, nil); err != nil {
		return signals.RunTurnResult{}, err
	}
	wait := lim.RetryAt.Sub(workflow.Now(ctx))
	if wait > 0 {
		tctx, stop := workflow.WithCancel(ctx)
		timer := workflow.NewTimerWithOptions(tctx, wait, workflow.TimerOptions{
			Summary: fmt.Sprintf("turn %d waits for the %s limit until %s", in.TurnID, lim.Reason, lim.RetryAt.UTC().Format("15:04:05 UTC")),
		})
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(timer, func(workflow.Future) {})
		sel.AddReceive(retryNow, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
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

package activities

// A turn attempt's end: its last events flushed, its result completed, and the errors of
// a turn the agent failed.

import (
	"encoding/json"
	"errors"
	"fmt"

	acp "github.com/coder/acp-go-sdk"
	"go.temporal.io/sdk/temporal"

	"github.com/tacp-dev/tacp/activities/turn"
	"github.com/tacp-dev/tacp/signals"
)

// finish flushes the turn's last events and completes the result with them; a
// turn_started no batch took goes out alone.
func (t *turnRun) finish(err error) (signals.RunTurnResult, error) {
	n, serr := t.b.close()
	t.startedOut(t.sendCtx)
	t.res.Batches = n
	t.res.Usage = t.watch.usageJSON() // a turn cut short reports what it has seen too
	if err == nil && serr != nil {
		err = serr // retryable: the next attempt replays the turn
	}
	return t.res, err
}

// finishAnswered is finish for a turn the agent answered: its last events (one batch,
// numbered on) and its turn_started, if no batch took it, are left in the result, the
// turn's report, instead of two signals of their own.
func (t *turnRun) finishAnswered() (signals.RunTurnResult, error) {
	held, n, serr := t.b.closeHolding()
	if len(held) > 0 {
		n++
	}
	t.res.Batches, t.res.Events, t.res.Started = n, held, t.takeStarted()
	t.res.Usage = t.watch.usageJSON()
	return t.res, serr // a batch that failed: retryable, the next attempt replays the turn
}

// ended finishes the attempt as the turn core ended it.
func (t *turnRun) ended(end turn.End, proc *agentProc, beat signals.TurnProgress) (signals.RunTurnResult, error) {
	switch {
	case end.Lost:
		// This attempt ends without a stop reason, so the session does not take it for the
		// turn's end; the next attempt runs the turn, with session/load.
		res, _ := t.finish(nil)
		return res, temporal.NewApplicationErrorWithCause("turn attempt lost", signals.TypeAttemptLost, end.Err, beat)
	case end.Err != nil:
		t.checkpoint()
		return t.finish(t.r.agentErr(proc, end.Err, t.res))
	case end.Exited:
		t.checkpoint()
		return t.finish(t.fail(proc.withPrinted(fmt.Errorf("%w during the turn", proc.exitErr()))))
	}
	if res, err, done := t.limited(end); done {
		return res, err
	}
	t.checkpoint()
	t.res.StopReason = end.StopReason
	return t.finishAnswered()
}

// agentErr is the error of a turn the agent failed: not retried, with the partial result
// (attempt, batches, agent session) as details.
func (r *Runner) agentErr(proc *agentProc, err error, res signals.RunTurnResult) error {
	msg := err.Error()
	var reqErr *acp.RequestError
	if errors.As(err, &reqErr) {
		msg = reqErr.Message
		if reqErr.Data != nil {
			if b, jerr := json.Marshal(reqErr.Data); jerr == nil {
				msg += " " + string(b)
			}
		}
	}
	if !proc.alive() {
		msg = proc.withPrinted(fmt.Errorf("%w: %s", proc.exitErr(), msg)).Error()
	}
	return temporal.NewNonRetryableApplicationError("agent: "+msg, signals.TypeAgentError, nil, res)
}

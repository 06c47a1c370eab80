package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
)

// driveAloneType names driveAlone in the tests' environments.
const driveAloneType = "DriveAlone"

// driveAlone drives one turn with no session around it, as a workflow of its own: its
// reports go out as signals to the session's workflow id, where the tests' mocks of
// SignalExternalWorkflow read them, and retry_now arrives as a signal.
func driveAlone(ctx workflow.Context, in signals.TurnInput) error {
	run := signals.RunTurnInput{TurnInput: in, SessionWorkflowID: signals.SessionWorkflowID(in.SessionID)}
	return driveTurn(ctx, signalSide{in.SessionID}, in, run, runAttempts)
}

// signalSide reports a drive's outcome by signals to the session's workflow id.
type signalSide struct{ sessionID string }

func (c signalSide) limited(ctx workflow.Context, sig signals.TurnLimitedSignal) error {
	return workflow.SignalExternalWorkflow(ctx, signals.SessionWorkflowID(c.sessionID), "", signals.SignalTurnLimited, sig).Get(ctx, nil)
}

func (c signalSide) finished(ctx workflow.Context, fin signals.TurnFinishedSignal) error {
	// The drive's context may be cancelled; the report goes out regardless.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	return workflow.SignalExternalWorkflow(dctx, signals.SessionWorkflowID(c.sessionID), "", signals.SignalTurnFinished, fin).Get(dctx, nil)
}

func (signalSide) retryNow(ctx workflow.Context) workflow.ReceiveChannel {
	return workflow.GetSignalChannel(ctx, retryNowSignal)
}

// retryNowSignal is the signal that ends driveAlone's wait for a limit.
const retryNowSignal = "retry_now"

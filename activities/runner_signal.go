package activities

// Signals to the session workflow, retried through transient failures.

import (
	"context"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"
)

// signal sends a signal to the session workflow (by workflow id: it reaches the current
// run), retrying transient failures for up to a minute.
func (r *Runner) signal(ctx context.Context, workflowID, name string, arg any) error {
	return signalWithRetry(ctx, r.Client, r.Logger, workflowID, name, arg)
}

func signalWithRetry(ctx context.Context, c client.Client, log *slog.Logger, workflowID, name string, arg any) error {
	backoff := 50 * time.Millisecond
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.SignalWorkflow(ctx, workflowID, "", name, arg)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		log.Warn("signal failed: retrying", "signal", name, "error", err)
		time.Sleep(backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
}

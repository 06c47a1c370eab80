package tacpclient

// How the client sends an update or a query to a session: an update met between two runs
// is sent again, a read the server or worker is too busy for is asked again, and what
// comes back is turned into a *signals.Rejection that says why a session is unknown or ended.

import (
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"

	"context"
	"errors"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

func (c *Client) update(ctx context.Context, sessionID, name string, req, res any) error {
	if err := signals.ValidateSessionID(sessionID); err != nil {
		return signals.Reject(signals.RejectInvalidRequest, "%v", err)
	}
	release, err := inFlight.acquire(ctx, sessionID)
	if err != nil {
		return err
	}
	defer release()
	err = resendNotReady(ctx, func() error {
		h, err := c.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID:   signals.SessionWorkflowID(sessionID),
			UpdateName:   name,
			Args:         []any{req},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(ctx, res)
		}
		return err
	})
	return c.mapErr(ctx, sessionID, err)
}

// resendNotReady calls send again, with backoff, while the session answers WorkflowNotReady:
// an update that meets the session between two runs (continue-as-new) was not admitted by
// either, so sending it again is safe; the next run takes it. It gives up with ctx, or after
// half a minute.
func resendNotReady(ctx context.Context, send func() error) error {
	giveUp := time.Now().Add(30 * time.Second)
	backoff := 20 * time.Millisecond
	for {
		err := send()
		var notReady *serviceerror.WorkflowNotReady
		if !errors.As(err, &notReady) || time.Now().After(giveUp) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// query runs a query of the session. A query a busy server or worker did not answer in time
// (the worker runs the query in a workflow task, behind the session's other work) is asked
// again, with a growing pause, until ctx ends, or for QueryPatience when ctx has no
// deadline: a slow session is late, not an error a person sees.
func (c *Client) query(ctx context.Context, sessionID, name string, res any, args ...any) error {
	if err := signals.ValidateSessionID(sessionID); err != nil {
		return signals.Reject(signals.RejectInvalidRequest, "%v", err)
	}
	var v converter.EncodedValue
	err := askWhileBusy(ctx, func(ctx context.Context) (err error) {
		v, err = c.Temporal.QueryWorkflow(ctx, signals.SessionWorkflowID(sessionID), "", name, args...)
		return err
	})
	if err != nil {
		return c.mapErr(ctx, sessionID, err)
	}
	return v.Get(res)
}

// askWhileBusy calls read, a call that changes nothing, again with a growing pause while it
// fails busy (the server or worker said "not now"), until it answers or ctx ends, or for
// QueryPatience when ctx has no deadline.
func askWhileBusy(ctx context.Context, read func(context.Context) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, QueryPatience)
		defer cancel()
	}
	for pause := 50 * time.Millisecond; ; pause = min(2*pause, 2*time.Second) {
		err := read(ctx)
		if err == nil || !busy(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
	}
}

// QueryPatience is how long a query with no deadline of its own is asked again while the
// server or the session's worker is too busy to answer it.
const QueryPatience = 30 * time.Second

// busy reports whether err is a server's or worker's "not now": the round trip or the
// query's workflow task timed out, the session's last workflow task did, the server is
// unavailable or sheds load. Anything else
// (no such session, a failed query, a refusal) is an answer.
func busy(err error) bool {
	var (
		deadline  *serviceerror.DeadlineExceeded
		unavail   *serviceerror.Unavailable
		exhausted *serviceerror.ResourceExhausted
		canceled  *serviceerror.Canceled
	)
	// WorkflowNotReady: the session's last workflow task timed out on a busy worker (the
	// server runs it again, and the session answers queries once it has).
	var notReady *serviceerror.WorkflowNotReady
	return errors.As(err, &deadline) || errors.As(err, &unavail) || errors.As(err, &exhausted) ||
		errors.As(err, &canceled) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &notReady)
}

// mapErr turns a validator's ApplicationError into a *signals.Rejection, and "no such workflow"
// into unknown_session or session_closed.
func (c *Client) mapErr(ctx context.Context, sessionID string, err error) error {
	if err == nil {
		return nil
	}
	if rej, ok := rejection.As(err); ok {
		return rej
	}
	var notFound *serviceerror.NotFound
	var queryFailed *serviceerror.QueryFailed
	switch {
	case errors.As(err, &notFound):
		if rej := c.ended(ctx, sessionID); rej != nil {
			return rej
		}
		return signals.Reject(signals.RejectUnknownSession, "no session %s", sessionID)
	case errors.As(err, &queryFailed):
		// A session whose workflow failed before it registered its queries (a refused
		// config) answers none: say why it ended, not "unknown queryType".
		if rej := c.ended(ctx, sessionID); rej != nil && rej.Type == signals.RejectSessionFailed {
			return rej
		}
	}
	return err
}

// ended is the rejection of a request to a session whose workflow is no longer running:
// session_closed when it completed (closed), session_failed with the reason when it
// failed, was terminated or timed out. nil: it runs, or there is no such session.
func (c *Client) ended(ctx context.Context, sessionID string) *signals.Rejection {
	d, err := c.Temporal.DescribeWorkflowExecution(ctx, signals.SessionWorkflowID(sessionID), "")
	if err != nil {
		return nil
	}
	info := d.GetWorkflowExecutionInfo()
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return signals.Reject(signals.RejectSessionClosed, "session %s is closed", sessionID)
	}
	return signals.Reject(signals.RejectSessionFailed, "session %s %s", sessionID, c.endReason(ctx, info.GetExecution().GetWorkflowId(), info.GetExecution().GetRunId(), info.GetStatus()))
}

// endReason says how a workflow run that did not complete ended, from its close event:
// "failed: invalid session config: …", "terminated by an operator: …", "timed out".
func (c *Client) endReason(ctx context.Context, workflowID, runID string, status enumspb.WorkflowExecutionStatus) string {
	what := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(status.String(), "WORKFLOW_EXECUTION_STATUS_")), "_", " ")
	it := c.Temporal.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			break
		}
		if a := ev.GetWorkflowExecutionFailedEventAttributes(); a != nil {
			return "failed: " + a.GetFailure().GetMessage()
		}
		if a := ev.GetWorkflowExecutionTerminatedEventAttributes(); a != nil {
			return "terminated by an operator: " + orDefault(a.GetReason(), "no reason given")
		}
	}
	return what
}

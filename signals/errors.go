package signals

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
)

// Rejection types (the ApplicationError type of contract §3).
const (
	RejectQueueFull        = "queue_full"
	RejectInvalidRequest   = "invalid_request"
	RejectSessionClosed    = "session_closed"
	RejectStaleTurn        = "stale_turn"
	RejectNoLiveTurn       = "no_live_turn"
	RejectClientMsgIDReuse = "client_msg_id_reuse"
	RejectNoSteerChannel   = "no_steer_channel"
	RejectUnknownRequest   = "unknown_request"
	RejectInvalidOption    = "invalid_option"
	RejectForbidden        = "forbidden"
	// RejectUnknownSession is raised by the client, not the workflow: no such session.
	RejectUnknownSession = "unknown_session"
	// RejectSessionFailed is raised by the client, not the workflow: the session's workflow
	// failed (its config was refused when it started, or its run failed) or was terminated
	// or timed out; the message says why.
	RejectSessionFailed = "session_failed"
)

// Rejection is a request the session refused. It changed nothing and, for an update, wrote
// no history. Test for it with errors.As; Type is one of the Reject* constants.
type Rejection struct {
	Type    string
	Message string
	// Details holds the typed details of the rejection: StaleTurnDetails for stale_turn.
	Details any
}

func (r *Rejection) Error() string {
	if r.Message == "" {
		return r.Type
	}
	return r.Type + ": " + r.Message
}

// Reject returns a Rejection of type typ.
func Reject(typ, format string, args ...any) *Rejection {
	return &Rejection{Type: typ, Message: fmt.Sprintf(format, args...)}
}

// ApplicationError converts r into the error a validator returns, so that it reaches the
// client as a *temporal.ApplicationError with r's type and details. It is non-retryable:
// a refusal is an answer, and the same request gets the same one (the Temporal UI and CLI
// show the flag).
func (r *Rejection) ApplicationError() error {
	opts := temporal.ApplicationErrorOptions{NonRetryable: true}
	if r.Details != nil {
		opts.Details = []any{r.Details}
	}
	return temporal.NewApplicationErrorWithOptions(r.Message, r.Type, opts)
}

// rejectionTypes are the types fromError turns back into a *Rejection.
var rejectionTypes = map[string]bool{
	RejectQueueFull: true, RejectInvalidRequest: true, RejectSessionClosed: true,
	RejectStaleTurn: true, RejectNoLiveTurn: true, RejectClientMsgIDReuse: true,
	RejectNoSteerChannel: true, RejectUnknownRequest: true, RejectInvalidOption: true,
	RejectForbidden: true,
}

// AsRejection returns err as a *Rejection when it carries one of the rejection types
// (a validator's ApplicationError), decoding the details of a stale_turn.
func AsRejection(err error) (*Rejection, bool) {
	var r *Rejection
	if errors.As(err, &r) {
		return r, true
	}
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !rejectionTypes[appErr.Type()] {
		return nil, false
	}
	r = &Rejection{Type: appErr.Type(), Message: appErr.Message()}
	if appErr.Type() == RejectStaleTurn && appErr.HasDetails() {
		var d StaleTurnDetails
		if appErr.Details(&d) == nil {
			r.Details = d
		}
	}
	return r, true
}

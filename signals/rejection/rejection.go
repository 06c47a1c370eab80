// Package rejection carries a session's refusals (signals.Rejection, contract §3) over
// Temporal: an update's validator or handler returns Error(r), which reaches the client as a
// *temporal.ApplicationError of r's type, and the client reads it back with As. It is the one
// place the wire's rejection meets the SDK, so that signals imports only the standard library.
package rejection

import (
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/tacp-dev/tacp/signals"
)

// Error converts r into the error a validator returns, so that it reaches the
// client as a *temporal.ApplicationError with r's type and details. It is non-retryable:
// a refusal is an answer, and the same request gets the same one (the Temporal UI and CLI
// show the flag).
func Error(r *signals.Rejection) error {
	opts := temporal.ApplicationErrorOptions{NonRetryable: true}
	if r.Details != nil {
		opts.Details = []any{r.Details}
	}
	return temporal.NewApplicationErrorWithOptions(r.Message, r.Type, opts)
}

// rejectionTypes are the types fromError turns back into a *Rejection.
var rejectionTypes = map[string]bool{
	signals.RejectQueueFull: true, signals.RejectInvalidRequest: true, signals.RejectSessionClosed: true,
	signals.RejectStaleTurn: true, signals.RejectNoLiveTurn: true, signals.RejectClientMsgIDReuse: true,
	signals.RejectNoSteerChannel: true, signals.RejectUnknownRequest: true, signals.RejectInvalidOption: true,
	signals.RejectForbidden: true,
}

// As returns err as a *Rejection when it carries one of the rejection types
// (a validator's ApplicationError), decoding the details of a stale_turn.
func As(err error) (*signals.Rejection, bool) {
	var r *signals.Rejection
	if errors.As(err, &r) {
		return r, true
	}
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !rejectionTypes[appErr.Type()] {
		return nil, false
	}
	r = &signals.Rejection{Type: appErr.Type(), Message: appErr.Message()}
	if appErr.Type() == signals.RejectStaleTurn && appErr.HasDetails() {
		var d signals.StaleTurnDetails
		if appErr.Details(&d) == nil {
			r.Details = d
		}
	}
	return r, true
}

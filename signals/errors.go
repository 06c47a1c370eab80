package signals

import "fmt"

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

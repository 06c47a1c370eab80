package rejection

// Tests of the rejection error type (contract §3): a validator returns
// Error(r), the client gets a *temporal.ApplicationError back (in
// process, or decoded from a Failure on the wire), and As turns it into a *signals.Rejection
// again with the type, message and stale_turn details intact.

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tacp-dev/tacp/signals"
	"go.temporal.io/sdk/temporal"
)

// overTheWire sends err through the default failure converter, as the server hands a
// validator's error to the client.
func overTheWire(t *testing.T, err error) error {
	t.Helper()
	fc := temporal.GetDefaultFailureConverter()
	return fc.FailureToError(fc.ErrorToFailure(err))
}

func TestRejection_ErrorText(t *testing.T) {
	require.Equal(t, "no_live_turn: no turn is running", signals.Reject(signals.RejectNoLiveTurn, "no turn is running").Error())
	require.Equal(t, "queue_full", (&signals.Rejection{Type: signals.RejectQueueFull}).Error())
	require.Equal(t, "stale_turn: expected turn 7, the live turn is 7.1",
		signals.Reject(signals.RejectStaleTurn, "expected turn %s, the live turn is %s", "7", "7.1").Error())
}

func TestRejection_AsRejectionRoundTripThroughApplicationError(t *testing.T) {
	stale := signals.Reject(signals.RejectStaleTurn, "expected turn 7, the live turn is 7.1")
	stale.Details = signals.StaleTurnDetails{Expected: "7", Actual: "7.1"}
	tests := []struct {
		name string
		rej  *signals.Rejection
	}{
		{"stale_turn with details", stale},
		{"stale_turn without details", signals.Reject(signals.RejectStaleTurn, "stale")},
		{"queue_full", signals.Reject(signals.RejectQueueFull, "16 prompts are queued; the limit is 16")},
		{"invalid_request", signals.Reject(signals.RejectInvalidRequest, "steer text is empty")},
		{"session_closed", signals.Reject(signals.RejectSessionClosed, "closed")},
		{"no_live_turn", signals.Reject(signals.RejectNoLiveTurn, "no turn is running")},
		{"client_msg_id_reuse", signals.Reject(signals.RejectClientMsgIDReuse, `client_msg_id "m1" was used for a different text`)},
		{"no_steer_channel", signals.Reject(signals.RejectNoSteerChannel, "turn 7 cannot take steers")},
		{"unknown_request", signals.Reject(signals.RejectUnknownRequest, "no request p1")},
		{"invalid_option", signals.Reject(signals.RejectInvalidOption, "no option o9")},
		{"forbidden", signals.Reject(signals.RejectForbidden, "viewer v1 is an observer")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			appErr := Error(tt.rej)
			var ae *temporal.ApplicationError
			require.ErrorAs(t, appErr, &ae)
			require.Equal(t, tt.rej.Type, ae.Type())
			require.Equal(t, tt.rej.Message, ae.Message())
			require.Equal(t, tt.rej.Details != nil, ae.HasDetails())

			for name, err := range map[string]error{
				"in process":             appErr,
				"over the wire":          overTheWire(t, appErr),
				"wrapped by the client":  fmt.Errorf("update steer: %w", appErr),
				"wrapped, over the wire": fmt.Errorf("update steer: %w", overTheWire(t, appErr)),
			} {
				got, ok := As(err)
				require.True(t, ok, name)
				require.Equal(t, tt.rej, got, name)
			}
		})
	}
}

func TestRejection_StaleTurnDetailsDecodeFromJSON(t *testing.T) {
	// The details a validator sends are JSON on the wire: {"expected": ..., "actual": ...}.
	rej := signals.Reject(signals.RejectStaleTurn, "stale")
	rej.Details = signals.StaleTurnDetails{Expected: "3", Actual: "4.2"}
	wire := overTheWire(t, Error(rej))

	var ae *temporal.ApplicationError
	require.ErrorAs(t, wire, &ae)
	var raw map[string]string
	require.NoError(t, ae.Details(&raw))
	require.Equal(t, map[string]string{"expected": "3", "actual": "4.2"}, raw)

	got, ok := As(wire)
	require.True(t, ok)
	d, ok := got.Details.(signals.StaleTurnDetails)
	require.True(t, ok, "details are a signals.StaleTurnDetails, got %T", got.Details)
	require.Equal(t, signals.StaleTurnDetails{Expected: "3", Actual: "4.2"}, d)
}

func TestRejection_ErrorsAsOnWrappedRejection(t *testing.T) {
	rej := signals.Reject(signals.RejectNoLiveTurn, "no turn is running")
	err := fmt.Errorf("steer s1: %w", fmt.Errorf("attempt 1: %w", rej))

	var target *signals.Rejection
	require.ErrorAs(t, err, &target)
	require.Same(t, rej, target)

	got, ok := As(err)
	require.True(t, ok)
	require.Same(t, rej, got)

	// unknown_session is raised by the client as a *signals.Rejection, never by a validator.
	unknown := signals.Reject(signals.RejectUnknownSession, "no session s9")
	got, ok = As(fmt.Errorf("status: %w", unknown))
	require.True(t, ok)
	require.Equal(t, signals.RejectUnknownSession, got.Type)
}

func TestRejection_NonRejectionErrorsAreNotRejections(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"nil", nil},
		{"plain error", errors.New("boom")},
		{"agent_error", temporal.NewApplicationError("agent failed", signals.TypeAgentError)},
		{"unknown_session as an ApplicationError", temporal.NewApplicationError("no session", signals.RejectUnknownSession)},
		{"untyped ApplicationError", temporal.NewApplicationError("oops", "")},
		{"other type", temporal.NewApplicationError("oops", "SomethingElse")},
		{"type differs in case", temporal.NewApplicationError("oops", "STALE_TURN")},
		{"agent_error over the wire", overTheWire(t, temporal.NewApplicationError("agent failed", signals.TypeAgentError))},
		{"canceled", temporal.NewCanceledError()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := As(tt.err)
			require.False(t, ok)
			require.Nil(t, got)
		})
	}
}

// A rejection is an answer, not a transient failure: the error a validator returns is
// non-retryable.
func TestRejection_ApplicationErrorIsNonRetryable(t *testing.T) {
	for _, rej := range []*signals.Rejection{
		signals.Reject(signals.RejectSessionClosed, "session s1 is closed"),
		{Type: signals.RejectStaleTurn, Message: "stale", Details: signals.StaleTurnDetails{Expected: "1", Actual: "2"}},
	} {
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(Error(rej), &appErr))
		require.True(t, appErr.NonRetryable(), "%s", rej.Type)
		back, ok := As(Error(rej))
		require.True(t, ok)
		require.Equal(t, rej.Type, back.Type)
	}
}

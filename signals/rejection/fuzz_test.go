package rejection

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/tacp-dev/tacp/signals"
)

// FuzzAsRejection sends an ApplicationError of arbitrary type, message and details over the
// wire (the failure converter, as a validator's error reaches a client): AsRejection
// recognizes exactly the rejection types of contract §3, keeps type and message, and decodes
// stale_turn details only when they are signals.StaleTurnDetails-shaped; nothing else is taken for a
// rejection.
func FuzzAsRejection(f *testing.F) {
	f.Add(signals.RejectStaleTurn, "expected turn 7, the live turn is 7.1", `{"expected":"7","actual":"7.1"}`)
	f.Add(signals.RejectStaleTurn, "m", `"just a string"`)
	f.Add(signals.RejectQueueFull, "16 prompts are queued", ``)
	f.Add(signals.RejectUnknownSession, "no session x", ``) // raised by the client, never by a validator
	f.Add("", "", `null`)
	f.Add("StaleTurn", "case matters", `{}`)
	f.Add("not_a_rejection", "x", `[1,2]`)
	fc := temporal.GetDefaultFailureConverter()
	f.Fuzz(func(t *testing.T, typ, msg, details string) {
		var appErr error
		if json.Valid([]byte(details)) {
			appErr = temporal.NewApplicationError(msg, typ, json.RawMessage(details))
		} else {
			appErr = temporal.NewApplicationError(msg, typ)
		}
		err := fc.FailureToError(fc.ErrorToFailure(appErr))
		rej, ok := As(err)
		if ok != rejectionTypes[typ] {
			t.Fatalf("As(type %q) = %v", typ, ok)
		}
		if !ok {
			if rej != nil {
				t.Fatalf("a non-rejection came back as %+v", rej)
			}
			return
		}
		if rej.Type != typ || rej.Message != msg {
			t.Fatalf("rejection %+v, sent type %q message %q", rej, typ, msg)
		}
		if rej.Error() == "" || !strings.HasPrefix(rej.Error(), typ) {
			t.Fatalf("error text %q", rej.Error())
		}
		if rej.Details != nil {
			if typ != signals.RejectStaleTurn {
				t.Fatalf("details %#v decoded for %s", rej.Details, typ)
			}
			if _, isStale := rej.Details.(signals.StaleTurnDetails); !isStale {
				t.Fatalf("stale_turn details of type %T", rej.Details)
			}
		}
		// A rejection survives a second trip unchanged.
		back, ok := As(fc.FailureToError(fc.ErrorToFailure(Error(rej))))
		if !ok || back.Type != rej.Type || back.Message != rej.Message || !reflect.DeepEqual(back.Details, rej.Details) {
			t.Fatalf("second trip: %+v, first %+v", back, rej)
		}
	})
}

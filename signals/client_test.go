package signals

import (
	"context"
	"errors"
	"testing"

	"go.temporal.io/api/serviceerror"
)

func TestResendNotReadyResendsOnlyWhatNoRunAdmitted(t *testing.T) {
	notReady := serviceerror.NewWorkflowNotReady("workflow is continuing as new")
	other := errors.New("unavailable")
	for _, tc := range []struct {
		name  string
		errs  []error
		sends int
		want  error
	}{
		{"sent once when it succeeds", []error{nil}, 1, nil},
		{"resent while the session is between runs", []error{notReady, notReady, nil}, 3, nil},
		{"other errors are not resent", []error{other}, 1, other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sends := 0
			err := resendNotReady(context.Background(), func() error {
				err := tc.errs[sends]
				sends++
				return err
			})
			if !errors.Is(err, tc.want) || sends != tc.sends {
				t.Fatalf("err %v after %d sends, want %v after %d", err, sends, tc.want, tc.sends)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := resendNotReady(ctx, func() error { return notReady }); !errors.As(err, new(*serviceerror.WorkflowNotReady)) {
		t.Fatalf("a cancelled context returns the last error, got %v", err)
	}
}

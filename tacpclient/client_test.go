package tacpclient

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tacp-dev/tacp/signals"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
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

// queryAnswers is a Temporal client whose QueryWorkflow answers with errs in order, then
// with a status.
type queryAnswers struct {
	client.Client
	errs  []error
	asked int
}

func (q *queryAnswers) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	q.asked++
	if q.asked <= len(q.errs) {
		return nil, q.errs[q.asked-1]
	}
	p, err := converter.GetDefaultDataConverter().ToPayloads(signals.Status{State: signals.StateRunning})
	if err != nil {
		return nil, err
	}
	return encoded{p}, nil
}

func (q *queryAnswers) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return nil, errors.New("not described here")
}

type encoded struct{ p *commonpb.Payloads }

func (e encoded) HasValue() bool { return true }
func (e encoded) Get(v any) error {
	return converter.GetDefaultDataConverter().FromPayloads(e.p, v)
}

// Slow is not dead (issue 35): a query the server or the session's worker was too busy to
// answer is asked again, and the viewer gets its answer late rather than an error; an
// answer (no such session) is not asked again.
func TestQueryAsksAgainWhatABusyServerDidNotAnswer(t *testing.T) {
	busyErrs := []error{
		serviceerror.NewDeadlineExceeded("query timed out"),
		serviceerror.NewResourceExhausted(0, "busy"),
		serviceerror.NewUnavailable("restarting"),
		context.DeadlineExceeded,
		serviceerror.NewWorkflowNotReady("Unable to query workflow due to Workflow Task in failed state."),
	}
	q := &queryAnswers{errs: busyErrs}
	st, err := NewClient(q, "").Status(context.Background(), "s1")
	require.NoError(t, err)
	require.Equal(t, signals.StateRunning, st.State)
	require.Equal(t, len(busyErrs)+1, q.asked)

	q = &queryAnswers{errs: []error{serviceerror.NewQueryFailed("unknown queryType")}}
	_, err = NewClient(q, "").Status(context.Background(), "s1")
	require.Error(t, err)
	require.Equal(t, 1, q.asked, "an answer is not asked again")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q = &queryAnswers{errs: []error{serviceerror.NewDeadlineExceeded("query timed out")}}
	_, err = NewClient(q, "").Status(ctx, "s1")
	require.Error(t, err, "the caller's context bounds the retries")
}

func TestAskWhileBusyAsksAgainOnlyWhileTheServerSaysNotNow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fails []error
		want  error
		calls int
	}{
		{"answered", nil, nil, 1},
		{"a busy store, then an answer", []error{serviceerror.NewUnavailable("store busy"), serviceerror.NewDeadlineExceeded("store slow")}, nil, 3},
		{"load shed, then an answer", []error{serviceerror.NewResourceExhausted(0, "visibility rps")}, nil, 2},
		{"a refusal is an answer", []error{serviceerror.NewInvalidArgument("bad query")}, serviceerror.NewInvalidArgument("bad query"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := askWhileBusy(context.Background(), func(context.Context) error {
				calls++
				if calls <= len(tc.fails) {
					return tc.fails[calls-1]
				}
				return nil
			})
			require.Equal(t, tc.want, err)
			require.Equal(t, tc.calls, calls)
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	busyErr := serviceerror.NewUnavailable("store busy")
	require.Equal(t, busyErr, askWhileBusy(ctx, func(context.Context) error { return busyErr }), "a caller gone ends the asking")
}

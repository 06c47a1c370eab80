package signals

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// cutShortQueries answers a session's queries after the first fail of them were cut short
// by the server (the worker that held the session's sticky queue died under them).
type cutShortQueries struct {
	client.Client // nil: the tests call only QueryWorkflow
	fail          int
	err           error
	calls         int
}

func (q *cutShortQueries) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	q.calls++
	if q.calls <= q.fail {
		return nil, q.err
	}
	return jsonValue(`{"session_id":"s1","state":"idle"}`), nil
}

type jsonValue string

func (v jsonValue) HasValue() bool    { return true }
func (v jsonValue) Get(ptr any) error { return json.Unmarshal([]byte(v), ptr) }
func (v jsonValue) String() string    { return string(v) }

// A session outlives its workers, and so does a question to it: a query the server cut short
// is asked again; an error that is an answer is not.
func TestAQueryCutShortIsAskedAgain(t *testing.T) {
	q := &cutShortQueries{fail: 2, err: serviceerror.NewCanceled("context canceled")}
	st, err := NewClient(q, "").Status(context.Background(), "s1")
	require.NoError(t, err)
	require.Equal(t, StateIdle, st.State)
	require.Equal(t, 3, q.calls)

	q = &cutShortQueries{fail: 1, err: serviceerror.NewUnavailable("no poller")}
	_, err = NewClient(q, "").Status(context.Background(), "s1")
	require.NoError(t, err)
	require.Equal(t, 2, q.calls)

	q = &cutShortQueries{fail: 5, err: errors.New("the answer does not decode")}
	_, err = NewClient(q, "").Status(context.Background(), "s1")
	require.ErrorContains(t, err, "does not decode")
	require.Equal(t, 1, q.calls, "asked once")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q = &cutShortQueries{fail: 5, err: serviceerror.NewCanceled("context canceled")}
	_, err = NewClient(q, "").Status(ctx, "s1")
	require.Error(t, err)
	require.Equal(t, 1, q.calls, "the caller's own end is not asked again")
}

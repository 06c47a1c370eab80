package activities

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tacp-dev/tacp/signals"
)

// beatRecorder is a beat target with one owner that records how that owner ended.
type beatRecorder struct {
	owner   context.Context
	changed chan struct{}

	mu     sync.Mutex
	causes []error
}

func (b *beatRecorder) beatCtx() context.Context      { return b.owner }
func (b *beatRecorder) ownerChanged() <-chan struct{} { return b.changed }
func (b *beatRecorder) lostOwner(owner context.Context, cause error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.causes = append(b.causes, cause)
}

func (b *beatRecorder) ended() []error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]error(nil), b.causes...)
}

// runBeats runs a heartbeat whose beats answer with answers, in order (the last one from then
// on), until it has sent want beats; it returns the target, which records the owner's end.
func runBeats(t *testing.T, want int, answers ...error) *beatRecorder {
	t.Helper()
	to := &beatRecorder{owner: context.Background(), changed: make(chan struct{})}
	var (
		mu   sync.Mutex
		sent int
		done = make(chan struct{})
	)
	send := func(rpc, _ context.Context, p signals.TurnProgress) error {
		mu.Lock()
		defer mu.Unlock()
		_, hasDeadline := rpc.Deadline()
		require.True(t, hasDeadline, "a beat's round trip is bounded")
		err := answers[min(sent, len(answers)-1)]
		if sent++; sent == want {
			close(done)
		}
		return err
	}
	h := newHeartbeat(signals.TurnProgress{}, client.MetricsNopHandler)
	go h.run(to, send, 10*time.Millisecond, time.Second, slog.New(slog.DiscardHandler))
	defer h.stop()
	<-done
	return to
}

// Slow is not dead (issue 35): a beat the server does not answer in time, or answers with a
// transient error, is tried again, and the attempt goes on; the SDK's own heartbeat would
// have cancelled it.
func TestHeartbeat_AnUnansweredBeatIsTriedAgainAndTheAttemptGoesOn(t *testing.T) {
	slow := context.DeadlineExceeded
	busy := serviceerror.NewResourceExhausted(0, "busy")
	unavailable := serviceerror.NewUnavailable("restarting")
	require.Empty(t, runBeats(t, 6, slow, busy, unavailable, slow, nil, nil).ended())
}

// Only the server's word ends the owner: it no longer holds the activity (its heartbeat
// timeout passed, or its run closed), or the workflow asked for the cancellation.
func TestHeartbeat_TheServersAnswerEndsTheOwner(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"NotFound", serviceerror.NewNotFound("activity not found")},
		{"CancelRequested", temporal.NewCanceledError()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			to := runBeats(t, 1, tt.err)
			require.Eventually(t, func() bool { return len(to.ended()) > 0 }, 10*time.Second, time.Millisecond)
			require.Equal(t, []error{tt.err}, to.ended())
		})
	}
}

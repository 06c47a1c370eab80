package gateway

// The hub as other packages read it (Hub, Subscription: the deck's streams), and the bound
// on a connection that never speaks ACP.

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
)

// goneJournal answers every query with unknown_session once gone is set.
type goneJournal struct {
	*fakeJournal
	gone atomic.Bool
}

func (j *goneJournal) Events(ctx context.Context, id string, after int64, limit int) (signals.EventsResult, error) {
	if j.gone.Load() {
		return signals.EventsResult{}, signals.Reject(signals.RejectUnknownSession, "no session %s", id)
	}
	return j.fakeJournal.Events(ctx, id, after, limit)
}

// drainSub reads s from seq from until it has seen seq to.
func drainSub(t *testing.T, s *Subscription, from, to int64) []int64 {
	t.Helper()
	var got []int64
	for from < to {
		select {
		case <-s.Notify():
		case <-time.After(10 * time.Second):
			t.Fatalf("saw up to %d, want %d", from, to)
		}
		evs, ok := s.After(from)
		require.True(t, ok, "the cache covers %d", from)
		for _, ev := range evs {
			got = append(got, ev.Seq)
			from = ev.Seq
		}
	}
	return got
}

func TestSubscriptionsOfASessionShareOneFeedThatKnowsTheSession(t *testing.T) {
	j := &fakeJournal{}
	j.add(signals.EventSessionStarted, 0)
	h := &Hub{newHub(j, time.Millisecond, discard())}
	subs := make([]*Subscription, 50)
	for i := range subs {
		subs[i] = h.Subscribe("s", 0)
	}
	for _, s := range subs {
		require.Equal(t, []int64{1}, drainSub(t, s, 0, 1))
		require.True(t, s.Known(), "the feed has read the journal")
	}
	require.Equal(t, 1, j.queryCount(), "one query answered fifty subscribers")
	require.Equal(t, 1, h.h.feedCount())
	before := j.queryCount()
	j.add(signals.EventTurnStarted, 1)
	for _, s := range subs {
		require.Equal(t, []int64{2}, drainSub(t, s, 1, 2))
	}
	require.Equal(t, before+1, j.queryCount(), "one query for one wake-up, whatever the subscribers")
	for _, s := range subs {
		s.Unsubscribe()
	}
	require.Equal(t, 0, h.h.feedCount())
}

// gatedJournal holds every query until the test opens the gate.
type gatedJournal struct {
	*fakeJournal
	gate chan struct{}
}

func (j *gatedJournal) Events(ctx context.Context, id string, after int64, limit int) (signals.EventsResult, error) {
	<-j.gate
	return j.fakeJournal.Events(ctx, id, after, limit)
}

// A subscriber that waits for the feed's first answer is woken by it, events or none.
func TestSubscriptionIsWokenByTheFeedsFirstAnswer(t *testing.T) {
	j := &gatedJournal{fakeJournal: &fakeJournal{}, gate: make(chan struct{})}
	j.add(signals.EventSessionStarted, 0)
	h := &Hub{newHub(j, time.Millisecond, discard())}
	s := h.Subscribe("s", 1) // nothing after seq 1: the answer carries no event
	defer s.Unsubscribe()
	<-s.Notify() // the subscription's own first look
	require.False(t, s.Known(), "no query has answered")
	close(j.gate)
	select {
	case <-s.Notify():
	case <-time.After(10 * time.Second):
		t.Fatal("the first answer woke nobody")
	}
	require.True(t, s.Known())
	require.NoError(t, s.Err())
}

func TestSubscriptionSaysTheSessionEndedOnlyOnceItHasEverything(t *testing.T) {
	j := &fakeJournal{}
	h := &Hub{newHub(j, time.Millisecond, discard())}
	s := h.Subscribe("s", 0)
	defer s.Unsubscribe()
	j.add(signals.EventSessionStarted, 0)
	require.Equal(t, []int64{1}, drainSub(t, s, 0, 1))
	require.False(t, s.Ended())
	j.add(signals.EventSessionClosed, 0)
	j.end()
	require.Eventually(t, s.Ended, 10*time.Second, time.Millisecond)
	evs, ok := s.After(1)
	require.True(t, ok)
	require.Len(t, evs, 1, "an ended feed has the session's last events")
	evs, ok = s.After(2)
	require.True(t, ok && len(evs) == 0)
}

func TestSubscriptionCarriesTheRejectionOfAGoneSession(t *testing.T) {
	j := &goneJournal{fakeJournal: &fakeJournal{}}
	j.add(signals.EventSessionStarted, 0)
	h := &Hub{newHub(j, time.Millisecond, discard())}
	s := h.Subscribe("s", 0)
	defer s.Unsubscribe()
	drainSub(t, s, 0, 1)
	require.NoError(t, s.Err())
	require.True(t, s.Known())
	j.gone.Store(true)
	j.add(signals.EventAgentUpdate, 1) // wakes the feed, whose query is now rejected
	select {
	case <-s.Notify():
	case <-time.After(10 * time.Second):
		t.Fatal("the rejection woke nobody")
	}
	require.Eventually(t, func() bool { return s.Err() != nil }, 10*time.Second, time.Millisecond)
	rej, ok := rejection.As(s.Err())
	require.True(t, ok)
	require.Equal(t, signals.RejectUnknownSession, rej.Type)
	require.False(t, s.Known(), "a rejected session is not known")
}

// A feed's first subscriber may name a seq beyond the journal (a client's stale
// Last-Event-ID): the feed reads on from the journal's end, so that the next event reaches
// every subscriber.
func TestFeedStartedBeyondTheJournalReadsOnFromItsEnd(t *testing.T) {
	j := &fakeJournal{}
	j.add(signals.EventSessionStarted, 0)
	j.add(signals.EventPromptAccepted, 0)
	h := &Hub{newHub(j, time.Millisecond, discard())}
	ahead := h.Subscribe("s", 100)
	defer ahead.Unsubscribe()
	require.Eventually(t, ahead.Known, 10*time.Second, time.Millisecond)
	s := h.Subscribe("s", 0)
	defer s.Unsubscribe()
	evs, ok := s.After(2)
	require.True(t, ok && len(evs) == 0, "the feed stands at the journal's end")
	j.add(signals.EventTurnStarted, 1)
	require.Equal(t, []int64{3}, drainSub(t, s, 2, 3))
}

// A feed whose first subscriber names a seq further back than the cache holds reads only
// the journal's newest cacheSize events; a subscriber behind them is told to read the
// journal itself.
func TestFeedStartedFarBackReadsOnlyWhatItsCacheHolds(t *testing.T) {
	j := &fakeJournal{}
	for range 3*cacheSize + 7 {
		j.add(signals.EventAgentUpdate, 1)
	}
	h := &Hub{newHub(j, time.Millisecond, discard())}
	s := h.Subscribe("s", 0)
	defer s.Unsubscribe()
	last := int64(3*cacheSize + 7)
	require.Eventually(t, func() bool {
		evs, ok := s.After(last - 1)
		return ok && len(evs) == 1
	}, 10*time.Second, time.Millisecond)
	evs, ok := s.After(last - cacheSize)
	require.True(t, ok)
	require.Len(t, evs, cacheSize)
	_, ok = s.After(0)
	require.False(t, ok, "the reader at 0 reads the journal itself")
	pages := (cacheSize + eventsPage - 1) / eventsPage
	require.LessOrEqual(t, j.queryCount(), 1+pages+1, "the feed skipped what its cache would not hold")
}

func TestConnectionThatSendsNoACPMessageIsClosed(t *testing.T) {
	for name, client := range map[string]string{
		"silent":            "",
		"not JSON-RPC only": "hello\n{\"jsonrpc\":\"2.0\"}\n",
	} {
		t.Run(name, func(t *testing.T) {
			g := New(Options{FirstMessageTimeout: 50 * time.Millisecond})
			in, inW := io.Pipe()
			done := make(chan error, 1)
			go func() { done <- g.ServeConn(context.Background(), in, io.Discard, ConnOptions{}) }()
			go func() { _, _ = io.WriteString(inW, client) }()
			select {
			case err := <-done:
				require.True(t, errors.Is(err, ErrSilent), "err = %v", err)
			case <-time.After(30 * time.Second):
				t.Fatal("a connection that spoke no ACP stayed open")
			}
		})
	}
}

// A client that speaks ACP is served past the bound, whether it starts with initialize or,
// resuming, with another request.
func TestConnectionThatSpokeOutlivesTheBound(t *testing.T) {
	for name, first := range map[string]string{
		"initialize":   `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
		"another call": `{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"methodId":"none"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			g := New(Options{FirstMessageTimeout: 50 * time.Millisecond})
			in, inW := io.Pipe()
			out, outW := io.Pipe()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- g.ServeConn(ctx, in, outW, ConnOptions{}) }()
			go func() { _, _ = io.WriteString(inW, first+"\n") }()
			answer := make([]byte, 4096)
			n, err := out.Read(answer)
			require.NoError(t, err)
			require.Contains(t, string(answer[:n]), `"id":1`)
			go func() { _, _ = io.Copy(io.Discard, out) }()
			require.Never(t, func() bool { return len(done) > 0 }, 300*time.Millisecond, 10*time.Millisecond,
				"a connection that spoke ACP is not bounded")
			cancel()
			require.NoError(t, <-done)
		})
	}
}

package gateway

// The hub owns live delivery: one poller per session per gateway process, however many
// connections watch that session. A poller asks the session's events query for what follows
// the last seq it saw, keeps the newest events in a bounded cache and wakes its subscribers.
// It queries when the session's history has grown (signals.Follower: a long poll of the
// history, which costs no worker task), so a quiet session costs no query beyond the client's
// safety poll, and a chunk reaches the editor one history wake-up and one query after the
// session journaled it.
// Subscribers read at their own pace by seq: a connection whose client stops reading its
// stdout falls behind without holding up the poller, the session or the other connections,
// and catches up from the cache or, past it, from the journal itself.

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// eventSource is the part of signals.Client the hub reads.
type eventSource interface {
	Events(ctx context.Context, sessionID string, afterSeq int64, limit int) (signals.EventsResult, error)
	Follow(ctx context.Context, sessionID string) follower
}

// follower is the part of signals.Follower the hub uses: when to query.
type follower interface {
	Ready() <-chan struct{}
	Querying() (done func())
	Ended() bool
}

// clientSource is a signals.Client as the hub's eventSource.
type clientSource struct{ *signals.Client }

func (c clientSource) Follow(ctx context.Context, sessionID string) follower {
	return c.Client.Follow(ctx, sessionID)
}

// cacheSize bounds the events a feed keeps for its subscribers.
const cacheSize = 4096

type hub struct {
	src   eventSource
	retry time.Duration // the first pause after a failed query
	log   *slog.Logger

	mu    sync.Mutex
	feeds map[string]*feed
	polls int64 // events queries sent, for tests and the benchmark
}

func newHub(src eventSource, retry time.Duration, log *slog.Logger) *hub {
	return &hub{src: src, retry: retry, log: log, feeds: map[string]*feed{}}
}

// feed is one session's poller and its subscribers.
type feed struct {
	h      *hub
	id     string
	cancel context.CancelFunc

	mu    sync.Mutex
	cache []signals.Event // the newest events, contiguous by seq
	last  int64           // the highest seq seen
	subs  map[*subscription]struct{}
}

// subscription is one connection's interest in one session.
type subscription struct {
	f      *feed
	notify chan struct{} // capacity 1: "there may be events after yours"
}

// subscribe returns a subscription to session id, starting its poller when it is the first.
// The poller starts after seq from: events up to it are the caller's to fetch.
func (h *hub) subscribe(id string, from int64) *subscription {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.feeds[id]
	if f == nil {
		ctx, cancel := context.WithCancel(context.Background())
		f = &feed{h: h, id: id, cancel: cancel, last: from, subs: map[*subscription]struct{}{}}
		h.feeds[id] = f
		go f.poll(ctx)
	}
	s := &subscription{f: f, notify: make(chan struct{}, 1)}
	f.mu.Lock()
	f.subs[s] = struct{}{}
	f.mu.Unlock()
	s.wake()
	return s
}

// unsubscribe ends s, stopping the poller with the last subscriber.
func (s *subscription) unsubscribe() {
	h := s.f.h
	h.mu.Lock()
	defer h.mu.Unlock()
	f := s.f
	f.mu.Lock()
	delete(f.subs, s)
	empty := len(f.subs) == 0
	f.mu.Unlock()
	if empty && h.feeds[f.id] == f {
		delete(h.feeds, f.id)
		f.cancel()
	}
}

func (s *subscription) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// hurry is called as a prompt is about to be sent, and the returned func when its turn is
// over. It does nothing: what the prompt starts wakes the poller through the session's
// history (a query sent now would only take the poller's one query in flight from the
// turn's first events).
func (s *subscription) hurry() (done func()) {
	return func() {}
}

// after returns the cached events with seq > seq, in order, and whether the cache covers
// seq (false: the caller must read the journal from seq itself).
func (s *subscription) after(seq int64) ([]signals.Event, bool) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if seq >= f.last {
		return nil, true
	}
	if len(f.cache) == 0 || f.cache[0].Seq > seq+1 {
		return nil, false
	}
	i := int(seq + 1 - f.cache[0].Seq)
	return append([]signals.Event(nil), f.cache[i:]...), true
}

func (f *feed) poll(ctx context.Context) {
	fl := f.h.src.Follow(ctx, f.id)
	backoff := f.h.retry
	for {
		done := fl.Querying()
		more, err := f.pollOnce(ctx)
		done()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			// A query can fail while the session's worker restarts; keep trying, slower.
			f.h.log.Debug("events query failed", "session", f.id, "err", err)
			t := time.NewTimer(backoff)
			backoff = min(backoff*2, 5*time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		backoff = f.h.retry
		if more {
			continue // a page of a longer journal: read on
		}
		if fl.Ended() {
			// The session's workflow closed and the last query saw its end: nothing more
			// will be journaled.
			<-ctx.Done()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-fl.Ready():
		}
	}
}

// eventsPage is the page size the poller asks for.
const eventsPage = 500

// pollOnce reads what follows the last seq into the cache and wakes the subscribers; more
// says that the journal goes on past the page it read.
func (f *feed) pollOnce(ctx context.Context) (more bool, err error) {
	f.mu.Lock()
	last := f.last
	f.mu.Unlock()
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	f.h.mu.Lock()
	f.h.polls++
	f.h.mu.Unlock()
	res, err := f.h.src.Events(qctx, f.id, last, eventsPage)
	if err != nil || len(res.Events) == 0 {
		return false, err
	}
	f.mu.Lock()
	if res.Events[0].Seq != f.last+1 {
		// Retention dropped events nobody had seen: the cache restarts at what is left.
		f.cache = f.cache[:0]
	}
	f.cache = append(f.cache, res.Events...)
	if over := len(f.cache) - cacheSize; over > 0 {
		f.cache = append(f.cache[:0:0], f.cache[over:]...)
	}
	f.last = res.Events[len(res.Events)-1].Seq
	for s := range f.subs {
		s.wake()
	}
	more = f.last < res.LastSeq
	f.mu.Unlock()
	return more, nil
}

// pollCount returns how many events queries the hub has sent.
func (h *hub) pollCount() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.polls
}

// feedCount returns how many sessions the hub polls.
func (h *hub) feedCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.feeds)
}

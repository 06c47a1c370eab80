package gateway

// The hub owns live delivery: one poller per session per gateway process, however many
// connections watch that session. A poller asks the session's events query for what follows
// the last seq it saw, keeps the newest events in a bounded cache and wakes its subscribers.
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
}

// cacheSize bounds the events a feed keeps for its subscribers.
const cacheSize = 4096

type hub struct {
	src        eventSource
	fast, slow time.Duration
	log        *slog.Logger

	mu    sync.Mutex
	feeds map[string]*feed
	polls int64 // events queries sent, for tests and the benchmark
}

func newHub(src eventSource, fast, slow time.Duration, log *slog.Logger) *hub {
	return &hub{src: src, fast: fast, slow: slow, log: log, feeds: map[string]*feed{}}
}

// feed is one session's poller and its subscribers.
type feed struct {
	h      *hub
	id     string
	cancel context.CancelFunc
	kick   chan struct{}

	mu       sync.Mutex
	cache    []signals.Event // the newest events, contiguous by seq
	last     int64           // the highest seq seen
	openTurn bool            // a turn.started without its terminal event yet
	hurry    int             // subscribers waiting for a turn: poll fast even if quiet
	subs     map[*subscription]struct{}
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
		f = &feed{h: h, id: id, cancel: cancel, kick: make(chan struct{}, 1), last: from, subs: map[*subscription]struct{}{}}
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

// hurry makes the poller poll fast until the returned func is called (a prompt waits for
// its turn) and polls at once.
func (s *subscription) hurry() (done func()) {
	f := s.f
	f.mu.Lock()
	f.hurry++
	f.mu.Unlock()
	f.poke()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.hurry--
			f.mu.Unlock()
		})
	}
}

// poke asks the poller to poll now.
func (f *feed) poke() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
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
	backoff := f.h.fast
	for {
		n, err := f.pollOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		wait := f.interval(n)
		if err != nil {
			// A query can fail while the session's worker restarts; keep trying, slower.
			f.h.log.Debug("events query failed", "session", f.id, "err", err)
			backoff = min(backoff*2, 5*time.Second)
			wait = backoff
		} else {
			backoff = f.h.fast
		}
		if n > 0 && err == nil && wait > 0 && n >= eventsPage {
			continue // more are waiting
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-f.kick:
			t.Stop()
		case <-t.C:
		}
	}
}

// eventsPage is the page size the poller asks for.
const eventsPage = 500

// pollOnce reads what follows the last seq into the cache and wakes the subscribers.
func (f *feed) pollOnce(ctx context.Context) (int, error) {
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
		return 0, err
	}
	f.mu.Lock()
	if res.Events[0].Seq != f.last+1 {
		// Retention dropped events nobody had seen: the cache restarts at what is left.
		f.cache = f.cache[:0]
	}
	for _, ev := range res.Events {
		switch {
		case ev.Kind == signals.EventTurnStarted:
			f.openTurn = true
		case signals.IsTerminal(ev.Kind), ev.Kind == signals.EventSessionClosed:
			f.openTurn = false
		}
	}
	f.cache = append(f.cache, res.Events...)
	if over := len(f.cache) - cacheSize; over > 0 {
		f.cache = append(f.cache[:0:0], f.cache[over:]...)
	}
	f.last = res.Events[len(res.Events)-1].Seq
	for s := range f.subs {
		s.wake()
	}
	f.mu.Unlock()
	return len(res.Events), nil
}

// interval is how long the poller waits before the next query: fast while a turn runs or
// someone waits for one, slow when the session is quiet.
func (f *feed) interval(got int) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if got > 0 || f.openTurn || f.hurry > 0 {
		return f.h.fast
	}
	return f.h.slow
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

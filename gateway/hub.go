package gateway

// The hub owns live delivery: one poller per session per gateway process, however many
// connections watch that session. A poller asks the session's events query for what follows
// the last seq it saw, keeps the newest events in a bounded cache and wakes its subscribers.
// It queries when the session's history has grown (tacpclient.Follower: a long poll of the
// history, which costs no worker task), so a quiet session costs no query beyond the client's
// safety poll, and a chunk reaches the editor one history wake-up and one query after the
// session journaled it.
// Subscribers read at their own pace by seq: a connection whose client stops reading its
// stdout falls behind without holding up the poller, the session or the other connections,
// and catches up from the cache or, past it, from the journal itself.
//
// Hub and Subscription are the same hub for other packages: the deck's SSE streams share the
// feeds of the gateway that serves its /acp (Gateway.Hub).

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
	"github.com/tacp-dev/tacp/tacpclient"
)

// eventSource is the part of tacpclient.Client the hub reads.
type eventSource interface {
	Events(ctx context.Context, sessionID string, afterSeq int64, limit int) (signals.EventsResult, error)
	Follow(ctx context.Context, sessionID string) follower
}

// follower is the part of tacpclient.Follower the hub uses: when to query.
type follower interface {
	Ready() <-chan struct{}
	Querying() (done func())
	Ended() bool
}

// clientSource is a tacpclient.Client as the hub's eventSource.
type clientSource struct{ *tacpclient.Client }

func (c clientSource) Follow(ctx context.Context, sessionID string) follower {
	return c.Client.Follow(ctx, sessionID)
}

// cacheSize bounds the events a feed keeps for its subscribers.
const cacheSize = 4096

// CacheSize is how many of a session's newest events a Hub keeps for its subscribers.
const CacheSize = cacheSize

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
	// known: a query has answered and none was rejected since, so the session exists.
	// ended: the session's workflow closed and a query after its end read everything, so
	// last is the journal's last seq.
	known, ended bool
	// err is the last query's error (a rejection: the session is gone), nil after an answer.
	err error
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
			f.mu.Lock()
			f.ended = true
			f.wakeAll()
			f.mu.Unlock()
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
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return false, err
		}
		if f.err == nil {
			f.wakeAll() // a subscriber waiting for the first answer has it
		}
		f.err = err
		if _, gone := rejection.As(err); gone {
			f.known = false
		}
		return false, err
	}
	if !f.known {
		f.wakeAll()
	}
	f.known, f.err = true, nil
	if len(res.Events) == 0 {
		if res.LastSeq < f.last {
			// The journal ends before the seq the first subscriber named: the feed reads on
			// from the journal's end, so that what the session journals next reaches all.
			f.last, f.cache = res.LastSeq, f.cache[:0]
			f.wakeAll()
		}
		return false, nil
	}
	if newest := res.LastSeq - cacheSize; res.Events[len(res.Events)-1].Seq < newest {
		// The feed stands further back than its cache holds (its first subscriber asked for
		// an old seq): it reads on from the newest cacheSize events, and a subscriber behind
		// them reads the journal itself.
		f.last, f.cache = newest, f.cache[:0]
		f.wakeAll()
		return true, nil
	}
	if res.Events[0].Seq != f.last+1 {
		// Retention dropped events nobody had seen: the cache restarts at what is left.
		f.cache = f.cache[:0]
	}
	f.cache = append(f.cache, res.Events...)
	if over := len(f.cache) - cacheSize; over > 0 {
		f.cache = append(f.cache[:0:0], f.cache[over:]...)
	}
	f.last = res.Events[len(res.Events)-1].Seq
	f.wakeAll()
	return f.last < res.LastSeq, nil
}

// wakeAll tells every subscriber to look; f.mu is held.
func (f *feed) wakeAll() {
	for s := range f.subs {
		s.wake()
	}
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

// Hub shares one events poller per session among any number of readers in this process
// (the hub above, for packages other than gateway).
type Hub struct{ h *hub }

// Hub returns the gateway's hub: readers that subscribe to it share the feeds of the
// gateway's ACP connections.
func (g *Gateway) Hub() *Hub { return &Hub{g.hub} }

// Subscribe returns a subscription to session id, starting its poller when it is the first;
// a new poller reads on from seq from. Call Unsubscribe when done.
func (h *Hub) Subscribe(id string, from int64) *Subscription {
	return &Subscription{h.h.subscribe(id, from)}
}

// Subscription is one reader's interest in one session. It reads by seq at its own pace:
// a reader that falls behind holds up nobody.
type Subscription struct{ s *subscription }

// Notify is ready when there may be something new: events after the reader's seq, the
// poller's first answer or error, the session's end. One value stands for any number of
// changes.
func (s *Subscription) Notify() <-chan struct{} { return s.s.notify }

// After returns the cached events with seq > seq, in order, and whether the cache covers
// seq (false: the reader must read the journal after seq itself, then come back).
func (s *Subscription) After(seq int64) ([]signals.Event, bool) { return s.s.after(seq) }

// Ended reports that the session's workflow has closed and the poller has read all it
// journaled: once After(seq) is empty, nothing more will come. Call it before After.
func (s *Subscription) Ended() bool {
	f := s.s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ended
}

// Known reports that the poller has read the session's journal and no query was rejected
// since: the session exists.
func (s *Subscription) Known() bool {
	f := s.s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.known
}

// Err returns the error of the poller's last query, nil after an answer. A rejection
// (rejection.As) says the session is gone; any other error is the cluster's, and the
// poller tries again.
func (s *Subscription) Err() error {
	f := s.s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Unsubscribe ends the subscription, stopping the poller with the last one.
func (s *Subscription) Unsubscribe() { s.s.unsubscribe() }

package tacpclient

// The in-flight bound: the server admits a handful of updates in flight per workflow run
// (history.maxInFlightUpdates, 10 by default) and answers more with ResourceExhausted,
// which the SDK retries with backoff; a burst of hundreds against one session then stalls
// it for minutes. A process holds its own updates to one session below that bound, so a
// gateway or deck with many clients queues them here, in order, instead.

import (
	"context"
	"sync"
)

// MaxInFlightUpdates bounds the updates one process has in flight to one session.
const MaxInFlightUpdates = 8

// limiter is a counting semaphore per key.
type limiter struct {
	max  int
	mu   sync.Mutex
	sems map[string]*keySem
}

type keySem struct {
	slots chan struct{}
	users int // holders and waiters; the key is dropped at zero
}

func newLimiter(max int) *limiter { return &limiter{max: max, sems: map[string]*keySem{}} }

// acquire takes a slot of key, waiting while all are held; it returns the release func, or
// ctx's error if ctx ends first.
func (l *limiter) acquire(ctx context.Context, key string) (func(), error) {
	l.mu.Lock()
	s := l.sems[key]
	if s == nil {
		s = &keySem{slots: make(chan struct{}, l.max)}
		l.sems[key] = s
	}
	s.users++
	l.mu.Unlock()
	done := func() {
		l.mu.Lock()
		if s.users--; s.users == 0 {
			delete(l.sems, key)
		}
		l.mu.Unlock()
	}
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots; done() }, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}

var inFlight = newLimiter(MaxInFlightUpdates)

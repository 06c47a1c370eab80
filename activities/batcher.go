package activities

// The event batcher: the ACP callback side enqueues raw session/update params without ever
// blocking; one goroutine flushes them to the session workflow as numbered turn_events
// signals every FlushInterval or FlushBytes, whichever comes first, in order, one signal at
// a time (the session drops a batch number it has already journaled, so a retried send is
// harmless).

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// maxEventBytes bounds one journaled event: a bigger update is replaced by a stub naming its
// size, so no single event can push a signal or the journal past Temporal's payload limit.
const maxEventBytes = 256 << 10

type sendFunc func(ctx context.Context, batch int64, events []json.RawMessage) error

type batcher struct {
	interval time.Duration
	maxBytes int
	send     sendFunc

	mu      sync.Mutex
	pending []json.RawMessage
	bytes   int
	err     error // the first send that failed for good

	kick     chan struct{}
	flushReq chan chan struct{}
	stopped  chan struct{}
	done     chan struct{}
	batch    int64 // last batch sent (owned by run)
}

func newBatcher(interval time.Duration, maxBytes int, send sendFunc) *batcher {
	return &batcher{
		interval: interval, maxBytes: maxBytes, send: send,
		kick: make(chan struct{}, 1), flushReq: make(chan chan struct{}), stopped: make(chan struct{}), done: make(chan struct{}),
	}
}

// add enqueues one event. It never blocks.
func (b *batcher) add(raw json.RawMessage) {
	ev := append(json.RawMessage(nil), raw...)
	if len(ev) > maxEventBytes {
		ev, _ = json.Marshal(map[string]any{"tacp_truncated": true, "bytes": len(raw)})
	}
	b.mu.Lock()
	b.pending = append(b.pending, ev)
	b.bytes += len(ev)
	full := b.bytes >= b.maxBytes
	b.mu.Unlock()
	if full {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// run flushes until stop is called, then flushes what is left and returns.
func (b *batcher) run(ctx context.Context) {
	defer close(b.done)
	t := time.NewTicker(b.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-b.kick:
		case done := <-b.flushReq:
			b.flush(ctx)
			close(done)
			continue
		case <-b.stopped:
			b.flush(ctx)
			return
		}
		b.flush(ctx)
	}
}

// flush sends the pending events as batches of at most maxBytes.
func (b *batcher) flush(ctx context.Context) {
	b.mu.Lock()
	events := b.pending
	b.pending, b.bytes = nil, 0
	failed := b.err != nil
	b.mu.Unlock()
	if failed {
		return
	}
	for len(events) > 0 {
		n, size := 0, 0
		for n < len(events) && (n == 0 || size+len(events[n]) <= b.maxBytes) {
			size += len(events[n])
			n++
		}
		if err := b.send(ctx, b.batch+1, events[:n]); err != nil {
			b.mu.Lock()
			b.err = fmt.Errorf("send turn_events batch %d: %w", b.batch+1, err)
			b.mu.Unlock()
			return
		}
		b.batch++
		events = events[n:]
	}
}

// flushNow sends everything enqueued so far and returns once it is sent (or the batcher has
// stopped).
func (b *batcher) flushNow() {
	done := make(chan struct{})
	select {
	case b.flushReq <- done:
		<-done
	case <-b.done:
	}
}

// close flushes everything enqueued so far and stops; it returns how many batches were sent
// and the first send error.
func (b *batcher) close() (int64, error) {
	close(b.stopped)
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.batch, b.err
}

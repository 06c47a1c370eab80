package activities

// The event batcher: the ACP callback side enqueues raw session/update params without ever
// blocking; one goroutine flushes them to the session workflow as numbered turn_events
// signals every flush interval or FlushBytes, whichever comes first, in order, one signal at
// a time (the session drops a batch number it has already journaled, so a retried send is
// harmless).
//
// The first event of a burst does not wait for the interval: after a quiet spell (a timed
// flush that found nothing to send, or a batcher that has sent nothing yet) the next event
// is flushed at once, so a person who sent a prompt sees its first token one signal after
// the agent wrote it. A status update nobody reads as it comes (usage, the session's title,
// its commands, its mode) is not that event: it waits for the next flush and leaves the
// spell quiet, so the token that follows it goes out at once (claude-agent-acp writes a
// usage_update a fraction of a millisecond before its first agent_message_chunk; flushed at
// once, it made the token wait a whole interval behind it, issue 28). Events that follow while that flush is in flight wait for the next
// timed flush, as all events do while a turn streams. Each flush at once follows a timed
// flush that found nothing (or the batcher's start), so a turn sends at most one signal more
// than it has ticks: a long stream's history budget is what the interval alone gives it.
//
// A turn nobody watches (signals.PromptRequest.Unwatched) flushes only on its ticks, at the
// longest interval from its start: what costs a watched turn a signal every FlushInterval
// costs it one every FlushLongest. When a viewer attaches, the session tells the turn
// (signals.DeliverWatch) and goLive sends what is pending and brings back the first
// interval, as if the turn had started watched then.
//
// The interval stretches as a turn streams on (see stretch): every flush costs the session
// about four history events (the signal and a workflow task) whatever it carries, so a
// person watching an answer appear gets FlushInterval, and a turn that streams for an hour
// fits in one run's history. It also widens when many turns stream on one worker at once
// (see flushBudget), so that the worker's signals stay within what the server keeps up with.
//
// A turn's batcher also carries what would otherwise cost a signal of its own (issue 28,
// started.go): the attempt's turn_started rides on the next batch it sends; at the turn's
// end the events still pending are handed to the attempt's result, which carries them
// (closeHolding); and a quiet turn still running at its beatAt gets one empty batch (a
// beat), so that its session hears from it and shows it running.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// maxEventBytes bounds one journaled event: a bigger update is replaced by a stub naming its
// size, so no single event can push a signal or the journal past Temporal's payload limit.
const maxEventBytes = 256 << 10

type sendFunc func(ctx context.Context, batch int64, events []json.RawMessage) error

type batcher struct {
	interval time.Duration // the first interval; stretch gives the later ones
	longest  time.Duration // the interval stretch reaches
	maxBytes int
	send     sendFunc
	budget   *flushBudget // shared by the worker's turns; nil: none

	mu      sync.Mutex
	pending []json.RawMessage
	bytes   int
	err     error // the first send that failed for good
	quiet   bool  // the last timed flush found nothing (or nothing was sent yet): the next event flushes at once
	// unwatched: nobody follows the turn as it streams (signals.PromptRequest.Unwatched):
	// no event is flushed at once, every flush waits for its tick.
	unwatched bool

	kick      chan struct{}
	live      chan time.Duration // goLive's interval, for run
	flushReq  chan chan struct{}
	stopped   chan struct{}
	stopOnce  sync.Once
	done      chan struct{}
	batch     int64        // last batch sent (owned by run)
	streaming bool         // counted in budget: the last timed flush sent events (owned by run)
	ticks     atomic.Int64 // timed flushes done (tests wait on it instead of sleeping)

	// beatAt (unix nanoseconds, 0: none; beatFrom sets it) is when the batcher makes sure a
	// batch has gone out since: the first timed flush at or after it sends an empty batch
	// if none did (a beat). lastSent is when the last batch went out (owned by run).
	beatAt   atomic.Int64
	lastSent time.Time
	// holdLast (set by closeHolding) keeps the events pending at the stop in held instead
	// of sending them, for the turn's end to carry.
	holdLast bool
	held     []json.RawMessage
}

func newBatcher(interval, longest time.Duration, maxBytes int, send sendFunc) *batcher {
	return &batcher{
		interval: interval, longest: max(interval, longest), maxBytes: maxBytes, send: send, quiet: true,
		kick: make(chan struct{}, 1), live: make(chan time.Duration, 1), flushReq: make(chan chan struct{}), stopped: make(chan struct{}), done: make(chan struct{}),
	}
}

// add enqueues one event. It never blocks.
func (b *batcher) add(raw json.RawMessage) {
	ev := append(json.RawMessage(nil), raw...)
	if !utf8.Valid(ev) {
		// An agent's bytes that are not UTF-8 can only sit inside JSON strings: replace them
		// as a JSON decoder would, so the journal and every viewer get valid UTF-8.
		ev = bytes.ToValidUTF8(ev, []byte("\uFFFD"))
	}
	if len(ev) > maxEventBytes {
		ev, _ = json.Marshal(map[string]any{"tacp_truncated": true, "bytes": len(raw)})
	}
	status := statusUpdate(ev)
	b.mu.Lock()
	b.pending = append(b.pending, ev)
	b.bytes += len(ev)
	now := b.bytes >= b.maxBytes || (b.quiet && !status && !b.unwatched) // full, or the first event of a burst
	if !status {
		b.quiet = false
	}
	b.mu.Unlock()
	if now {
		b.flushSoon()
	}
}

// statusKinds are the session/update kinds that report a state rather than the answer: a
// viewer shows them when they come, but nobody waits for them.
var statusKinds = []string{"usage_update", "session_info_update", "available_commands_update", "current_mode_update", "config_option_update"}

// statusUpdate reports whether raw (session/update params) is one of statusKinds. The cheap
// filter runs first: most events are chunks and are never decoded.
func statusUpdate(raw json.RawMessage) bool {
	hit := false
	for _, k := range statusKinds {
		if bytes.Contains(raw, []byte(k)) {
			hit = true
			break
		}
	}
	if !hit {
		return false
	}
	var p struct {
		Update struct {
			Kind string `json:"sessionUpdate"`
		} `json:"update"`
	}
	return json.Unmarshal(raw, &p) == nil && slices.Contains(statusKinds, p.Update.Kind)
}

// flushSoon asks run to flush now instead of at the next tick.
func (b *batcher) flushSoon() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// run flushes until stop is called, then flushes what is left and returns.
func (b *batcher) run(ctx context.Context) {
	defer close(b.done)
	defer b.quit()
	start := time.Now()
	t := time.NewTimer(b.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			b.tick(ctx)
			b.ticks.Add(1)
			t.Reset(max(stretch(b.interval, b.longest, time.Since(start)), b.budget.floor()))
		case <-b.kick:
			b.flush(ctx)
		case iv := <-b.live:
			b.interval, start = iv, time.Now()
			b.flush(ctx)
			t.Reset(iv)
		case done := <-b.flushReq:
			b.flush(ctx)
			close(done)
		case <-b.stopped:
			if !b.hold() {
				b.flush(ctx)
			}
			return
		}
	}
}

// goLive brings a turn that streams unwatched to the watched cadence: what is pending goes
// out now, the next ticks come every interval (stretching from now), and the first event
// after a quiet spell is flushed at once again. It never blocks; a second call while the
// first waits for run is dropped.
func (b *batcher) goLive(interval time.Duration) {
	b.mu.Lock()
	b.unwatched = false
	b.mu.Unlock()
	select {
	case b.live <- interval:
	default:
	}
}

// beatFrom makes the first timed flush at or after at send an empty batch if no batch went
// out since at.
func (b *batcher) beatFrom(at time.Time) { b.beatAt.Store(at.UnixNano()) }

// holdBeat puts off the beat beatFrom asked for while the turn waits for a person: release
// asks for it again, after from the answer. Without a beat owed, both do nothing.
func (b *batcher) holdBeat(after time.Duration) (release func()) {
	if b.beatAt.Swap(0) == 0 {
		return func() {}
	}
	return func() { b.beatAt.CompareAndSwap(0, time.Now().Add(after).UnixNano()) }
}

// tick is a timed flush: a turn counts in the budget while its timed flushes send events. A
// tick that finds nothing ends the burst: the next event is flushed at once.
func (b *batcher) tick(ctx context.Context) {
	sent := b.flush(ctx)
	if !sent {
		b.mu.Lock()
		// An event that came after flush looked is the first of the next burst.
		b.quiet = len(b.pending) == 0
		late := !b.quiet && !b.unwatched
		b.mu.Unlock()
		if late {
			b.flushSoon()
		}
	}
	if at := b.beatAt.Load(); at != 0 && time.Now().UnixNano() >= at {
		if b.lastSent.UnixNano() < at {
			b.sendBatch(ctx, nil) // a beat: the session hears the turn still runs
		}
		b.beatAt.CompareAndSwap(at, 0)
	}
	switch {
	case sent && !b.streaming:
		b.budget.join()
	case !sent && b.streaming:
		b.budget.leave()
	}
	b.streaming = sent
}

// quit takes a stopped batcher out of the budget.
func (b *batcher) quit() {
	if b.streaming {
		b.budget.leave()
		b.streaming = false
	}
}

// flushBudget shares a worker's turn_events signals among the turns streaming on it: with n
// turns streaming and a budget of rate signals a second, no turn flushes more often than
// every n/rate seconds. Below rate/FlushInterval turns it changes nothing; past it, each
// viewer waits a little longer for a batch instead of every session waiting behind a
// saturated server.
type flushBudget struct {
	rate      float64 // signals a second; <= 0: no budget
	streaming atomic.Int64
}

func (f *flushBudget) join() {
	if f != nil {
		f.streaming.Add(1)
	}
}

func (f *flushBudget) leave() {
	if f != nil {
		f.streaming.Add(-1)
	}
}

// floor is the shortest flush interval the budget allows each streaming turn now.
func (f *flushBudget) floor() time.Duration {
	if f == nil || f.rate <= 0 {
		return 0
	}
	return time.Duration(float64(f.streaming.Load()) / f.rate * float64(time.Second))
}

// Stretch points: a turn streams at its first interval for stretchAfter, then at 1 s (or
// longest, if shorter) until longestAfter, then at longest.
const (
	stretchAfter = 30 * time.Second
	longestAfter = 5 * time.Minute
)

// stretch returns the flush interval of a turn that has streamed for age. With the defaults
// (100 ms, 2 s) a 60-minute turn flushes about 2,200 times, ~9,000 history events, where a
// fixed 100 ms would write ~144,000.
func stretch(first, longest time.Duration, age time.Duration) time.Duration {
	switch {
	case age < stretchAfter:
		return first
	case age < longestAfter:
		return max(first, min(longest, time.Second))
	default:
		return max(first, longest)
	}
}

// FlushIntervalAt is the flush interval of a turn that has streamed for age, for a worker
// flushing every first at first and stretching to longest (benchmarks project history with
// it).
func FlushIntervalAt(first, longest, age time.Duration) time.Duration {
	return stretch(first, max(first, longest), age)
}

// flush sends the pending events as batches of at most maxBytes; it reports whether there
// were any.
func (b *batcher) flush(ctx context.Context) bool {
	b.mu.Lock()
	events := b.pending
	b.pending, b.bytes = nil, 0
	failed := b.err != nil
	b.mu.Unlock()
	if failed || len(events) == 0 {
		return false
	}
	for len(events) > 0 {
		n, size := 0, 0
		for n < len(events) && (n == 0 || size+len(events[n]) <= b.maxBytes) {
			size += len(events[n])
			n++
		}
		if !b.sendBatch(ctx, events[:n]) {
			return true
		}
		events = events[n:]
	}
	return true
}

// sendBatch sends events as the next batch; a send that failed for good is the batcher's
// error (the attempt fails, and its retry replays the turn).
func (b *batcher) sendBatch(ctx context.Context, events []json.RawMessage) bool {
	if err := b.send(ctx, b.batch+1, events); err != nil {
		b.mu.Lock()
		b.err = fmt.Errorf("send turn_events batch %d: %w", b.batch+1, err)
		b.mu.Unlock()
		return false
	}
	b.batch++
	b.lastSent = time.Now()
	return true
}

// hold keeps the pending events for closeHolding, when they fit in one batch and no send
// failed; it reports whether it kept them (else the stop flushes as close does).
func (b *batcher) hold() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.holdLast || b.err != nil || b.bytes > b.maxBytes {
		return false
	}
	b.held, b.pending, b.bytes = b.pending, nil, 0
	return true
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

// closeHolding is close for a turn's end that carries its last batch itself (the attempt's
// result, the turn's report): the events still pending are returned instead of sent, when
// they fit in one batch (numbered sent+1 by the caller); else they are sent as close sends
// them.
func (b *batcher) closeHolding() (held []json.RawMessage, sent int64, err error) {
	b.mu.Lock()
	b.holdLast = true
	b.mu.Unlock()
	sent, err = b.close()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held, sent, err
}

// close flushes everything enqueued so far and stops; it returns how many batches were sent
// and the first send error. Closing again is harmless: a worker shutting down (Host.Close)
// and the turn that releases the same agent both close its between-turn batcher.
func (b *batcher) close() (int64, error) {
	b.stopOnce.Do(func() { close(b.stopped) })
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.batch, b.err
}

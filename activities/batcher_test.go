package activities

// Tests of the event batcher (docs/contract.md §7): numbered batches in order, no event lost or
// duplicated, the first event of a burst flushed at once and the rest of the burst batched,
// flushes on size before the interval, batches bounded by maxBytes, oversized events
// stubbed, close flushing what is pending, a failed send stopping the rest, and an add that
// never blocks.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// never is a flush interval no test waits for: flushes come from maxBytes or close.
const never = time.Hour

// patience bounds waits for things that should happen promptly; it is generous on purpose
// (a test asserts behaviour, not wall-clock time).
const patience = 5 * time.Second

type sentBatch struct {
	n      int64
	events []json.RawMessage
}

// recorder is a sendFunc that records every batch it is given.
type recorder struct {
	mu      sync.Mutex
	batches []sentBatch
}

func (r *recorder) send(_ context.Context, batch int64, events []json.RawMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, sentBatch{batch, append([]json.RawMessage(nil), events...)})
	return nil
}

func (r *recorder) sent() []sentBatch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sentBatch(nil), r.batches...)
}

func (r *recorder) events() []string {
	var out []string
	for _, b := range r.sent() {
		for _, ev := range b.events {
			out = append(out, string(ev))
		}
	}
	return out
}

// requireNumbered checks that batches are numbered 1, 2, 3… in the order they were sent.
func requireNumbered(t *testing.T, batches []sentBatch) {
	t.Helper()
	for i, b := range batches {
		require.Equal(t, int64(i+1), b.n, "batch %d of %d", i+1, len(batches))
		require.NotEmpty(t, b.events, "batch %d is empty", b.n)
	}
}

func startBatcher(t *testing.T, interval time.Duration, maxBytes int, send sendFunc) *batcher {
	t.Helper()
	b := newBatcher(interval, interval, maxBytes, send)
	go b.run(context.Background())
	return b
}

// startMidBurst starts a batcher as it is in the middle of a stream, past the first event of
// the burst: the tests of size and close take it, so that the first-event rule (tested on its
// own) does not send their first event early.
func startMidBurst(t *testing.T, interval time.Duration, maxBytes int, send sendFunc) *batcher {
	t.Helper()
	b := newBatcher(interval, interval, maxBytes, send)
	b.quiet = false
	go b.run(context.Background())
	return b
}

func ev(s string) json.RawMessage { return json.RawMessage(s) }

// event returns a JSON event of exactly size bytes.
func event(size int) json.RawMessage {
	if size < 2 {
		panic("event too small")
	}
	return json.RawMessage(`"` + strings.Repeat("x", size-2) + `"`)
}

func batchBytes(events []json.RawMessage) int {
	n := 0
	for _, e := range events {
		n += len(e)
	}
	return n
}

func TestBatcherConcurrentAddsAreNumberedInOrderWithoutLossOrDuplicates(t *testing.T) {
	const producers, perProducer = 8, 2000
	var rec recorder
	b := startBatcher(t, time.Millisecond, 512, rec.send)

	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range perProducer {
				b.add(ev(fmt.Sprintf(`{"p":%d,"i":%d}`, p, i)))
			}
		})
	}
	wg.Wait()
	n, err := b.close()
	require.NoError(t, err)

	batches := rec.sent()
	require.Equal(t, int64(len(batches)), n, "close returns the number of batches sent")
	require.Greater(t, len(batches), 1, "small maxBytes must split the events into many batches")
	requireNumbered(t, batches)

	next := make([]int, producers) // each producer's events arrive once each, in its order
	for _, b := range batches {
		require.LessOrEqual(t, batchBytes(b.events), 512)
		for _, raw := range b.events {
			var e struct{ P, I int }
			require.NoError(t, json.Unmarshal(raw, &e))
			require.Equal(t, next[e.P], e.I, "producer %d: event out of order, lost or duplicated", e.P)
			next[e.P]++
		}
	}
	for p, got := range next {
		require.Equal(t, perProducer, got, "producer %d", p)
	}
}

func TestBatcherSingleProducerOrderIsPreserved(t *testing.T) {
	var rec recorder
	b := startBatcher(t, time.Millisecond, 64, rec.send)
	var want []string
	for i := range 500 {
		e := fmt.Sprintf(`{"i":%d}`, i)
		want = append(want, e)
		b.add(ev(e))
	}
	_, err := b.close()
	require.NoError(t, err)
	require.Equal(t, want, rec.events())
	requireNumbered(t, rec.sent())
}

func TestBatcherMaxBytesFlushesBeforeTheInterval(t *testing.T) {
	var rec recorder
	b := startMidBurst(t, never, 100, rec.send)
	defer b.close()

	b.add(event(40))
	b.add(event(40))
	// 80 bytes pending, under maxBytes: nothing may be sent (the interval is an hour).
	require.Never(t, func() bool { return len(rec.sent()) > 0 }, 50*time.Millisecond, 5*time.Millisecond)

	b.add(event(40)) // 120 bytes pending: over maxBytes
	require.Eventually(t, func() bool { return len(rec.events()) == 3 }, patience, time.Millisecond,
		"reaching maxBytes must flush without waiting for the interval")
	batches := rec.sent()
	requireNumbered(t, batches)
	for _, b := range batches {
		require.LessOrEqual(t, batchBytes(b.events), 100)
	}
}

func TestBatcherIntervalFlushesSmallBatches(t *testing.T) {
	var rec recorder
	b := startBatcher(t, 5*time.Millisecond, 1<<20, rec.send)
	defer b.close()

	b.add(ev(`{"a":1}`))
	require.Eventually(t, func() bool { return len(rec.sent()) == 1 }, patience, time.Millisecond)
	b.add(ev(`{"a":2}`))
	require.Eventually(t, func() bool { return len(rec.sent()) == 2 }, patience, time.Millisecond)
	requireNumbered(t, rec.sent())
	require.Equal(t, []string{`{"a":1}`, `{"a":2}`}, rec.events())
}

func TestBatcherSendsNoEmptyBatches(t *testing.T) {
	var rec recorder
	b := startBatcher(t, time.Millisecond, 100, rec.send)
	// Many ticks with nothing pending.
	require.Eventually(t, func() bool { return b.ticks.Load() >= 10 }, patience, time.Millisecond)
	n, err := b.close()
	require.NoError(t, err)
	require.Zero(t, n)
	require.Empty(t, rec.sent())
}

func TestBatcherBatchesNeverExceedMaxBytesUnlessOneEventDoes(t *testing.T) {
	const maxBytes = 100
	release := make(chan struct{})
	var rec recorder
	first := true
	send := func(ctx context.Context, batch int64, events []json.RawMessage) error {
		if first { // hold the first flush so the rest pile up and are split in one flush
			first = false
			<-release
		}
		return rec.send(ctx, batch, events)
	}
	b := startBatcher(t, never, maxBytes, send)

	sizes := []int{
		100,                // exactly maxBytes: flushed alone, held in send
		30, 30, 30, 30, 30, // 150 bytes: must split
		150,    // over maxBytes on its own: a batch of one
		10, 90, // exactly maxBytes together
		99, 2, // cannot share a batch
		250, 250, // two oversized events: one batch each
		5,
	}
	var want []string
	for i, size := range sizes {
		e := event(size)
		want = append(want, string(e))
		b.add(e)
		if i == 0 {
			require.Eventually(t, func() bool {
				b.mu.Lock()
				defer b.mu.Unlock()
				return len(b.pending) == 0
			}, patience, time.Millisecond, "the first event is taken by a flush")
		}
	}
	close(release)
	n, err := b.close()
	require.NoError(t, err)

	batches := rec.sent()
	require.Equal(t, int64(len(batches)), n)
	requireNumbered(t, batches)
	require.Equal(t, want, rec.events(), "splitting keeps every event, in order")
	for _, b := range batches {
		if size := batchBytes(b.events); size > maxBytes {
			require.Len(t, b.events, 1, "batch %d has %d bytes in %d events", b.n, size, len(b.events))
		}
	}
}

func TestBatcherStubsEventsOverMaxEventBytes(t *testing.T) {
	var rec recorder
	b := startMidBurst(t, never, 1<<30, rec.send)

	atLimit := event(maxEventBytes)
	over := event(maxEventBytes + 1)
	huge := event(3 * maxEventBytes)
	b.add(ev(`{"before":true}`))
	b.add(atLimit)
	b.add(over)
	b.add(huge)
	b.add(ev(`{"after":true}`))
	n, err := b.close()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	got := rec.events()
	require.Len(t, got, 5)
	require.Equal(t, `{"before":true}`, got[0])
	require.Equal(t, string(atLimit), got[1], "an event of exactly maxEventBytes is kept")
	require.JSONEq(t, fmt.Sprintf(`{"tacp_truncated":true,"bytes":%d}`, maxEventBytes+1), got[2])
	require.JSONEq(t, fmt.Sprintf(`{"tacp_truncated":true,"bytes":%d}`, 3*maxEventBytes), got[3])
	require.Equal(t, `{"after":true}`, got[4])
}

func TestBatcherAddCopiesTheEvent(t *testing.T) {
	var rec recorder
	b := startBatcher(t, never, 1<<20, rec.send)
	raw := []byte(`{"a":1}`)
	b.add(raw)
	copy(raw, `{"b":2}`) // the tap may reuse its buffer
	_, err := b.close()
	require.NoError(t, err)
	require.Equal(t, []string{`{"a":1}`}, rec.events())
}

func TestBatcherCloseFlushesPendingAndReturnsTheBatchCount(t *testing.T) {
	t.Run("nothing sent before close", func(t *testing.T) {
		var rec recorder
		b := startMidBurst(t, never, 1<<20, rec.send)
		b.add(ev(`1`))
		b.add(ev(`2`))
		b.add(ev(`3`))
		require.Empty(t, rec.sent())
		n, err := b.close()
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		require.Equal(t, []sentBatch{{1, []json.RawMessage{ev(`1`), ev(`2`), ev(`3`)}}}, rec.sent())
	})

	t.Run("after earlier batches", func(t *testing.T) {
		var rec recorder
		b := startBatcher(t, never, 100, rec.send)
		for range 5 {
			b.add(event(50))
		}
		require.Eventually(t, func() bool { return len(rec.sent()) >= 1 }, patience, time.Millisecond)
		b.add(ev(`"last"`))
		n, err := b.close()
		require.NoError(t, err)
		batches := rec.sent()
		require.Equal(t, int64(len(batches)), n)
		requireNumbered(t, batches)
		got := rec.events()
		require.Len(t, got, 6)
		require.Equal(t, `"last"`, got[5])
	})

	t.Run("nothing at all", func(t *testing.T) {
		var rec recorder
		b := startBatcher(t, never, 100, rec.send)
		n, err := b.close()
		require.NoError(t, err)
		require.Zero(t, n)
		require.Empty(t, rec.sent())
	})
}

func TestBatcherSendErrorStopsFurtherSendsAndIsReturnedByClose(t *testing.T) {
	boom := errors.New("boom")

	t.Run("first batch fails", func(t *testing.T) {
		var mu sync.Mutex
		var calls []int64
		send := func(_ context.Context, batch int64, _ []json.RawMessage) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, batch)
			return boom
		}
		sends := func() int { mu.Lock(); defer mu.Unlock(); return len(calls) }
		b := startBatcher(t, never, 10, send)
		b.add(event(20)) // over maxBytes: flushes now, and fails
		require.Eventually(t, func() bool { return sends() == 1 }, patience, time.Millisecond)

		b.add(event(20)) // kicks another flush, which must not send
		b.add(event(20))
		n, err := b.close()
		require.ErrorIs(t, err, boom)
		require.ErrorContains(t, err, "batch 1")
		require.Zero(t, n, "no batch was sent")
		require.Equal(t, []int64{1}, calls, "nothing is sent after a failure")
	})

	t.Run("a later batch of one flush fails", func(t *testing.T) {
		var mu sync.Mutex
		var calls []int64
		send := func(_ context.Context, batch int64, _ []json.RawMessage) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, batch)
			if batch == 2 {
				return boom
			}
			return nil
		}
		b := startBatcher(t, never, 1000, send)
		for range 5 {
			b.add(event(400)) // batches of at most two events; whichever flush sends batch 2 fails
		}
		n, err := b.close()
		require.ErrorIs(t, err, boom)
		require.ErrorContains(t, err, "batch 2")
		require.Equal(t, int64(1), n, "only batch 1 went out")
		require.Equal(t, []int64{1, 2}, calls, "batch 3 is never attempted")
	})
}

func TestBatcherAddNeverBlocksWhileSendIsBlocked(t *testing.T) {
	const adds = 10000
	release := make(chan struct{})
	var rec recorder
	send := func(ctx context.Context, batch int64, events []json.RawMessage) error {
		<-release
		return rec.send(ctx, batch, events)
	}
	b := startBatcher(t, time.Millisecond, 64, send)

	added := make(chan struct{})
	go func() {
		defer close(added)
		for i := range adds {
			b.add(ev(fmt.Sprintf(`{"i":%d}`, i)))
		}
	}()
	select {
	case <-added:
	case <-time.After(patience):
		close(release)
		t.Fatalf("add blocked while send was blocked")
	}
	require.Empty(t, rec.sent(), "send is still blocked")

	close(release)
	n, err := b.close()
	require.NoError(t, err)
	batches := rec.sent()
	require.Equal(t, int64(len(batches)), n)
	requireNumbered(t, batches)
	got := rec.events()
	require.Len(t, got, adds, "every event enqueued while send was blocked is sent")
	for i, e := range got {
		require.Equal(t, fmt.Sprintf(`{"i":%d}`, i), e)
	}
}

func TestFlushIntervalStretchesAsATurnStreamsOn(t *testing.T) {
	const first, longest = 100 * time.Millisecond, 2 * time.Second
	for _, tc := range []struct {
		age, want time.Duration
	}{
		{0, first},
		{29 * time.Second, first},
		{30 * time.Second, time.Second},
		{4 * time.Minute, time.Second},
		{5 * time.Minute, longest},
		{time.Hour, longest},
	} {
		if got := stretch(first, longest, tc.age); got != tc.want {
			t.Errorf("stretch at %s = %s, want %s", tc.age, got, tc.want)
		}
	}
	// A fixed interval stays fixed; a first interval above 1 s is never shortened.
	if got := stretch(first, first, time.Hour); got != first {
		t.Errorf("fixed: %s", got)
	}
	if got := stretch(3*time.Second, 3*time.Second, time.Minute); got != 3*time.Second {
		t.Errorf("slow first: %s", got)
	}
	// The hour of a 50 chunks/s turn with the defaults: flushes, and history events at
	// four per flush (a signal and a workflow task), under 10,240.
	var flushes int
	for age := time.Duration(0); age < time.Hour; age += stretch(first, longest, age) {
		flushes++
	}
	if events := 4 * flushes; events >= 10240 {
		t.Errorf("an hour of streaming flushes %d times, ~%d history events", flushes, events)
	}
}

func TestFlushBudgetWidensTheIntervalWithTheTurnsStreaming(t *testing.T) {
	f := &flushBudget{rate: 200}
	require.Zero(t, f.floor(), "nobody streams")
	for range 20 {
		f.join()
	}
	require.Equal(t, 100*time.Millisecond, f.floor(), "20 turns at 200 signals/s: the default interval")
	for range 30 {
		f.join()
	}
	require.Equal(t, 250*time.Millisecond, f.floor(), "50 turns share 200 signals/s")
	for range 50 {
		f.leave()
	}
	require.Zero(t, f.floor())

	var none *flushBudget // a batcher without a budget
	none.join()
	none.leave()
	require.Zero(t, none.floor())
	unbounded := &flushBudget{rate: -1}
	unbounded.join()
	require.Zero(t, unbounded.floor())
}

func TestBatcherCountsItselfStreamingOnlyWhileItsTimedFlushesSendEvents(t *testing.T) {
	var rec recorder
	budget := &flushBudget{rate: 200}
	b := newBatcher(never, never, 1<<20, rec.send) // driven by hand: no run goroutine
	b.budget = budget
	ctx := context.Background()

	b.tick(ctx)
	require.Zero(t, budget.streaming.Load(), "a tick with nothing to send")
	b.add(ev(`{"a":1}`))
	b.tick(ctx)
	require.EqualValues(t, 1, budget.streaming.Load(), "a tick that sent events counts the turn")
	b.add(ev(`{"a":2}`))
	b.tick(ctx)
	require.EqualValues(t, 1, budget.streaming.Load(), "counted once however many ticks send")
	b.tick(ctx)
	require.Zero(t, budget.streaming.Load(), "a quiet tick stops counting it")
	b.add(ev(`{"a":3}`))
	b.tick(ctx)
	require.EqualValues(t, 1, budget.streaming.Load())
	b.quit()
	require.Zero(t, budget.streaming.Load(), "a stopped batcher leaves the budget")
	require.Equal(t, []string{`{"a":1}`, `{"a":2}`, `{"a":3}`}, rec.events())
}

func TestBatcherRepairsAgentBytesThatAreNotUTF8(t *testing.T) {
	var rec recorder
	b := startBatcher(t, never, 1<<20, rec.send)
	b.add(ev("{\"text\":\"caf\xe9 \xff\xfe ok\"}"))
	b.add(ev(`{"text":"café"}`))
	_, err := b.close()
	require.NoError(t, err)
	got := rec.events()
	require.Equal(t, []string{`{"text":"caf` + "\uFFFD" + ` ` + "\uFFFD" + ` ok"}`, `{"text":"café"}`}, got)
	for _, e := range got {
		require.True(t, json.Valid([]byte(e)) && utf8.ValidString(e), e)
	}
}

func TestBatcherCloseTwiceIsHarmless(t *testing.T) {
	var rec recorder
	b := startBatcher(t, never, 1<<20, rec.send)
	b.add(ev(`1`))
	n, err := b.close()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.NotPanics(t, func() { n, err = b.close() })
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "the second close sends nothing")
}

// The first-event rule (issue 18): after a quiet spell the first event goes out at once; the
// events that follow it while its flush is in flight wait for the next timed flush; a timed
// flush that finds nothing ends the burst; and the rule never costs a stream more signals
// than its ticks, plus one.

func TestBatcherFirstEventOfABurstFlushesAtOnce(t *testing.T) {
	var rec recorder
	b := startBatcher(t, never, 1<<20, rec.send) // no tick comes within the test
	defer b.close()
	b.add(ev(`{"first":true}`))
	require.Eventually(t, func() bool { return len(rec.sent()) == 1 }, patience, time.Millisecond,
		"the first event after a quiet spell must not wait for the flush interval")
	require.Equal(t, []string{`{"first":true}`}, rec.events())
}

func TestBatcherEventsDuringTheFirstFlushWaitForTheNextTick(t *testing.T) {
	inFlight, release := make(chan struct{}), make(chan struct{})
	var rec recorder
	var once sync.Once
	send := func(ctx context.Context, batch int64, events []json.RawMessage) error {
		once.Do(func() { close(inFlight); <-release })
		return rec.send(ctx, batch, events)
	}
	b := startBatcher(t, never, 1<<20, send)
	b.add(ev(`1`))
	<-inFlight // the first event's flush is under way
	b.add(ev(`2`))
	b.add(ev(`3`))
	close(release)
	require.Eventually(t, func() bool { return len(rec.sent()) == 1 }, patience, time.Millisecond)
	require.Never(t, func() bool { return len(rec.sent()) > 1 }, 50*time.Millisecond, 5*time.Millisecond,
		"the rest of a burst batches: it waits for the next timed flush (an hour away here)")
	n, err := b.close()
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	require.Equal(t, []sentBatch{{1, []json.RawMessage{ev(`1`)}}, {2, []json.RawMessage{ev(`2`), ev(`3`)}}}, rec.sent())
}

// kicked reports whether b asked its run loop for a flush at once, and takes the request.
func kicked(b *batcher) bool {
	select {
	case <-b.kick:
		return true
	default:
		return false
	}
}

func TestBatcherATimedFlushThatFindsNothingEndsTheBurst(t *testing.T) {
	var rec recorder
	b := newBatcher(never, never, 1<<20, rec.send) // driven by hand: no run goroutine
	ctx := context.Background()

	b.add(ev(`1`))
	require.True(t, kicked(b), "a new batcher is quiet: its first event flushes at once")
	b.flush(ctx)
	b.add(ev(`2`))
	require.False(t, kicked(b), "the burst goes on: the second event waits for the tick")
	b.tick(ctx) // sends 2
	b.add(ev(`3`))
	require.False(t, kicked(b), "a tick that sent events does not end the burst")
	b.tick(ctx) // sends 3
	b.tick(ctx) // finds nothing: the burst is over
	require.False(t, kicked(b), "a quiet tick asks for no flush by itself")
	b.add(ev(`4`))
	require.True(t, kicked(b), "the first event after a quiet tick flushes at once")
	b.add(ev(`5`))
	require.False(t, kicked(b), "only the first one")
	b.flush(ctx)
	require.Equal(t, []string{`1`, `2`, `3`, `4`, `5`}, rec.events())
	requireNumbered(t, rec.sent())
}

// TestBatcherSendsAtMostOneSignalMoreThanItsTicks drives a batcher by hand the way its run
// loop does (a kick flushes at once, ticks flush on the interval) through random bursts and
// pauses: the first-event rule never makes a turn send more turn_events signals than it has
// ticks, plus one, so the interval alone bounds a long stream's history.
func TestBatcherSendsAtMostOneSignalMoreThanItsTicks(t *testing.T) {
	for seed := range int64(50) {
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		var rec recorder
		b := newBatcher(never, never, 1<<20, rec.send)
		ctx := context.Background()
		ticks, added := 0, 0
		for range 2000 {
			if rng.IntN(3) == 0 { // the interval passes
				b.tick(ctx)
				ticks++
				continue
			}
			for range rng.IntN(4) { // a burst of events, or none
				b.add(ev(fmt.Sprintf(`%d`, added)))
				added++
				if kicked(b) {
					b.flush(ctx)
				}
			}
		}
		b.flush(ctx) // close's last flush
		sends := len(rec.sent())
		require.LessOrEqual(t, sends, ticks+2, "seed %d: %d signals for %d ticks (and the final flush)", seed, sends, ticks)
		require.Len(t, rec.events(), added, "seed %d", seed)
		requireNumbered(t, rec.sent())
	}
}

// A status update (usage, title, commands, mode) is not the first token a person waits for
// (issue 28): it neither flushes at once nor ends the quiet spell, so the chunk that follows
// it does, carrying it along.
func TestBatcherStatusUpdatesDoNotTakeTheFirstTokensFlush(t *testing.T) {
	var rec recorder
	b := newBatcher(never, never, 1<<20, rec.send) // driven by hand: no run goroutine
	ctx := context.Background()
	usage := ev(`{"sessionId":"s","update":{"sessionUpdate":"usage_update","used":1,"size":2}}`)
	chunk := ev(`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}`)

	b.add(usage)
	require.False(t, kicked(b), "a usage_update waits for the next flush")
	b.add(chunk)
	require.True(t, kicked(b), "the first chunk after it flushes at once")
	b.flush(ctx)
	require.Equal(t, []string{string(usage), string(chunk)}, rec.events(), "one signal carries both, in order")

	b.tick(ctx) // finds nothing: quiet again
	b.add(usage)
	b.tick(ctx) // sends the usage alone: the spell stays quiet
	b.add(chunk)
	require.True(t, kicked(b), "a tick that sent only status updates leaves the spell quiet")
	b.add(ev(`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"usage_update"}}}`))
	require.False(t, kicked(b), "a chunk whose text names a status kind is a chunk")
	b.flush(ctx)
	requireNumbered(t, rec.sent())
}

// An unwatched turn's batcher (signals.PromptRequest.Unwatched) flushes on its ticks alone:
// no event after a quiet spell goes out at once, so a turn sends at most one signal a tick.
func TestBatcherOfAnUnwatchedTurnFlushesOnlyOnItsTicks(t *testing.T) {
	var rec recorder
	b := newBatcher(never, never, 1<<20, rec.send) // driven by hand: no run goroutine
	b.unwatched = true
	ctx := context.Background()

	b.add(ev(`1`))
	require.False(t, kicked(b), "nobody watches: the first event waits for the tick")
	b.tick(ctx) // sends 1
	b.tick(ctx) // finds nothing: a watched turn's next event would flush at once
	b.add(ev(`2`))
	b.add(ev(`3`))
	require.False(t, kicked(b), "nor does the first event after a quiet tick")
	require.Len(t, rec.sent(), 1)
	b.tick(ctx)
	require.Equal(t, []sentBatch{{1, []json.RawMessage{ev(`1`)}}, {2, []json.RawMessage{ev(`2`), ev(`3`)}}}, rec.sent())
	b.maxBytes = 64
	b.add(event(100))
	require.True(t, kicked(b), "a full batch still goes at once")
}

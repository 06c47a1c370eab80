package activities

// The runner's carried reports (issue 28, started.go): an attempt's turn_started rides on
// its first batch (or its result, the turn's report), its last batch on its result, and a
// quiet turn still running at TurnBeatAfter beats.

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// reports are the signals of one turn by kind, in the order they were sent.
type reports struct {
	started  []signals.TurnStartedSignal
	batches  []signals.TurnEventsSignal
	finished []signals.TurnFinishedSignal
}

func (c *signalRecorder) reports(turn int64) reports {
	var r reports
	for _, s := range c.all() {
		switch v := s.arg.(type) {
		case signals.TurnStartedSignal:
			if v.TurnID == turn {
				r.started = append(r.started, v)
			}
		case signals.TurnEventsSignal:
			if v.TurnID == turn {
				r.batches = append(r.batches, v)
			}
		case signals.TurnFinishedSignal:
			if v.TurnID == turn {
				r.finished = append(r.finished, v)
			}
		}
	}
	return r
}

// A short turn: no turn_started of its own (its first batch carries it, the one that carries
// the first chunk), and its last events ride on its result, numbered on from the batches.
// Every event reaches the session once, in order, and the runner sends no turn_finished:
// the result is the turn's report.
func TestRunTurnCarriesTurnStartedAndTheLastBatch(t *testing.T) {
	rig := newTurnRig(t, t.TempDir())
	rig.runner.FlushInterval = 200 * time.Millisecond // the echo's last chunks are pending at its end
	res := rig.mustRun(turnInput("s1", 1, rig.agent(), "/echo\nhello world, a short answer"))
	require.Equal(t, "end_turn", res.StopReason)

	r := rig.rec.reports(1)
	require.Empty(t, r.started, "no turn_started of its own")
	require.Empty(t, r.finished, "the result is the report")
	var started []*signals.TurnStartedSignal
	var events []json.RawMessage
	for i, b := range r.batches {
		require.Equal(t, int64(i+1), b.Batch)
		if b.Started != nil {
			started = append(started, b.Started)
		}
		events = append(events, b.Events...)
	}
	if res.Started != nil {
		started = append(started, res.Started)
	}
	require.Len(t, started, 1, "carried once")
	require.NotEmpty(t, r.batches)
	require.NotNil(t, r.batches[0].Started, "the batch of the first chunk carries it")
	require.Equal(t, rig.host.Queue, started[0].HostQueue)
	require.NotEmpty(t, res.Events, "the last batch rides on the result")
	require.Equal(t, int64(len(r.batches)+1), res.Batches)
	events = append(events, res.Events...)
	require.Equal(t, []string{"hello world, a short answer"}, joinedTexts(t, events))
}

// A quiet agent: no batch carries turn_started, so the batcher's beat does, TurnBeatAfter
// after the agent session opened: an empty batch, the one signal a turn_started of its own
// cost, and the session shows the turn running at it.
func TestRunTurnOfAQuietAgentBeatsWithItsTurnStarted(t *testing.T) {
	rig := newTurnRig(t, t.TempDir())
	rig.mustRun(turnInput("s1", 1, rig.agent(), "/sh sleep 4"))
	r := rig.rec.reports(1)
	require.Empty(t, r.started, "no turn_started of its own")
	require.NotEmpty(t, r.batches)
	beat := r.batches[0]
	require.Empty(t, beat.Events, "the beat")
	require.NotNil(t, beat.Started, "the beat carries turn_started")
	require.Equal(t, rig.host.Queue, beat.Started.HostQueue)
	require.Equal(t, int64(1), beat.Batch)
}

// A permission request is delivered to the host queue turn_started names: a quiet turn's
// turn_started goes out before it, alone when no batch took it.
func TestRunTurnSendsTurnStartedBeforeAPermissionRequest(t *testing.T) {
	rig := newTurnRig(t, t.TempDir())
	rig.answerPermissions("s1", "allow")
	rig.mustRun(turnInput("s1", 1, rig.agent(), "/permission edit"))
	before := false
	for _, s := range rig.rec.all() {
		switch v := s.arg.(type) {
		case signals.TurnStartedSignal:
			before = true
		case signals.TurnEventsSignal:
			before = before || v.Started != nil
		case signals.PermissionRequestedSignal:
			require.True(t, before, "turn_started went out before the permission request")
			return
		}
	}
	t.Fatal("no permission request")
}

// closeHolding keeps the events pending at the end for the turn's end to carry, when they
// fit in one batch; what does not fit is sent as close sends it.
func TestBatcherCloseHoldingKeepsTheLastBatch(t *testing.T) {
	var rec recorder
	b := startMidBurst(t, never, 1<<20, rec.send)
	b.add(ev(`{"a":1}`))
	b.flushNow()
	b.add(ev(`{"a":2}`))
	b.add(ev(`{"a":3}`))
	held, sent, err := b.closeHolding()
	require.NoError(t, err)
	require.Equal(t, int64(1), sent)
	require.Equal(t, []string{`{"a":1}`}, rec.events())
	require.Equal(t, []json.RawMessage{ev(`{"a":2}`), ev(`{"a":3}`)}, held)

	var big recorder
	b = startMidBurst(t, never, 16, big.send)
	b.add(event(10))
	b.add(event(10)) // 20 bytes pending: more than one batch
	held, sent, err = b.closeHolding()
	require.NoError(t, err)
	require.Empty(t, held)
	require.Equal(t, int64(2), sent)
}

// A batcher with a beat sends one empty batch at its first timed flush at or after beatAt,
// unless a batch went out since; at most once.
func TestBatcherBeatsOnceWhenNothingWentOutSince(t *testing.T) {
	var rec recorder
	ctx := context.Background()
	b := newBatcher(never, never, 1<<20, rec.send) // driven by hand: no run goroutine
	b.beatFrom(time.Now().Add(-time.Millisecond))
	b.tick(ctx)
	b.tick(ctx)
	require.Len(t, rec.sent(), 1, "one beat")
	require.Empty(t, rec.sent()[0].events)
	require.Equal(t, int64(1), rec.sent()[0].n)

	var busy recorder
	b = newBatcher(never, never, 1<<20, busy.send)
	b.beatFrom(time.Now().Add(-time.Millisecond))
	b.add(ev(`{"a":1}`))
	b.tick(ctx) // sends the event, after beatAt: no beat
	b.tick(ctx)
	require.Len(t, busy.sent(), 1)
	require.Equal(t, []string{`{"a":1}`}, busy.events())
}

// While the turn waits for a person, the session knows why it is quiet: its beat waits for
// the answer (nothing reaches the session's history while nobody answers), and is owed
// again after it.
func TestBatcherHoldsTheBeatWhileAPersonIsAsked(t *testing.T) {
	var rec recorder
	ctx := context.Background()
	b := newBatcher(never, never, 1<<20, rec.send)
	b.beatFrom(time.Now().Add(-time.Millisecond))
	answered := b.holdBeat(-time.Millisecond)
	b.tick(ctx)
	require.Empty(t, rec.sent(), "no beat while the person is asked")
	answered()
	b.tick(ctx)
	require.Len(t, rec.sent(), 1, "the beat after the answer")

	var none recorder
	b = newBatcher(never, never, 1<<20, none.send)
	b.holdBeat(-time.Millisecond)() // no beat owed: none after the answer either
	b.tick(ctx)
	require.Empty(t, none.sent())
}

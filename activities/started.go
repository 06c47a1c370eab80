package activities

// An attempt's turn_started on its way to the session (issue 28: a short prompt at
// Temporal's floor). A signal of its own costs the session a workflow task and Temporal
// Cloud an action, so the attempt's turn_started rides on the first turn_events batch the
// attempt sends once its agent session is open, or on its result (the turn's report).
// When the agent says nothing, the batcher's beat carries it (an empty batch,
// signals.TurnBeatAfter after the session opened: until then a steer waits for the host
// queue it names; a cancel also reaches the attempt by its heartbeat). It goes alone only
// before the attempt asks a person something and at an end that does not carry it (a
// failure). The first token never waits for it: the batch that carries the first chunk
// carries it.

import (
	"context"
	"sync"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// startedReport is an attempt's turn_started until a batch or the turn's end takes it
// (take), exactly once.
type startedReport struct {
	mu      sync.Mutex
	pending *signals.TurnStartedSignal
}

// take returns the pending turn_started and clears it (nil: none, or taken already).
func (s *startedReport) take() *signals.TurnStartedSignal {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending
	s.pending = nil
	return p
}

// reportStarted hands the attempt's turn_started to the session: it waits for the next
// batch, and the batcher beats TurnBeatAfter from now if none went out by then (an empty
// batch that carries it), so a quiet turn costs the session one signal.
func (t *turnRun) reportStarted(started signals.TurnStartedSignal) {
	t.mu.Lock()
	t.started = &startedReport{pending: &started}
	t.mu.Unlock()
	t.b.beatFrom(time.Now().Add(signals.TurnBeatAfter))
}

// takeStarted is the attempt's turn_started for a batch or the turn's end to carry (nil:
// none is pending).
func (t *turnRun) takeStarted() *signals.TurnStartedSignal {
	t.mu.Lock()
	s := t.started
	t.mu.Unlock()
	return s.take()
}

// sendStartedAlone sends the pending turn_started of s as a signal of its own, if one is
// still pending.
func (t *turnRun) sendStartedAlone(ctx context.Context, s *startedReport) {
	st := s.take()
	if st == nil {
		return
	}
	if err := t.r.signal(ctx, t.in.SessionWorkflowID, signals.SignalTurnStarted, *st); err != nil {
		t.log.Warn("turn_started failed: decisions cannot reach this attempt", "error", err)
	}
}

// startedOut sends the pending turn_started alone now: before the attempt asks a person
// something (the answer is delivered to the host queue it names) and at an end that does
// not carry it.
func (t *turnRun) startedOut(ctx context.Context) {
	t.mu.Lock()
	s := t.started
	t.mu.Unlock()
	if s != nil {
		t.sendStartedAlone(ctx, s)
	}
}

package activities

// An attempt's turn_started on its way to the session (issue 28: a short prompt at
// Temporal's floor). A signal of its own costs the session a workflow task and Temporal
// Cloud an action, so for a session that takes it so (TurnInput.CarriedReports) the
// attempt's turn_started rides on the first turn_events batch the attempt sends once its
// agent session is open, or on its turn_finished. It goes alone only when nothing carries
// it soon: the agent says nothing for startedHold (the session needs the host queue to
// deliver a steer or a cancel), the attempt is about to ask a person something, or it
// fails. The first token never waits for it: the batch that carries the first chunk
// carries it.

import (
	"context"
	"sync"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// startedHold is how long an attempt's turn_started waits for a batch to carry it.
const startedHold = time.Second

// startedWait bounds how long a turn's end waits for a turn_started sent alone to go out.
const startedWait = 5 * time.Second

// startedReport is an attempt's turn_started until it is out: pending until a batch, the
// turn's end or the hold takes it (take), each exactly once.
type startedReport struct {
	mu      sync.Mutex
	pending *signals.TurnStartedSignal
	stop    chan struct{} // closed at the attempt's end: the hold's goroutine returns
	alone   chan struct{} // closed once the hold's goroutine is done
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

// reportStarted hands the attempt's turn_started to the session: held for a batch to carry
// when the session takes it so, sent alone at once otherwise (as every runner did before).
// The wait it returns, for the turn's end, is bounded: a quick turn's turn_finished must not
// overtake a turn_started sent alone, or the session, the turn over, drops what it says
// (agent.context_lost, workspace.missing).
func (t *turnRun) reportStarted(sendCtx context.Context, started signals.TurnStartedSignal) (wait func()) {
	s := &startedReport{pending: &started, stop: make(chan struct{}), alone: make(chan struct{})}
	hold := time.Duration(0)
	if t.in.CarriedReports {
		hold = startedHold
		t.mu.Lock()
		t.started = s
		t.mu.Unlock()
	}
	go func() {
		defer close(s.alone)
		if hold > 0 {
			tm := time.NewTimer(hold)
			defer tm.Stop()
			select {
			case <-tm.C:
			case <-s.stop:
				return
			}
		}
		t.sendStartedAlone(sendCtx, s)
	}()
	return func() {
		close(s.stop)
		select {
		case <-s.alone:
		case <-time.After(startedWait):
			t.log.Warn("turn_started still not sent at the turn's end", "waited", startedWait)
		}
	}
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
// something (the answer is delivered to the host queue it names) and at a failed end.
func (t *turnRun) startedOut(ctx context.Context) {
	t.mu.Lock()
	s := t.started
	t.mu.Unlock()
	if s != nil {
		t.sendStartedAlone(ctx, s)
	}
}

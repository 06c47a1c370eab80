package activities

// Admission: how many turns a worker runs at once (-turns.max). A worker that takes more
// turns than its agents, memory and CPU hold does not fail them, it starves them all: every
// agent slows, and the server's answers with them. So a worker at capacity stops taking
// turns and they wait, scheduled, in the session queue, where a worker with room takes them
// (Temporal's own backpressure: a worker polls for a task only with a free slot). The
// session's status says its turn waits for a worker (tacpclient.Client.Status), and the
// tacp_turns_waiting_capacity gauge says how many wait, so an operator knows to add one.
//
// The gate counts both kinds of a worker's turns: those of the session queue, through the
// SDK's slot supplier of the session worker (TurnSlots), and those routed to this worker's
// host queue by affinity (contract §10), which take a slot when they start or, when none is
// free, hand the turn back to the session queue at once (TypeHostBusy) rather than wait
// behind turns on a worker that has no room.

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// Metric names of admission: the turns a worker runs and its -turns.max (gauges), and the
// turns scheduled on the session queue that no worker has taken yet with how long the
// oldest has waited (gauges, from the task queue's backlog: the same on every worker).
const (
	MetricTurnsRunning         = "tacp_turns_running"
	MetricTurnsMax             = "tacp_turns_max"
	MetricTurnsWaitingCapacity = "tacp_turns_waiting_capacity"
	MetricTurnQueueAge         = "tacp_turn_queue_age_seconds"
)

// TurnGate counts a worker's turns against its capacity. The zero value admits nothing;
// NewTurnGate makes one.
type TurnGate struct {
	max     int
	metrics client.MetricsHandler

	mu sync.Mutex
	// reserved are the session worker's slots: a poller holds one while it polls, a turn
	// while it runs; used those that run a turn; host the host queue's turns.
	reserved, used, host int
	changed              chan struct{} // closed when a slot is given back
}

// NewTurnGate is a gate of max turns (≤ 0: unbounded) that reports to metrics (nil: none).
func NewTurnGate(max int, metrics client.MetricsHandler) *TurnGate {
	if metrics == nil {
		metrics = client.MetricsNopHandler
	}
	g := &TurnGate{max: max, metrics: metrics, changed: make(chan struct{})}
	g.metrics.Gauge(MetricTurnsMax).Update(float64(max))
	g.metrics.Gauge(MetricTurnsRunning).Update(0)
	return g
}

// Max is the gate's capacity (≤ 0: unbounded).
func (g *TurnGate) Max() int {
	if g == nil {
		return 0
	}
	return g.max
}

// Running is how many turns run on the worker now.
func (g *TurnGate) Running() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.used + g.host
}

// tryHost takes a slot for a turn of the host queue: only a running turn counts against
// it, not a poller's idle reservation. false: the worker is full.
func (g *TurnGate) tryHost() bool {
	if g == nil {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.max > 0 && g.used+g.host >= g.max {
		return false
	}
	g.host++
	g.report()
	return true
}

// doneHost gives a host queue turn's slot back.
func (g *TurnGate) doneHost() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.host--
	g.wake()
	g.mu.Unlock()
}

// wake tells the waiting pollers that a slot came back, and reports the count (g.mu held).
func (g *TurnGate) wake() {
	close(g.changed)
	g.changed = make(chan struct{})
	g.report()
}

func (g *TurnGate) report() {
	g.metrics.Gauge(MetricTurnsRunning).Update(float64(g.used + g.host))
}

// TurnSlots is the slot supplier of the worker that polls the session queue, whose only
// activity is RunTurn: a poller asks for a turn only while the worker has room for one.
func (g *TurnGate) TurnSlots() worker.SlotSupplier { return turnSlots{g} }

type turnSlots struct{ g *TurnGate }

// slotUse marks a permit whose slot runs a turn.
type slotUse struct{ used bool }

func (s turnSlots) ReserveSlot(ctx context.Context, _ worker.SlotReservationInfo) (*worker.SlotPermit, error) {
	for {
		if p := s.TryReserveSlot(nil); p != nil {
			return p, nil
		}
		s.g.mu.Lock()
		changed := s.g.changed
		s.g.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		case <-time.After(time.Second): // a missed wake-up costs a second, not a slot
		}
	}
}

func (s turnSlots) TryReserveSlot(worker.SlotReservationInfo) *worker.SlotPermit {
	g := s.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.max > 0 && g.reserved+g.host >= g.max {
		return nil
	}
	g.reserved++
	return &worker.SlotPermit{UserData: &slotUse{}}
}

func (s turnSlots) MarkSlotUsed(info worker.SlotMarkUsedInfo) { s.g.markUsed(info.Permit()) }
func (s turnSlots) ReleaseSlot(info worker.SlotReleaseInfo)   { s.g.release(info.Permit()) }

// markUsed counts the turn that permit p's slot runs.
func (g *TurnGate) markUsed(p *worker.SlotPermit) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if u, ok := p.UserData.(*slotUse); ok && !u.used {
		u.used = true
		g.used++
		g.report()
	}
}

// release gives permit p's slot back.
func (g *TurnGate) release(p *worker.SlotPermit) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reserved--
	if u, ok := p.UserData.(*slotUse); ok && u.used {
		u.used = false
		g.used--
	}
	g.wake()
}

func (s turnSlots) MaxSlots() int { return max(s.g.max, 0) }

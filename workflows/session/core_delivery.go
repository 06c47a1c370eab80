package session

// The delivery lane of the session core. Decisions flow back into a running turn (contract
// §7): an accepted steer, a cancel, an answer to a permission request (core_permissions.go),
// a settings choice. Handlers only queue them; the lane sends them one at a time, in order
// (the shell runs each as a short Deliver activity on the task queue of the worker hosting
// the turn, activities/delivery.go).

import (
	"fmt"
	"slices"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

const (
	// DeliverScheduleToStart is how long a delivery waits for its host to pick it up: past
	// it the host is taken as lost.
	DeliverScheduleToStart = 5 * time.Second
	// DeliverStartToClose bounds one delivery; interrupt-and-continue waits for the agent
	// to acknowledge the cancel before prompting again.
	DeliverStartToClose = 45 * time.Second
)

// --- the delivery lane ---

// deliverable reports whether decisions can reach the live turn now.
func (s *Core) deliverable() bool {
	return s.Turn != nil && s.Turn.HostQueue != "" && s.Turn.Finished == nil
}

// steerChannel reports whether an accepted steer could reach the live turn: steering is on
// for the session and the turn's host has not been found gone. A turn that has not yet
// reported its host takes steers: they wait for it.
func (s *Core) steerChannel() bool {
	return s.cfg.SteeringOn && s.Turn != nil && s.Turn.Finished == nil && !s.Turn.HostLost && s.Turn.Limited == nil
}

// queueDelivery queues d for the live turn; it is sent once the turn's host is known.
func (s *Core) queueDelivery(d signals.Delivery) {
	d.SessionID, d.TurnID, d.Attempt = s.cfg.SessionID, s.Turn.TurnID, s.Turn.Attempt
	s.Deliveries = append(s.Deliveries, d)
}

// wantsDelivery reports whether the main loop has a delivery to send (or to drop, when its
// turn is gone).
func (s *Core) wantsDelivery() bool {
	if len(s.Deliveries) == 0 || s.delivering {
		return false
	}
	d := s.Deliveries[0]
	waiting := s.Turn != nil && s.Turn.TurnID == d.TurnID && s.Turn.Attempt == d.Attempt && s.Turn.HostQueue == "" && s.Turn.Finished == nil
	return !waiting
}

// takeDelivery takes the oldest queued delivery off the lane (cmdDeliver) and returns it
// when it is to be sent now, marked in flight; a delivery whose turn or attempt is gone (or
// that a history predating deliveries cannot send) is dropped, its steer journaled failed.
func (s *Core) takeDelivery(now time.Time) (signals.Delivery, bool) {
	d := s.Deliveries[0]
	s.Deliveries = s.Deliveries[1:]
	if !s.deliverable() || s.Turn.TurnID != d.TurnID || s.Turn.Attempt != d.Attempt {
		s.delivered(now, d, signals.DeliveryResult{}, fmt.Errorf("turn %d attempt %d is no longer running", d.TurnID, d.Attempt))
		return d, false
	}
	// Async: the taken delivery frees the lane at once, and a steer's outcome follows by
	// the delivery_outcome signal.
	s.DeliverySeq++
	d.Async, d.DeliveryID = true, fmt.Sprintf("%s-%d.%d-%d", d.Kind, d.TurnID, d.Attempt, s.DeliverySeq)
	s.delivering, s.inFlight, s.inFlightReported = true, d, false
	return d, true
}

// deliveryDone takes the result of the delivery in flight. hostGone says the host never
// picked it up (a schedule-to-start timeout): no steer can reach this attempt any more, and
// a retry on another worker reports its new host with turn_started. A steer the live turn
// took (Async) waits for its delivery_outcome; any other result is recorded now.
func (s *Core) deliveryDone(now time.Time, d signals.Delivery, res signals.DeliveryResult, err error, hostGone bool) {
	s.delivering = false
	reported := s.inFlightReported
	s.inFlightReported = false
	if hostGone {
		if t := s.LiveTurnByID(d.TurnID); t != nil && t.Attempt == d.Attempt {
			t.HostQueue, t.HostLost = "", true
		}
	}
	switch {
	case reported:
		// its delivery_outcome overtook the result and is journaled already
	case err == nil && res.Taken && d.Kind == signals.DeliverSteer:
		if t := s.LiveTurnByID(d.TurnID); t == nil || t.Attempt != d.Attempt {
			s.delivered(now, d, signals.DeliveryResult{}, fmt.Errorf("attempt %d was given up before it reported the steer", d.Attempt))
			break
		}
		s.Awaiting = append(s.Awaiting, d)
	default:
		s.delivered(now, d, res, err)
	}
	s.maybeFinish(now) // a turn_finished may have waited for this steer's outcome
}

// deliveryOutcome takes a delivery_outcome signal: how a steer the live turn took went. One
// that names no delivery awaiting its outcome (unknown, already reported, or of a turn or
// attempt no longer live) is ignored.
func (s *Core) deliveryOutcome(now time.Time, o signals.DeliveryOutcome) {
	match := func(d signals.Delivery) bool {
		return d.DeliveryID != "" && d.DeliveryID == o.DeliveryID && d.TurnID == o.TurnID && d.Attempt == o.Attempt && d.Kind == signals.DeliverSteer
	}
	data := signals.SteerDeliveredData{How: o.How, Error: o.Error}
	if data.How == "" || (data.Error != "" && data.How != signals.HowFailed) {
		data.How = signals.HowFailed
	}
	switch i := slices.IndexFunc(s.Awaiting, match); {
	case i >= 0:
		data.Offset = s.Awaiting[i].Offset
		s.Awaiting = slices.Delete(s.Awaiting, i, i+1)
	case s.delivering && !s.inFlightReported && match(s.inFlight) && s.LiveTurnByID(o.TurnID) != nil && s.Turn.Attempt == o.Attempt:
		// The outcome overtook the Deliver's own result (Taken).
		data.Offset = s.inFlight.Offset
		s.inFlightReported = true
	default:
		return
	}
	s.journal(now, signals.EventSteerDelivered, o.TurnID, data)
	s.maybeFinish(now)
}

// failAwaited journals steer.delivered failed for every taken steer of turnID that awaits
// its outcome from an attempt before attempt (all of them when attempt is 0): a steer is
// never forgotten silently.
func (s *Core) failAwaited(now time.Time, turnID int64, attempt int32, why string) {
	kept := s.Awaiting[:0:0]
	for _, d := range s.Awaiting {
		if d.TurnID != turnID || (attempt != 0 && d.Attempt >= attempt) {
			kept = append(kept, d)
			continue
		}
		s.journal(now, signals.EventSteerDelivered, d.TurnID, signals.SteerDeliveredData{Offset: d.Offset, How: signals.HowFailed, Error: why})
	}
	if len(kept) != len(s.Awaiting) {
		s.Awaiting = kept
	}
}

// OutcomeWait bounds how long a turn's end waits for the outcomes of the steers it took: the
// runner sends them before it reports the end, and an interrupt-and-continue round trip is
// bounded as the Deliver that carried the steer was before Async.
const OutcomeWait = DeliverStartToClose

// awaitingOutcomes reports whether the end of turn t (fin) waits for the outcome of a steer
// its attempt took (Async): until the outcome comes, the turn's drive is known to have
// ended, or outcomeWait has passed since the end arrived (the alarm wakes the session then,
// also in a run that continued as new and no longer drives the turn).
func (s *Core) awaitingOutcomes(now time.Time, t *LiveTurn, fin *signals.TurnFinishedSignal) bool {
	if fin.Orphaned || t.Drive == driveOver || (fin.Attempt != 0 && fin.Attempt != t.Attempt) ||
		!slices.ContainsFunc(s.Awaiting, func(d signals.Delivery) bool { return d.TurnID == t.TurnID && d.Attempt == t.Attempt }) {
		return false
	}
	if t.OutcomesDue == nil {
		due := now.Add(OutcomeWait)
		t.OutcomesDue = &due
	}
	return now.Before(*t.OutcomesDue)
}

// deliverNone marks a queued steer whose failure was journaled at its turn's end. It keeps
// its place in the lane, where it is dropped as before (taking it out would change when the
// main loop does what, and so the commands of recorded histories), and journals nothing
// more.
const deliverNone = "none"

// failQueuedSteers journals steer.delivered failed for the steers still queued for turnID,
// which is ending: they never reached it, and their outcome belongs before its end.
func (s *Core) failQueuedSteers(now time.Time, turnID int64) {
	for i, d := range s.Deliveries {
		if d.Kind != signals.DeliverSteer || d.TurnID != turnID {
			continue
		}
		s.journal(now, signals.EventSteerDelivered, turnID, signals.SteerDeliveredData{Offset: d.Offset, How: signals.HowFailed, Error: "the turn ended before the steer reached it"})
		s.Deliveries[i].Kind, s.Deliveries[i].Text = deliverNone, ""
	}
}

// steersEnd journals, as turnID ends, the steer.delivered of each of its steers not yet
// reported, before its end: a taken steer whose outcome has not come was lost with the
// turn, one still queued never reached it, and the result of one in flight (a lost turn's
// end does not wait for it) comes too late.
func (s *Core) steersEnd(now time.Time, turnID int64) {
	s.failAwaited(now, turnID, 0, "the turn ended before it reported the steer")
	queued := slices.ContainsFunc(s.Deliveries, func(d signals.Delivery) bool { return d.Kind == signals.DeliverSteer && d.TurnID == turnID })
	inFlight := s.delivering && !s.inFlightReported && s.inFlight.Kind == signals.DeliverSteer && s.inFlight.TurnID == turnID
	if !queued && !inFlight {
		return
	}
	s.failQueuedSteers(now, turnID)
	if d := s.inFlight; s.delivering && !s.inFlightReported && d.Kind == signals.DeliverSteer && d.TurnID == turnID {
		s.journal(now, signals.EventSteerDelivered, turnID, signals.SteerDeliveredData{Offset: d.Offset, How: signals.HowFailed, Error: "the turn ended before the steer's delivery was answered"})
		s.inFlightReported = true
	}
}

// steerInFlight reports whether the turn's end must wait for the steer delivery in flight
// into the same attempt: the turn's end (its RunTurn's completion) can reach the session
// before the Deliver activity's result, and a steer delivered into a turn is reported before the turn's
// end. The delivery is bounded (deliverStartToClose), so the wait is too.
func (s *Core) steerInFlight(fin *signals.TurnFinishedSignal) bool {
	t := s.Turn
	d := s.inFlight
	return s.delivering && !s.inFlightReported && d.Kind == signals.DeliverSteer && d.TurnID == t.TurnID && d.Attempt == t.Attempt &&
		(fin.Attempt == 0 || fin.Attempt == t.Attempt) && !fin.Orphaned
}

func deliverySummary(d signals.Delivery) string {
	switch d.Kind {
	case signals.DeliverSteer:
		return fmt.Sprintf("deliver steer %d.%d", d.TurnID, d.Offset)
	case signals.DeliverPermission:
		return fmt.Sprintf("deliver permission %s: %s", d.RequestID, d.Outcome)
	default:
		return fmt.Sprintf("deliver %s to turn %d", d.Kind, d.TurnID)
	}
}

// delivered records a delivery's outcome. Only steers journal it: a cancel has the
// heartbeat path as backstop and a permission answer is journaled when it is decided.
func (s *Core) delivered(now time.Time, d signals.Delivery, res signals.DeliveryResult, err error) {
	if err != nil {
		s.env.Warn("delivery failed", "kind", d.Kind, "turn", d.TurnID, "error", err)
	}
	if d.Kind == signals.DeliverSettings && res.Settings != nil {
		s.settingsApplied(now, d.TurnID, res.Settings)
	}
	if d.Kind != signals.DeliverSteer {
		return
	}
	data := signals.SteerDeliveredData{Offset: d.Offset, How: res.How}
	if err != nil {
		data.How, data.Error = signals.HowFailed, err.Error()
	}
	s.journal(now, signals.EventSteerDelivered, d.TurnID, data)
}

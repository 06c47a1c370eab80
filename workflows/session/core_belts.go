package session

// The session core's belts (contract §6) and its alarm clock.
//
//   - Viewers attach with a lease and a role; observers may watch but not act.
//   - Grace (belt 1): when the last viewer of a turn that had one detaches or lets its lease
//     lapse, grace starts; after grace_window the turn is cancelled; an attach inside the
//     window keeps it. A background turn (its prompt unwatched) never had one to lose.
//   - Deadline (belt 2): a turn may work turn_deadline, its clock paused while a permission
//     waits; past it the turn is cancelled and ends turn.failed {error: "deadline ..."}.
//   - Permission deadlines: an asked request expires (fail closed) after permission_timeout
//     (expirePermissions, core_permissions.go; the questions' expireElicitations).
//
// Every one of them is an absolute time in the session's state, so continue-as-new carries
// them as they are; the core names the earliest (nextAlarm) and the shell keeps one
// workflow timer for it (workflows/session.go).

import (
	"fmt"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// Lease bounds for attach.
const (
	maxLeaseSeconds = 24 * 60 * 60
)

// viewer is an attached viewer.
type viewer struct {
	ID         string    `json:"id"`
	Role       string    `json:"role"`
	LeaseUntil time.Time `json:"lease_until"`
}

// turnClock measures a turn's working time, paused while a permission waits.
type turnClock struct {
	Used    time.Duration `json:"used"`
	Running *time.Time    `json:"running,omitempty"` // since when, nil while paused
}

func (c *turnClock) pause(now time.Time) {
	if c.Running != nil {
		c.Used += now.Sub(*c.Running)
		c.Running = nil
	}
}

func (c *turnClock) resume(now time.Time) {
	if c.Running == nil {
		c.Running = &now
	}
}

// deadline is when the clock reaches limit, if it is running.
func (c *turnClock) deadline(limit time.Duration) (time.Time, bool) {
	if c.Running == nil {
		return time.Time{}, false
	}
	return c.Running.Add(limit - c.Used), true
}

// --- viewers ---

func (s *Core) findViewer(id string) int {
	for i, v := range s.Viewers {
		if v.ID == id {
			return i
		}
	}
	return -1
}

// forbidden rejects a request that names a viewer attached as observer.
func (s *Core) forbidden(viewerID string) *signals.Rejection {
	if viewerID == "" {
		return nil
	}
	if i := s.findViewer(viewerID); i >= 0 && s.Viewers[i].Role == signals.RoleObserver {
		return signals.Reject(signals.RejectForbidden, "viewer %s attached as observer: it can watch, not act", viewerID)
	}
	return nil
}

func checkAttach(req signals.AttachRequest) *signals.Rejection {
	switch {
	case req.ViewerID == "" || len(req.ViewerID) > signals.MaxClientIDBytes:
		return signals.Reject(signals.RejectInvalidRequest, "viewer_id is required, at most %d bytes", signals.MaxClientIDBytes)
	case req.Role != signals.RoleController && req.Role != signals.RoleObserver:
		return signals.Reject(signals.RejectInvalidRequest, "role %q: want controller or observer", req.Role)
	case req.LeaseSeconds <= 0 || req.LeaseSeconds > maxLeaseSeconds:
		return signals.Reject(signals.RejectInvalidRequest, "lease_seconds %d: want 1 to %d", req.LeaseSeconds, maxLeaseSeconds)
	}
	return nil
}

func (s *Core) attach(now time.Time, req signals.AttachRequest) (signals.Status, error) {
	v := viewer{ID: req.ViewerID, Role: req.Role, LeaseUntil: now.Add(time.Duration(req.LeaseSeconds) * time.Second)}
	if i := s.findViewer(req.ViewerID); i >= 0 {
		s.Viewers[i] = v
	} else {
		s.Viewers = append(s.Viewers, v)
	}
	if s.Turn != nil {
		s.Turn.HadViewer = !s.Turn.Background
		s.watched()
	}
	if s.GraceUntil != nil {
		s.GraceUntil = nil
		s.journal(now, signals.EventViewerGraceCancelled, s.turnID(), signals.GraceData{ViewerID: req.ViewerID})
	}
	return s.Status(), nil
}

// watched brings the live turn, when it streams unwatched, to the watched cadence now that
// a viewer is attached: its host is told by a delivery, and a later attempt starts watched.
// Events journaled before stay where they are: the viewer reads them from the journal.
func (s *Core) watched() {
	t := s.Turn
	if t.Input == nil || !t.Input.Unwatched || t.Finished != nil {
		return
	}
	t.Input.Unwatched = false
	s.queueDelivery(signals.Delivery{Kind: signals.DeliverWatch})
}

func (s *Core) detach(now time.Time, req signals.DetachRequest) (signals.DetachResult, error) {
	if i := s.findViewer(req.ViewerID); i >= 0 {
		s.Viewers = append(s.Viewers[:i:i], s.Viewers[i+1:]...)
		s.maybeStartGrace(now)
	}
	return signals.DetachResult{}, nil
}

// maybeStartGrace starts grace when a turn that had a viewer has none left.
func (s *Core) maybeStartGrace(now time.Time) {
	if len(s.Viewers) > 0 || s.GraceUntil != nil || s.Turn == nil || !s.Turn.HadViewer || s.Turn.Cancel != cancelNone {
		return
	}
	until := now.Add(s.cfg.Grace)
	s.GraceUntil = &until
	s.journal(now, signals.EventViewerGraceStarted, s.Turn.TurnID, signals.GraceData{Until: until})
}

func (s *Core) turnID() int64 {
	if s.Turn == nil {
		return 0
	}
	return s.Turn.TurnID
}

func (s *Core) viewersView() []signals.Viewer {
	out := make([]signals.Viewer, 0, len(s.Viewers))
	for _, v := range s.Viewers {
		out = append(out, signals.Viewer{ViewerID: v.ID, Role: v.Role, LeaseUntil: v.LeaseUntil})
	}
	return out
}

// --- the alarm clock ---

// nextAlarm is the earliest absolute time at which a belt or a permission deadline is due,
// and what is due then (the timer's summary in the Temporal UI).
func (s *Core) nextAlarm() (time.Time, bool) {
	at, _ := s.nextAlarmLabelled()
	return at, !at.IsZero()
}

func (s *Core) nextAlarmLabelled() (time.Time, string) {
	var at time.Time
	var label string
	consider := func(t time.Time, what func() string) {
		if at.IsZero() || t.Before(at) {
			at, label = t, what()
		}
	}
	for _, p := range s.Permissions {
		consider(p.Deadline, func() string { return "permission " + p.RequestID + " expires" })
	}
	for _, e := range s.Elicitations {
		consider(e.Deadline, func() string { return "question " + e.RequestID + " expires" })
	}
	for _, v := range s.Viewers {
		consider(v.LeaseUntil, func() string { return "viewer " + v.ID + "'s lease lapses" })
	}
	if t := s.Turn; t != nil && t.Finished != nil && t.OutcomesDue != nil {
		consider(*t.OutcomesDue, func() string { return fmt.Sprintf("turn %d stops waiting for its steers' outcomes", t.TurnID) })
	}
	if s.Turn != nil && s.Turn.Cancel == cancelNone {
		if s.GraceUntil != nil {
			consider(*s.GraceUntil, func() string { return fmt.Sprintf("grace ends: turn %d is cancelled", s.Turn.TurnID) })
		}
		if d, ok := s.Turn.Clock.deadline(s.cfg.Deadline); ok {
			consider(d, func() string { return fmt.Sprintf("turn %d's deadline", s.Turn.TurnID) })
		}
	}
	return at, label
}

// alarmNeedsArming reports whether the earliest alarm moved since the timer was set (a
// handler attached, a permission arrived...), so the main loop wakes to re-arm it.
func (s *Core) alarmNeedsArming() bool {
	at, ok := s.nextAlarm()
	return ok && s.rearms(at)
}

// rearms reports whether an alarm at at needs the timer set again: only when it moves
// earlier, so a lease renewal (an alarm that moves later) costs no timer cancel and start;
// the armed timer fires, finds nothing due, and arms the next.
func (s *Core) rearms(at time.Time) bool {
	if at.Equal(s.alarmAt) {
		return false
	}
	if !s.alarmAt.IsZero() && at.After(s.alarmAt) {
		return false // the armed timer fires first and re-arms then
	}
	return true
}

// setAlarm says whether the shell's one timer must be set (again), for when, and with what
// summary (the Temporal UI shows it); the core then counts the timer as set for that time.
func (s *Core) setAlarm() (time.Time, string, bool) {
	at, label := s.nextAlarmLabelled()
	if at.IsZero() || !s.rearms(at) {
		return time.Time{}, "", false
	}
	s.alarmAt = at
	return at, label + " at " + at.UTC().Format("15:04:05 UTC"), true
}

// fireAlarms handles everything due by now: expired leases (and the grace they start),
// expired permission requests, the end of grace, the turn's deadline.
func (s *Core) fireAlarms(now time.Time) {
	kept := s.Viewers[:0:0]
	lapsed := false
	for _, v := range s.Viewers {
		if v.LeaseUntil.After(now) {
			kept = append(kept, v)
		} else {
			lapsed = true
		}
	}
	if lapsed {
		s.Viewers = kept
		s.maybeStartGrace(now)
	}
	s.expirePermissions(now)
	s.expireElicitations(now)
	if t := s.Turn; t != nil && t.Finished != nil && t.OutcomesDue != nil && !t.OutcomesDue.After(now) {
		s.maybeFinish(now) // the end waited long enough for its steers' outcomes
	}
	if s.Turn == nil || s.Turn.Cancel != cancelNone {
		return
	}
	if s.GraceUntil != nil && !s.GraceUntil.After(now) {
		s.GraceUntil = nil
		s.startCancel(now, "grace", "")
		return
	}
	if d, ok := s.Turn.Clock.deadline(s.cfg.Deadline); ok && !d.After(now) {
		s.startCancel(now, "deadline", "")
	}
}

// pauseClockIfAsked pauses the live turn's clock while one of its requests waits, and runs
// it otherwise.
func (s *Core) pauseClockIfAsked(now time.Time) {
	if s.Turn == nil {
		return
	}
	if s.Turn.Limited != nil && s.Turn.Limited.Journaled {
		s.Turn.Clock.pause(now) // the wait for a limit is not working time
		return
	}
	if s.asksTurn(s.Turn.TurnID) {
		s.Turn.Clock.pause(now)
		return
	}
	s.Turn.Clock.resume(now)
}

// deadlineMessage is the error of a turn that ran out of working time.
func (s *Core) deadlineMessage() string {
	return fmt.Sprintf("deadline: the turn worked longer than turn_deadline (%s)", s.cfg.Deadline)
}

package workflows

// The session's belts (DESIGN §6) and its one alarm clock.
//
//   - Viewers attach with a lease and a role; observers may watch but not act.
//   - Grace (belt 1): when the last viewer of a turn that had one detaches or lets its lease
//     lapse, grace starts; after grace_window the turn is cancelled; an attach inside the
//     window keeps it.
//   - Deadline (belt 2): a turn may work turn_deadline, its clock paused while a permission
//     waits; past it the turn is cancelled and ends turn.failed {error: "deadline ..."}.
//   - Permission deadlines: an asked request expires (fail closed) after permission_timeout.
//
// Every one of them is an absolute time in the session's state, so continue-as-new carries
// them as they are; the main loop keeps one workflow timer, for the earliest, and re-arms it
// only when that time changes.

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
)

// alarmsChange guards the alarm timer: histories recorded before it replay without one.
const alarmsChange = "alarms"

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

func (s *session) findViewer(id string) int {
	for i, v := range s.Viewers {
		if v.ID == id {
			return i
		}
	}
	return -1
}

// forbidden rejects a request that names a viewer attached as observer.
func (s *session) forbidden(viewerID string) *signals.Rejection {
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

func (s *session) validateAttach(ctx workflow.Context, req signals.AttachRequest) error {
	if rej := checkAttach(req); rej != nil {
		return rej.ApplicationError()
	}
	return nil
}

func (s *session) attach(ctx workflow.Context, req signals.AttachRequest) (signals.Status, error) {
	s.updates++
	if rej := checkAttach(req); rej != nil {
		return signals.Status{}, rej.ApplicationError()
	}
	now := workflow.Now(ctx)
	v := viewer{ID: req.ViewerID, Role: req.Role, LeaseUntil: now.Add(time.Duration(req.LeaseSeconds) * time.Second)}
	if i := s.findViewer(req.ViewerID); i >= 0 {
		s.Viewers[i] = v
	} else {
		s.Viewers = append(s.Viewers, v)
	}
	if s.Turn != nil {
		s.Turn.HadViewer = true
	}
	if s.GraceUntil != nil {
		s.GraceUntil = nil
		s.journal(ctx, signals.EventViewerGraceCancelled, s.turnID(), signals.GraceData{ViewerID: req.ViewerID})
	}
	return s.status(ctx), nil
}

func (s *session) detach(ctx workflow.Context, req signals.DetachRequest) (signals.DetachResult, error) {
	s.updates++
	if i := s.findViewer(req.ViewerID); i >= 0 {
		s.Viewers = append(s.Viewers[:i:i], s.Viewers[i+1:]...)
		s.maybeStartGrace(ctx)
	}
	return signals.DetachResult{}, nil
}

// maybeStartGrace starts grace when a turn that had a viewer has none left.
func (s *session) maybeStartGrace(ctx workflow.Context) {
	if len(s.Viewers) > 0 || s.GraceUntil != nil || s.Turn == nil || !s.Turn.HadViewer || s.Turn.Cancelling {
		return
	}
	until := workflow.Now(ctx).Add(s.cfg.Grace)
	s.GraceUntil = &until
	s.journal(ctx, signals.EventViewerGraceStarted, s.Turn.TurnID, signals.GraceData{Until: until})
}

func (s *session) turnID() int64 {
	if s.Turn == nil {
		return 0
	}
	return s.Turn.TurnID
}

func (s *session) viewersView() []signals.Viewer {
	out := make([]signals.Viewer, 0, len(s.Viewers))
	for _, v := range s.Viewers {
		out = append(out, signals.Viewer{ViewerID: v.ID, Role: v.Role, LeaseUntil: v.LeaseUntil})
	}
	return out
}

// --- policy and rules ---

func (s *session) validateSetPolicy(ctx workflow.Context, req signals.SetPolicyRequest) error {
	if !ValidPolicyLevel(req.Level) {
		return signals.Reject(signals.RejectInvalidRequest, "policy %q: want allow_all, ask_for_risky or ask_always", req.Level).ApplicationError()
	}
	return nil
}

func (s *session) setPolicy(ctx workflow.Context, req signals.SetPolicyRequest) (signals.SetPolicyResult, error) {
	s.updates++
	if err := s.validateSetPolicy(ctx, req); err != nil {
		return signals.SetPolicyResult{}, err
	}
	if prev := s.Policy.Level; prev != req.Level {
		s.Policy.Level = req.Level
		s.journal(ctx, signals.EventPolicyChanged, s.turnID(), signals.PolicyChangedData{Level: req.Level, Previous: prev})
	}
	return signals.SetPolicyResult{Level: s.Policy.Level}, nil
}

func (s *session) validateForget(ctx workflow.Context, req signals.PermissionForgetRequest) error {
	if rej := ValidateForget(req.Tool); rej != nil {
		return rej.ApplicationError()
	}
	return nil
}

func (s *session) forget(ctx workflow.Context, req signals.PermissionForgetRequest) (signals.PermissionForgetResult, error) {
	s.updates++
	if err := s.validateForget(ctx, req); err != nil {
		return signals.PermissionForgetResult{}, err
	}
	forgotten := s.Policy.Forget(req.Tool)
	if forgotten {
		s.journal(ctx, signals.EventPermissionForgotten, s.turnID(), signals.PermissionForgottenData{Tool: req.Tool})
	}
	return signals.PermissionForgetResult{Forgotten: forgotten}, nil
}

// --- the alarm clock ---

// nextAlarm is the earliest absolute time at which a belt or a permission deadline is due,
// and what is due then (the timer's summary in the Temporal UI).
func (s *session) nextAlarm() (time.Time, bool) {
	at, _ := s.nextAlarmLabelled()
	return at, !at.IsZero()
}

func (s *session) nextAlarmLabelled() (time.Time, string) {
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
	for _, v := range s.Viewers {
		consider(v.LeaseUntil, func() string { return "viewer " + v.ID + "'s lease lapses" })
	}
	if s.Turn != nil && !s.Turn.Cancelling {
		if s.GraceUntil != nil {
			consider(*s.GraceUntil, func() string { return fmt.Sprintf("grace ends: turn %d is cancelled", s.Turn.TurnID) })
		}
		if d, ok := s.Turn.Clock.deadline(s.cfg.Deadline); ok {
			consider(d, func() string { return fmt.Sprintf("turn %d's deadline", s.Turn.TurnID) })
		}
	}
	return at, label
}

// Versions of the alarm clock (alarmsChange): 1 re-arms the timer whenever the earliest
// alarm moves; 2 only when it moves earlier, so a lease renewal (an alarm that moves later)
// costs no timer cancel and start: the armed timer fires, finds nothing due, and arms the
// next.
const alarmsEarlierOnly workflow.Version = 2

// alarmNeedsArming reports whether the earliest alarm moved since the timer was set (a
// handler attached, a permission arrived...), so the main loop wakes to re-arm it.
func (s *session) alarmNeedsArming() bool {
	if s.alarmsVersion != nil && *s.alarmsVersion == workflow.DefaultVersion {
		return false
	}
	at, ok := s.nextAlarm()
	return ok && s.rearms(at)
}

// rearms reports whether an alarm at at needs the timer set again.
func (s *session) rearms(at time.Time) bool {
	if at.Equal(s.alarmAt) {
		return false
	}
	if s.alarmsVersion != nil && *s.alarmsVersion >= alarmsEarlierOnly && !s.alarmAt.IsZero() && at.After(s.alarmAt) {
		return false // the armed timer fires first and re-arms then
	}
	return true
}

// armAlarm keeps one timer running for the earliest alarm, re-arming only on change.
func (s *session) armAlarm(ctx workflow.Context) {
	at, label := s.nextAlarmLabelled()
	if at.IsZero() || !s.rearms(at) {
		return
	}
	if s.alarmsVersion == nil {
		v := workflow.GetVersion(ctx, alarmsChange, workflow.DefaultVersion, alarmsEarlierOnly)
		s.alarmsVersion = &v
		if !s.rearms(at) {
			return
		}
	}
	if *s.alarmsVersion == workflow.DefaultVersion {
		return
	}
	if s.cancelAlarm != nil {
		s.cancelAlarm()
	}
	s.alarmAt = at
	s.alarmGen++
	gen := s.alarmGen
	tctx, cancel := workflow.WithCancel(ctx)
	s.cancelAlarm = cancel
	d := max(at.Sub(workflow.Now(ctx)), time.Millisecond)
	summary := "next deadline"
	if *s.alarmsVersion >= alarmsEarlierOnly {
		summary = label + " at " + at.UTC().Format("15:04:05 UTC")
	}
	timer := workflow.NewTimerWithOptions(tctx, d, workflow.TimerOptions{Summary: summary})
	workflow.Go(ctx, func(ctx workflow.Context) {
		if timer.Get(ctx, nil) == nil && gen == s.alarmGen {
			s.alarmAt, s.alarmFired = time.Time{}, true
		}
	})
}

// fireAlarms handles everything due by now: expired leases (and the grace they start),
// expired permission requests, the end of grace, the turn's deadline.
func (s *session) fireAlarms(ctx workflow.Context) {
	s.alarmFired = false
	now := workflow.Now(ctx)
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
		s.maybeStartGrace(ctx)
	}
	for i := 0; i < len(s.Permissions); {
		p := s.Permissions[i]
		if p.Deadline.After(now) {
			i++
			continue
		}
		s.resolve(ctx, i, Expire(p.RequestID, p.Options), true)
	}
	if s.Turn == nil || s.Turn.Cancelling {
		return
	}
	if s.GraceUntil != nil && !s.GraceUntil.After(now) {
		s.GraceUntil = nil
		s.startCancel(ctx, "grace")
		return
	}
	if d, ok := s.Turn.Clock.deadline(s.cfg.Deadline); ok && !d.After(now) {
		s.startCancel(ctx, "deadline")
	}
}

// pauseClockIfAsked pauses the live turn's clock while one of its requests waits, and runs
// it otherwise.
func (s *session) pauseClockIfAsked(ctx workflow.Context) {
	if s.Turn == nil {
		return
	}
	now := workflow.Now(ctx)
	for _, p := range s.Permissions {
		if p.TurnID == s.Turn.TurnID {
			s.Turn.Clock.pause(now)
			return
		}
	}
	s.Turn.Clock.resume(now)
}

// deadlineMessage is the error of a turn that ran out of working time.
func (s *session) deadlineMessage() string {
	return fmt.Sprintf("deadline: the turn worked longer than turn_deadline (%s)", s.cfg.Deadline)
}

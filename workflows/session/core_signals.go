package session

// The session core's signals: the turn runner's reports and the signal twins of the
// updates (the update table, core_updates.go). A signal cannot be refused: a rejected twin
// changes no state beyond the one prompt.rejected / steer.rejected event that tells its
// sender why (contract §3), and a payload that does not decode is dropped with a warning.

import (
	"encoding/json"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// RunnerSignals are the turn runner's reports, in the order the shell drains them within a
// workflow task: a turn's start, its events, its requests, the outcomes of the steers it
// took (before its end: the runner sends them first), its end (turn_finished also waits for
// its last batch, whatever the order).
var RunnerSignals = []string{
	signals.SignalTurnStarted,
	signals.SignalTurnEvents,
	signals.SignalTurnLimited,
	signals.SignalPermissionRequested,
	signals.SignalElicitationRequested,
	signals.SignalDeliveryOutcome,
	signals.SignalTurnFinished,
}

// SignalOrder lists every signal the core takes, in the order the shell drains them within
// a workflow task: the runner's, then the twins of the update table in its order, wake
// (counted, nothing else: its workflow task is the point, workflows/doc.go) draining after
// set_config_option, where it always has (the order is recorded in every history).
var SignalOrder = func() []string {
	out := append([]string{}, RunnerSignals...)
	for _, u := range Updates {
		out = append(out, u.Name())
		if u.Name() == signals.UpdateSetConfigOption {
			out = append(out, signals.SignalWake)
		}
	}
	// Signals added since drain last, after every one a recorded history may hold.
	return append(out, signals.SignalElicitationCompleted)
}()

// signal takes one signal of SignalOrder.
func (s *Core) signal(now time.Time, in SignalInput) {
	s.signalsSeen++
	if in.Name == signals.SignalWake {
		// A worker of the current version found this run on another: move at the next idle
		// safe point, also on a server that does not flag the target's change (workflows/doc.go).
		s.UpgradeWanted = true
		return
	}
	if s.runnerSignal(now, in.Name, in.Raw) {
		return
	}
	u, ok := UpdateByName[in.Name]
	if !ok {
		s.env.Warn("dropping a signal the session does not take", "name", in.Name)
		return
	}
	req, err := u.Decode(in.Raw)
	if err != nil {
		s.env.Warn("dropping malformed signal", "error", err)
		return
	}
	u.twin(s, now, req, in.Refused)
}

// runnerSignal takes a signal of the turn runner, reporting whether name is one.
func (s *Core) runnerSignal(now time.Time, name string, raw json.RawMessage) bool {
	switch name {
	case signals.SignalTurnStarted:
		decode(s, raw, func(sig signals.TurnStartedSignal) { s.turnStarted(now, sig) })
	case signals.SignalTurnEvents:
		decode(s, raw, func(sig signals.TurnEventsSignal) { s.turnEvents(now, sig) })
	case signals.SignalPermissionRequested:
		decode(s, raw, func(sig signals.PermissionRequestedSignal) { s.permissionRequested(now, sig) })
	case signals.SignalElicitationRequested:
		decode(s, raw, func(sig signals.ElicitationRequestedSignal) { s.elicitationRequested(now, sig) })
	case signals.SignalElicitationCompleted:
		decode(s, raw, func(sig signals.ElicitationCompletedSignal) { s.elicitationCompleted(now, sig) })
	case signals.SignalTurnLimited:
		decode(s, raw, func(sig signals.TurnLimitedSignal) { s.turnLimited(now, sig) })
	case signals.SignalDeliveryOutcome:
		decode(s, raw, func(o signals.DeliveryOutcome) { s.deliveryOutcome(now, o) })
	case signals.SignalTurnFinished:
		decode(s, raw, func(sig signals.TurnFinishedSignal) { s.turnFinished(now, sig) })
	default:
		return false
	}
	return true
}

// decode hands raw to h as a T; a payload that does not decode is logged and dropped (a
// signal cannot be refused).
func decode[T any](s *Core, raw json.RawMessage, h func(T)) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		s.env.Warn("dropping malformed signal", "error", err)
		return
	}
	h(v)
}

// New starts a run's core: from the state the previous run carried, or, for a
// new session, empty with session.started journaled.
func New(now time.Time, cfg Config, build Build, env Env, carried json.RawMessage) (*Core, error) {
	s := &Core{cfg: cfg, build: build, env: env}
	if len(carried) > 0 {
		if err := json.Unmarshal(carried, &s.sessionState); err != nil {
			return nil, err
		}
		s.Journal.Recount()
		s.Run++
		if s.Policy == nil { // carried by a version that had none
			s.Policy = &Policy{Level: cfg.Policy}
		}
		return s, nil
	}
	s.Run = 1
	s.Queue = NewQueue(cfg.QueueLimit)
	s.Steer = NewSteer()
	s.Journal = NewJournal(cfg.JournalSize)
	s.Resolved = NewDedupIndex[signals.PermissionResolution]()
	s.Policy = &Policy{Level: cfg.Policy}
	s.journal(now, signals.EventSessionStarted, 0, signals.SessionStartedData{Agent: sessionAgent(cfg.Agent), Workspace: cfg.Workspace, Run: 1, ForkOf: cfg.ForkOf, Access: cfg.Access})
	return s, nil
}

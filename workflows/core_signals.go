package workflows

// The session core's signals: the turn runner's reports and the signal twins of the
// updates. A signal cannot be refused: a rejected twin changes no state beyond the one
// prompt.rejected / steer.rejected event that tells its sender why (contract §3), and a
// payload that does not decode is dropped with a warning.

import (
	"encoding/json"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// signalOrder lists the signals the core takes, in the order the shell drains them within a
// workflow task: a turn's start, its events, its requests, the outcomes of the steers it
// took (before its end: the runner sends them first), its end (turn_finished also waits for
// its last batch, whatever the order), then the clients' signals. The shell handles
// set_mcp_servers itself, after these (its policy check is a SideEffect).
var signalOrder = []string{
	signals.SignalTurnStarted,
	signals.SignalTurnEvents,
	signals.SignalTurnLimited,
	signals.SignalPermissionRequested,
	signals.SignalElicitationRequested,
	signals.SignalDeliveryOutcome,
	signals.SignalTurnFinished,
	signals.UpdatePrompt,
	signals.UpdateSteer,
	signals.UpdateCancel,
	signals.UpdatePermissionRespond,
	signals.UpdatePermissionForget,
	signals.UpdateSetPolicy,
	signals.UpdateAttach,
	signals.UpdateDetach,
	signals.UpdateClose,
	signals.UpdateSetMode,
	signals.UpdateSetConfigOption,
	signals.SignalWake, // counted, nothing else: its workflow task is the point (versioning.go)
	signals.UpdateRetryNow,
	signals.UpdateElicitationRespond,
}

// signal takes one signal of signalOrder.
func (s *sessionCore) signal(now time.Time, name string, raw json.RawMessage) {
	s.signalsSeen++
	if name == signals.SignalWake {
		// A worker of the current version found this run on another: move at the next idle
		// safe point, also on a server that does not flag the target's change (versioning.go).
		s.UpgradeWanted = true
		return
	}
	if !s.runnerSignal(now, name, raw) {
		s.twinSignal(now, name, raw)
	}
}

// runnerSignal takes a signal of the turn runner, reporting whether name is one.
func (s *sessionCore) runnerSignal(now time.Time, name string, raw json.RawMessage) bool {
	switch name {
	case signals.SignalTurnStarted:
		decode(s, raw, func(sig signals.TurnStartedSignal) { s.turnStarted(now, sig) })
	case signals.SignalTurnEvents:
		decode(s, raw, func(sig signals.TurnEventsSignal) { s.turnEvents(now, sig) })
	case signals.SignalPermissionRequested:
		decode(s, raw, func(sig signals.PermissionRequestedSignal) { s.permissionRequested(now, sig) })
	case signals.SignalElicitationRequested:
		decode(s, raw, func(sig signals.ElicitationRequestedSignal) { s.elicitationRequested(now, sig) })
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

// twinSignal takes the signal twin of an update: a rejected one changes nothing beyond its
// prompt.rejected or steer.rejected event.
func (s *sessionCore) twinSignal(now time.Time, name string, raw json.RawMessage) {
	switch name {
	case signals.UpdatePrompt:
		decode(s, raw, func(req signals.PromptRequest) {
			if rej := s.checkPrompt(req); rej != nil {
				s.journal(now, signals.EventPromptRejected, 0, signals.RejectedData{ClientMessageID: req.ClientMessageID, Type: rej.Type, Message: rej.Message})
				return
			}
			_, _ = s.prompt(now, req)
		})
	case signals.UpdateSteer:
		decode(s, raw, func(req signals.SteerRequest) {
			if err := s.validateSteer(req); err != nil {
				rej, _ := signals.AsRejection(err)
				s.journal(now, signals.EventSteerRejected, s.Steer.TurnID, signals.RejectedData{ClientMsgID: req.ClientMsgID, Type: rej.Type, Message: rej.Message, Details: rej.Details})
				s.env.steered(rej.Type)
				return
			}
			_, _ = s.steer(now, req)
		})
	case signals.UpdateCancel:
		decode(s, raw, func(req signals.CancelRequest) {
			if s.validateCancel(req) == nil {
				_, _ = s.cancel(now, req)
			}
		})
	case signals.UpdatePermissionRespond:
		decode(s, raw, func(req signals.PermissionRespondRequest) {
			if s.validateRespond(req) == nil {
				_, _ = s.respond(now, req)
			}
		})
	case signals.UpdatePermissionForget:
		decode(s, raw, func(req signals.PermissionForgetRequest) { _, _ = s.forget(now, req) })
	case signals.UpdateSetPolicy:
		decode(s, raw, func(req signals.SetPolicyRequest) { _, _ = s.setPolicy(now, req) })
	case signals.UpdateAttach:
		decode(s, raw, func(req signals.AttachRequest) { _, _ = s.attach(now, req) })
	case signals.UpdateDetach:
		decode(s, raw, func(req signals.DetachRequest) { _, _ = s.detach(now, req) })
	case signals.UpdateClose:
		decode(s, raw, func(req signals.CloseRequest) { _, _ = s.close(now, req) })
	case signals.UpdateSetMode:
		decode(s, raw, func(req signals.SetModeRequest) {
			if s.checkSetMode(req) == nil {
				_, _ = s.setMode(now, req)
			}
		})
	case signals.UpdateSetConfigOption:
		decode(s, raw, func(req signals.SetConfigOptionRequest) {
			if s.checkSetConfig(req) == nil {
				_, _ = s.setConfig(now, req)
			}
		})
	case signals.UpdateElicitationRespond:
		decode(s, raw, func(req signals.ElicitationRespondRequest) {
			if s.validateElicitationRespond(req) == nil {
				_, _ = s.elicitationRespond(now, req)
			}
		})
	case signals.UpdateRetryNow:
		decode(s, raw, func(req signals.RetryNowRequest) {
			if s.checkRetryNow(req) == nil {
				_, _ = s.retryNow(now, req)
			}
		})
	}
}

// decode hands raw to h as a T; a payload that does not decode is logged and dropped (a
// signal cannot be refused).
func decode[T any](s *sessionCore, raw json.RawMessage, h func(T)) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		s.env.warn("dropping malformed signal", "error", err)
		return
	}
	h(v)
}

// newSessionCore starts a run's core: from the state the previous run carried, or, for a
// new session, empty with session.started journaled.
func newSessionCore(now time.Time, cfg Config, adm Admission, env sessionEnv, carried json.RawMessage) (*sessionCore, error) {
	s := &sessionCore{cfg: cfg, adm: adm, env: env}
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
	s.journal(now, signals.EventSessionStarted, 0, signals.SessionStartedData{Agent: sessionAgent(cfg.Agent), Workspace: cfg.Workspace, Run: 1})
	return s, nil
}

package session

// A permission request's life in the session core (contract §6 "Permissions", §7). The
// agent's session/request_permission reaches the session as permission_requested; it is
// journaled, then decided by the policy (permission.go: the level, the remembered tools, the
// paths outside the workspace) at once, or asked: the turn's clock pauses and the session is
// suspended until it is resolved, exactly once and the first answer winning, by a person's
// permission_respond, its deadline (permission_timeout, failing closed), or the turn's
// cancel, end or restart. A request a restart withdrew is remembered, so an answer to its id
// reaches the request the next attempt asks in its place. The resolution is delivered into
// the turn (the delivery lane, core_delivery.go). set_policy and permission_forget change
// the policy the next request is decided by.
//
// The life a permission request shares with the agent's questions (request_elicitation.go)
// is split between the two files: cancelPermissions resolves the open requests of both
// kinds, asksTurn (request_elicitation.go) says whether either kind waits, and the alarm
// (core_belts.go) names the earliest deadline of both.

import (
	"encoding/json"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// openPermission is a permission request waiting for an answer.
type openPermission struct {
	RequestID string                     `json:"request_id"`
	TurnID    int64                      `json:"turn_id"`
	Attempt   int32                      `json:"attempt"`
	ToolCall  json.RawMessage            `json:"tool_call"`
	Options   []signals.PermissionOption `json:"options"`
	Deadline  time.Time                  `json:"deadline"`
	// ToolName is the runner's name of the tool (signals.PermissionRequestedSignal).
	ToolName string `json:"tool_name,omitempty"`
}

func (s *Core) permissionRequested(now time.Time, sig signals.PermissionRequestedSignal) {
	t := s.LiveTurnByID(sig.TurnID)
	if t == nil || sig.Attempt < t.Attempt || s.findPermission(sig.RequestID) >= 0 {
		return
	}
	if _, done := s.Resolved.Get(sig.RequestID); done {
		return
	}
	s.advanceAttempt(now, t, sig.Attempt)
	p := openPermission{
		RequestID: sig.RequestID, TurnID: sig.TurnID, Attempt: sig.Attempt,
		ToolCall: sig.ToolCall, Options: sig.Options, ToolName: sig.ToolName,
		Deadline: now.Add(s.cfg.PermissionTimeout),
	}
	s.Permissions = append(s.Permissions, p)
	s.journal(now, signals.EventPermissionRequested, p.TurnID, signals.PermissionRequestedData{
		RequestID: p.RequestID, ToolCall: p.ToolCall, Options: p.Options, Deadline: p.Deadline, Paths: sig.Paths,
	})
	// Every request is journaled; one the policy or a rule decides resolves in the same
	// step, so nobody is asked and the session is never suspended for it.
	if res, ask := s.Policy.DecideNamed(p.RequestID, p.ToolCall, p.ToolName, p.Options, sig.Paths); !ask {
		s.resolve(now, len(s.Permissions)-1, res, true)
		return
	}
	s.pauseClockIfAsked(now)
}

func (s *Core) findPermission(id string) int {
	for i, p := range s.Permissions {
		if p.RequestID == id {
			return i
		}
	}
	return -1
}

// checkRespond decides a permission answer without changing anything: the existing
// resolution for a request already resolved, a new one otherwise.
func (s *Core) checkRespond(req signals.PermissionRespondRequest) (signals.PermissionResolution, bool, *signals.Rejection) {
	if req.RequestID == "" {
		return signals.PermissionResolution{}, false, signals.Reject(signals.RejectInvalidRequest, "request_id is required")
	}
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return signals.PermissionResolution{}, false, rej
	}
	if prev, ok := s.Resolved.Get(req.RequestID); ok {
		// A request withdrawn by a restart and asked again: the answer goes to the new one.
		if prev.DecidedBy != signals.DecidedByRestart {
			return prev, true, nil
		}
		again := s.reasked(req.RequestID)
		if again == "" {
			return prev, true, nil
		}
		via := req.RequestID
		req.RequestID = again
		res, dup, rej := s.checkRespond(req)
		if !dup {
			res.Via = via
		}
		return res, dup, rej
	}
	i := s.findPermission(req.RequestID)
	if i < 0 {
		return signals.PermissionResolution{}, false, signals.Reject(signals.RejectUnknownRequest, "no permission request %q is open", req.RequestID)
	}
	res := signals.PermissionResolution{RequestID: req.RequestID, DecidedBy: signals.DecidedByUser, AnsweredBy: req.AnsweredBy}
	switch req.Outcome {
	case signals.OutcomeCancelled:
		res.Outcome = signals.OutcomeCancelled
		return res, false, nil
	case "", signals.OutcomeSelected:
	default:
		return res, false, signals.Reject(signals.RejectInvalidRequest, "outcome %q: want selected or cancelled", req.Outcome)
	}
	for _, o := range s.Permissions[i].Options {
		if o.OptionID == req.OptionID {
			res.Outcome, res.OptionID = signals.OutcomeSelected, o.OptionID
			res.Remember = o.Kind == "allow_always"
			return res, false, nil
		}
	}
	return res, false, signals.Reject(signals.RejectInvalidOption, "request %s offers no option %q", req.RequestID, req.OptionID)
}

func (s *Core) respond(now time.Time, req signals.PermissionRespondRequest) (signals.PermissionRespondResult, error) {
	res, done, rej := s.checkRespond(req)
	if rej != nil {
		return signals.PermissionRespondResult{}, rej
	}
	if !done {
		s.resolve(now, s.findPermission(res.RequestID), res, true)
	}
	return signals.PermissionRespondResult{RequestID: res.RequestID, Resolution: res}, nil
}

// resolve closes open request i with res, journals it, and (when the agent still waits for
// the answer) queues its delivery.
func (s *Core) resolve(now time.Time, i int, res signals.PermissionResolution, deliver bool) {
	p := s.Permissions[i]
	s.Permissions = append(s.Permissions[:i:i], s.Permissions[i+1:]...)
	s.Resolved.Put(p.RequestID, res)
	if res.Remember {
		s.Policy.Remember(RuleKey(p.ToolCall, p.ToolName))
	}
	s.journal(now, signals.EventPermissionResolved, p.TurnID, res)
	s.timePermissionWait(now, p, res)
	s.pauseClockIfAsked(now)
	if deliver && s.Turn != nil && s.Turn.TurnID == p.TurnID {
		s.queueDelivery(signals.Delivery{Kind: signals.DeliverPermission, RequestID: p.RequestID, Outcome: res.Outcome, OptionID: res.OptionID})
	}
}

// cancelPermissions resolves every open request of turnID cancelled, decided by decidedBy
// (cancel, or restart for a lost attempt's) for reason: the runner answers the agent itself
// when its turn is cancelled or ends. A request a restart withdraws is remembered, so that
// an answer to its id reaches the request the next attempt asks in its place.
func (s *Core) cancelPermissions(now time.Time, turnID int64, decidedBy, reason string) {
	for i := 0; i < len(s.Permissions); {
		p := s.Permissions[i]
		if p.TurnID != turnID {
			i++
			continue
		}
		if decidedBy == signals.DecidedByRestart {
			s.Withdrawn = append(s.Withdrawn, withdrawnRequest{RequestID: p.RequestID, TurnID: p.TurnID, Key: ToolKey(p.ToolCall)})
			if len(s.Withdrawn) > maxWithdrawn {
				s.Withdrawn = s.Withdrawn[len(s.Withdrawn)-maxWithdrawn:]
			}
		}
		s.resolve(now, i, signals.PermissionResolution{
			RequestID: p.RequestID, Outcome: signals.OutcomeCancelled, DecidedBy: decidedBy, Reason: reason,
		}, false)
	}
	s.cancelElicitations(now, turnID, decidedBy, reason) // a person's request of either kind
}

// withdrawnRequest is a request a restart withdrew: its id, its turn and its tool's key.
type withdrawnRequest struct {
	RequestID string `json:"request_id"`
	TurnID    int64  `json:"turn_id"`
	Key       string `json:"key"`
}

// maxWithdrawn bounds the withdrawn requests remembered.
const maxWithdrawn = 32

// replaces lists the withdrawn requests open request p asks again.
func (s *Core) replaces(p openPermission) []string {
	var out []string
	for _, w := range s.Withdrawn {
		if w.Key != "" && w.TurnID == p.TurnID && s.reasked(w.RequestID) == p.RequestID {
			out = append(out, w.RequestID)
		}
	}
	return out
}

// reasked returns the open request that asks again what withdrawn request id asked: the same
// turn, the same tool (key), the newest first. "" when there is none.
func (s *Core) reasked(id string) string {
	for _, w := range s.Withdrawn {
		if w.RequestID != id || w.Key == "" {
			continue
		}
		for i := len(s.Permissions) - 1; i >= 0; i-- {
			p := s.Permissions[i]
			if p.TurnID == w.TurnID && ToolKey(p.ToolCall) == w.Key {
				return p.RequestID
			}
		}
	}
	return ""
}

// pendingPermissions lists the open requests for status, without tool arguments.
func (s *Core) pendingPermissions() []signals.PendingPermission {
	out := make([]signals.PendingPermission, 0, len(s.Permissions))
	for _, p := range s.Permissions {
		var tc struct {
			Title string `json:"title"`
			Kind  string `json:"kind"`
		}
		_ = json.Unmarshal(p.ToolCall, &tc)
		out = append(out, signals.PendingPermission{
			RequestID: p.RequestID, TurnID: p.TurnID, Title: tc.Title, Kind: tc.Kind, Options: p.Options, Deadline: p.Deadline,
			Replaces: s.replaces(p),
		})
	}
	return out
}

// expirePermissions resolves every open request whose deadline has passed, failing closed
// (Expire: the reject option, or cancelled).
func (s *Core) expirePermissions(now time.Time) {
	for i := 0; i < len(s.Permissions); {
		p := s.Permissions[i]
		if p.Deadline.After(now) {
			i++
			continue
		}
		s.resolve(now, i, Expire(p.RequestID, p.Options), true)
	}
}

// timePermissionWait records how long an asked permission request waited, at its
// resolution. A request the policy or a rule decided was never asked and is not timed. The
// request's deadline is permission_timeout after it arrived, so its arrival needs no state
// of its own.
func (s *Core) timePermissionWait(now time.Time, p openPermission, res signals.PermissionResolution) {
	if res.DecidedBy == signals.DecidedByPolicy || res.DecidedBy == signals.DecidedByRule {
		return
	}
	s.metrics = append(s.metrics, Metric{Name: MetricPermissionWaits, Tags: map[string]string{"decided_by": res.DecidedBy}, Timer: true,
		Duration: max(now.Sub(p.Deadline.Add(-s.cfg.PermissionTimeout)), time.Duration(0))})
}

// --- the policy: its level and the remembered tools ---

func checkPolicyLevel(level string) *signals.Rejection {
	if !ValidPolicyLevel(level) {
		return signals.Reject(signals.RejectInvalidRequest, "policy %q: want allow_all, ask_for_risky or ask_always", level)
	}
	return nil
}

// checkPolicyCeiling refuses allow_all on a session whose agent profile forbids it (the
// worker's operator's ceiling, reported with the agent's offer).
func (s *Core) checkPolicyCeiling(level string) *signals.Rejection {
	if c := s.policyCeiling(); c != "" && level == signals.PolicyAllowAll {
		return signals.Reject(signals.RejectForbidden, "policy allow_all: this worker's operator forbids it for agent profile %q: at most %s", s.cfg.Agent, c)
	}
	return nil
}

func (s *Core) policyCeiling() string {
	if s.Settings == nil {
		return ""
	}
	return s.Settings.Offer.PolicyCeiling
}

// keepUnderCeiling lowers an allow_all session to its profile's ceiling when the runner
// reports one, before any request of the agent's is decided: journaled as the ceiling's
// change of the policy.
func (s *Core) keepUnderCeiling(now time.Time) {
	c := s.policyCeiling()
	if c == "" || s.Policy.Level != signals.PolicyAllowAll {
		return
	}
	prev := s.Policy.Level
	s.Policy.Level = c
	s.journal(now, signals.EventPolicyChanged, s.turnID(), signals.PolicyChangedData{Level: c, Previous: prev, By: "the agent profile's ceiling (allow_all: false)"})
}

func (s *Core) setPolicy(now time.Time, req signals.SetPolicyRequest) (signals.SetPolicyResult, error) {
	if prev := s.Policy.Level; prev != req.Level {
		s.Policy.Level = req.Level
		s.journal(now, signals.EventPolicyChanged, s.turnID(), signals.PolicyChangedData{Level: req.Level, Previous: prev, ViewerID: req.ViewerID, By: req.By})
		if req.Level != signals.PolicyAllowAll {
			s.governMode(now, req.ViewerID)
		}
	}
	return signals.SetPolicyResult{Level: s.Policy.Level}, nil
}

func (s *Core) forget(now time.Time, req signals.PermissionForgetRequest) (signals.PermissionForgetResult, error) {
	forgotten := s.Policy.Forget(req.Tool)
	if forgotten {
		s.journal(now, signals.EventPermissionForgotten, s.turnID(), signals.PermissionForgottenData(req))
	}
	return signals.PermissionForgetResult{Forgotten: forgotten}, nil
}

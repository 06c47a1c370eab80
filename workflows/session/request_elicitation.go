package session

// Elicitation in the session core (contract §11 "A person's request"): a question the agent
// asks a person lives the life of a permission request. It is journaled
// (elicitation.requested), pauses the turn's clock and suspends the session while it waits,
// is resolved exactly once (elicitation.resolved) by the first valid answer (its content
// checked against the request's schema: a bad answer is refused and the request stays
// open), by its deadline (permission_timeout, failing closed: cancel), or by the turn's
// cancel, end or restart (cancelPermissions resolves both kinds), and its answer is
// delivered into the turn and names who gave it (answered_by).

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// openElicitation is an elicitation waiting for an answer.
type openElicitation struct {
	signals.ElicitationRequestedSignal
	Deadline time.Time `json:"deadline"`
}

func (s *Core) findElicitation(id string) int {
	for i, e := range s.Elicitations {
		if e.RequestID == id {
			return i
		}
	}
	return -1
}

func (s *Core) elicitationResolved() *DedupIndex[signals.ElicitationResolution] {
	if s.ElicitationsDone == nil { // a session older than elicitation
		d := NewDedupIndex[signals.ElicitationResolution]()
		s.ElicitationsDone = &d
	}
	return s.ElicitationsDone
}

// elicitationRequested takes the runner's elicitation_requested.
func (s *Core) elicitationRequested(now time.Time, sig signals.ElicitationRequestedSignal) {
	t := s.LiveTurnByID(sig.TurnID)
	if t == nil || sig.Attempt < t.Attempt || s.findElicitation(sig.RequestID) >= 0 {
		return
	}
	if _, done := s.elicitationResolved().Get(sig.RequestID); done {
		return
	}
	s.advanceAttempt(now, t, sig.Attempt)
	e := openElicitation{ElicitationRequestedSignal: sig, Deadline: now.Add(s.cfg.PermissionTimeout)}
	s.Elicitations = append(s.Elicitations, e)
	s.journal(now, signals.EventElicitationRequested, e.TurnID, signals.ElicitationRequestedData{
		RequestID: e.RequestID, TurnID: e.TurnID, Mode: e.Mode, Message: e.Message, Schema: e.Schema,
		URL: e.URL, ElicitationID: e.ElicitationID, ToolCallID: e.ToolCallID, Deadline: e.Deadline,
	})
	s.pauseClockIfAsked(now)
}

// elicitationCompleted journals the agent's elicitation/complete of a url elicitation, once
// per elicitation id (a retry's report is the same completion). The turn may have ended by
// then: the runner's report of a notification and its turn's end race each other.
func (s *Core) elicitationCompleted(now time.Time, sig signals.ElicitationCompletedSignal) {
	if sig.ElicitationID == "" || sig.TurnID <= 0 {
		return
	}
	d := signals.ElicitationCompletedData{ElicitationID: sig.ElicitationID}
	for _, ev := range s.Journal.Events {
		switch ev.Kind {
		case signals.EventElicitationCompleted:
			var done signals.ElicitationCompletedData
			if json.Unmarshal(ev.Data, &done) == nil && done.ElicitationID == sig.ElicitationID {
				return
			}
		case signals.EventElicitationRequested:
			var req signals.ElicitationRequestedData
			if json.Unmarshal(ev.Data, &req) == nil && req.ElicitationID == sig.ElicitationID {
				d.RequestID = req.RequestID
			}
		}
	}
	s.journal(now, signals.EventElicitationCompleted, sig.TurnID, d)
}

// checkElicitationRespond decides an answer without changing anything: the existing
// resolution for a request already resolved, a new one otherwise.
func (s *Core) checkElicitationRespond(req signals.ElicitationRespondRequest) (signals.ElicitationResolution, bool, *signals.Rejection) {
	if req.RequestID == "" {
		return signals.ElicitationResolution{}, false, signals.Reject(signals.RejectInvalidRequest, "request_id is required")
	}
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return signals.ElicitationResolution{}, false, rej
	}
	if prev, ok := s.elicitationResolved().Get(req.RequestID); ok {
		return prev, true, nil
	}
	i := s.findElicitation(req.RequestID)
	if i < 0 {
		return signals.ElicitationResolution{}, false, signals.Reject(signals.RejectUnknownRequest, "no question %q is open", req.RequestID)
	}
	e := s.Elicitations[i]
	res := signals.ElicitationResolution{RequestID: req.RequestID, Action: req.Action, DecidedBy: signals.DecidedByUser, AnsweredBy: answeredBy(req.AnsweredBy, req.ViewerID)}
	switch req.Action {
	case signals.ActionAccept:
		if e.Mode == signals.ElicitationForm {
			if err := signals.CheckElicitationContent(e.Schema, req.Content); err != nil {
				return res, false, signals.Reject(signals.RejectInvalidRequest, "answer to %s does not fit its form: %v", req.RequestID, err)
			}
			res.Content = req.Content
		}
	case signals.ActionDecline, signals.ActionCancel:
		if len(req.Content) > 0 && string(req.Content) != "null" {
			return res, false, signals.Reject(signals.RejectInvalidRequest, "a %s carries no content", req.Action)
		}
	default:
		return res, false, signals.Reject(signals.RejectInvalidRequest, "action %q: want accept, decline or cancel", req.Action)
	}
	return res, false, nil
}

func (s *Core) elicitationRespond(now time.Time, req signals.ElicitationRespondRequest) (signals.ElicitationRespondResult, error) {
	res, done, rej := s.checkElicitationRespond(req)
	if rej != nil {
		return signals.ElicitationRespondResult{}, rej
	}
	if !done {
		s.resolveElicitation(now, s.findElicitation(res.RequestID), res, true)
	}
	return signals.ElicitationRespondResult{RequestID: res.RequestID, Resolution: res}, nil
}

// resolveElicitation closes open elicitation i with res, journals it, and (when the agent
// still waits for the answer) queues its delivery.
func (s *Core) resolveElicitation(now time.Time, i int, res signals.ElicitationResolution, deliver bool) {
	e := s.Elicitations[i]
	s.Elicitations = append(s.Elicitations[:i:i], s.Elicitations[i+1:]...)
	s.elicitationResolved().Put(e.RequestID, res)
	s.journal(now, signals.EventElicitationResolved, e.TurnID, res)
	s.pauseClockIfAsked(now)
	if deliver && s.Turn != nil && s.Turn.TurnID == e.TurnID {
		s.queueDelivery(signals.Delivery{Kind: signals.DeliverElicitation, RequestID: e.RequestID, Action: res.Action, Content: res.Content})
	}
}

// cancelElicitations resolves every open elicitation of turnID cancelled (see
// cancelPermissions: the runner answers the agent itself).
func (s *Core) cancelElicitations(now time.Time, turnID int64, decidedBy, reason string) {
	for i := 0; i < len(s.Elicitations); {
		if s.Elicitations[i].TurnID != turnID {
			i++
			continue
		}
		s.resolveElicitation(now, i, signals.ElicitationResolution{
			RequestID: s.Elicitations[i].RequestID, Action: signals.ActionCancel, DecidedBy: decidedBy, Reason: reason,
		}, false)
	}
}

// expireElicitations fails closed the elicitations whose deadline passed: cancel.
func (s *Core) expireElicitations(now time.Time) {
	for i := 0; i < len(s.Elicitations); {
		e := s.Elicitations[i]
		if e.Deadline.After(now) {
			i++
			continue
		}
		s.resolveElicitation(now, i, signals.ElicitationResolution{
			RequestID: e.RequestID, Action: signals.ActionCancel, DecidedBy: signals.DecidedByDeadline, Reason: "nobody answered by " + e.Deadline.UTC().Format("15:04:05 UTC"),
		}, true)
	}
}

// asksTurn reports whether an open request of either kind belongs to turnID.
func (s *Core) asksTurn(turnID int64) bool {
	for _, p := range s.Permissions {
		if p.TurnID == turnID {
			return true
		}
	}
	for _, e := range s.Elicitations {
		if e.TurnID == turnID {
			return true
		}
	}
	return false
}

// pendingElicitations lists the open elicitations for status.
func (s *Core) pendingElicitations() []signals.PendingElicitation {
	if len(s.Elicitations) == 0 {
		return nil
	}
	out := make([]signals.PendingElicitation, 0, len(s.Elicitations))
	for _, e := range s.Elicitations {
		out = append(out, signals.PendingElicitation{
			RequestID: e.RequestID, TurnID: e.TurnID, Mode: e.Mode, Message: e.Message, Schema: e.Schema,
			URL: e.URL, ToolCallID: e.ToolCallID, Deadline: e.Deadline,
		})
	}
	return out
}

// elicitationDetails are the Current Details lines of the open elicitations.
func (s *Core) elicitationDetails() string {
	out := ""
	for _, e := range s.Elicitations {
		what := "*" + e.Message + "*"
		switch {
		case s.build.Confidential:
			what = "a question"
		case e.Mode == signals.ElicitationURL:
			what += " (open " + e.URL + ")"
		}
		out += fmt.Sprintf("\n\nwaiting for an answer to %s (`%s`, turn %d) until %s — `starter answer --session %s %s ...`",
			what, e.RequestID, e.TurnID, e.Deadline.UTC().Format("2006-01-02 15:04:05 UTC"), s.cfg.SessionID, e.RequestID)
	}
	return out
}

package session

// A client's requests on the session's turns (contract §3, §6 "Turns", "Steer", "Cancel",
// "Close"), each a check (the validator: it decides and changes nothing) and an apply:
// prompt queues a turn; steer takes the compare-and-swap of steer.go and queues its delivery;
// cancel marks the live turn's cancel wanted (turnCancel), which next turns into the
// cancel of the shell's drive of it; close cancels the turn and, once nothing is in
// flight, drops the queue (closeSession).

import (
	"strconv"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// --- prompt ---

func (s *Core) checkPrompt(req signals.PromptRequest) *signals.Rejection {
	if s.Closing {
		return signals.Reject(signals.RejectSessionClosed, "session is closed")
	}
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return rej
	}
	_, rej := s.Queue.Check(req, s.busy())
	return rej
}

func (s *Core) prompt(now time.Time, req signals.PromptRequest) (signals.PromptResult, error) {
	res, rej := s.Queue.Offer(req, s.busy())
	if rej != nil {
		return res, rej
	}
	if !res.Duplicate {
		text, cut := journalText(req.Text)
		s.journal(now, signals.EventPromptAccepted, res.TurnID, signals.PromptAcceptedData{
			ClientMessageID: req.ClientMessageID, Text: text, TextTruncated: cut, Position: res.Position, By: req.By,
		})
	}
	return res, nil
}

func journalText(text string) (string, bool) {
	if len(text) <= signals.MaxJournalTextBytes {
		return text, false
	}
	return text[:signals.MaxJournalTextBytes], true
}

// --- steer ---

func (s *Core) checkSteer(req signals.SteerRequest) *signals.Rejection {
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return rej
	}
	if err := signals.ValidateBy(req.By); err != nil {
		return signals.Reject(signals.RejectInvalidRequest, "%v", err)
	}
	_, rej := s.Steer.Decide(req, s.steerChannel())
	return rej
}

func (s *Core) steer(now time.Time, req signals.SteerRequest) (signals.SteerResult, error) {
	res, rej := s.Steer.Accept(req, s.steerChannel())
	if rej != nil {
		return res, rej
	}
	s.metric(MetricSteers, map[string]string{"outcome": res.Outcome})
	if res.Outcome == signals.SteerAccepted {
		text, cut := journalText(req.Text)
		s.journal(now, signals.EventSteerAccepted, res.Ref.TurnID, signals.SteerAcceptedData{
			Ref: res.Ref, Text: text, TextTruncated: cut, NextExpectedTurnID: res.NextExpectedTurnID, By: req.By,
		})
		s.queueDelivery(signals.Delivery{Kind: signals.DeliverSteer, Text: req.Text, Offset: res.Ref.Offset})
	}
	return res, nil
}

// --- cancel and close ---

func (s *Core) checkCancel(req signals.CancelRequest) *signals.Rejection {
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return rej
	}
	if err := signals.ValidateBy(req.By); err != nil {
		return signals.Reject(signals.RejectInvalidRequest, "%v", err)
	}
	if s.Turn == nil || (req.TurnID != 0 && req.TurnID != s.Turn.TurnID) {
		return signals.Reject(signals.RejectNoLiveTurn, "no turn %s is running", turnLabel(req.TurnID))
	}
	return nil
}

func turnLabel(id int64) string {
	if id == 0 {
		return "at all"
	}
	return strconv.FormatInt(id, 10)
}

func (s *Core) cancel(now time.Time, req signals.CancelRequest) (signals.CancelResult, error) {
	if s.Turn.Cancel != cancelNone {
		return signals.CancelResult{Outcome: signals.CancelAlreadyCancelling}, nil
	}
	s.startCancel(now, "cancel", answeredBy(req.By, req.ViewerID))
	return signals.CancelResult{Outcome: signals.CancelCancelling}, nil
}

// startCancel marks the live turn cancelling; the main loop sends the cancel request. by
// names who cancelled, when a person or client did.
func (s *Core) startCancel(now time.Time, reason, by string) {
	s.Turn.Cancel, s.Turn.CancelReason = cancelWanted, reason
	s.GraceUntil = nil
	s.Steer.Halt()
	s.journal(now, signals.EventTurnCancelling, s.Turn.TurnID, signals.TurnCancellingData{Reason: reason, By: by})
	who := reason // grace, deadline, close: the system's
	if reason == "cancel" {
		who = "user" // a person's (or a client's) cancel
	}
	s.cancelPermissions(now, s.Turn.TurnID, signals.DecidedByCancel, who)
	if s.Turn.Finished == nil {
		s.queueDelivery(signals.Delivery{Kind: signals.DeliverCancel})
	}
}

func (s *Core) close(now time.Time, req signals.CloseRequest) (signals.CloseResult, error) {
	if s.Closing {
		return signals.CloseResult{}, nil
	}
	by := req.By
	if signals.ValidateBy(by) != nil {
		by = "" // close takes no refusal: a name that cannot be journaled is left out
	}
	s.Closing, s.CloseReason, s.CloseBy = true, req.Reason, by
	s.Delete, s.DeleteWorkspace = req.Delete || req.DeleteWorkspace, req.DeleteWorkspace
	if s.Turn != nil && s.Turn.Cancel == cancelNone {
		s.startCancel(now, "close", by)
	}
	return signals.CloseResult{}, nil
}

// closeSession drops the queue and journals session.closed (Close).
func (s *Core) closeSession(now time.Time) {
	dropped := s.Queue.Drain()
	s.journal(now, signals.EventSessionClosed, 0, signals.SessionClosedData{Reason: s.CloseReason, By: s.CloseBy, Dropped: dropped})
}

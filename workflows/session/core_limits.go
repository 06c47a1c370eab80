package session

// A limited turn in the session core (contract §11 "Limits"). The shell's drive of the
// turn reports that its attempt was limited (turn_limited) and waits on its timer
// (workflows/turn_limits.go); the session journals turn.limited once the attempt's last batches are in, shows the wait
// (state waiting_limit, status.waiting_limit, Current Details, TacpWaitingUntil), pauses the
// turn's clock, and takes no steers until the next attempt starts, whose turn.restarted
// says the wait is over. A person's retry_now is journaled turn.retry_now and handed to
// the drive (RetryNow); cancel ends the wait as it ends any turn.

import (
	"fmt"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// limitWait is the live turn's wait for a limit.
type limitWait struct {
	signals.TurnLimitedSignal
	// Journaled is set once turn.limited is in the journal (after the attempt's batches).
	Journaled bool `json:"journaled,omitempty"`
	// RetryNow is set by retry_now; RetryNowSent once the drive is told.
	RetryNow     bool   `json:"retry_now,omitempty"`
	RetryNowBy   string `json:"retry_now_by,omitempty"`
	RetryNowSent bool   `json:"retry_now_sent,omitempty"`
}

// turnLimited takes turn_limited: attempt sig.Attempt was limited and the turn waits.
func (s *Core) turnLimited(now time.Time, sig signals.TurnLimitedSignal) {
	t := s.LiveTurnByID(sig.TurnID)
	if t == nil || sig.Attempt < t.Attempt || t.Finished != nil || (t.Limited != nil && t.Limited.Attempt == sig.Attempt) {
		return
	}
	s.advanceAttempt(now, t, sig.Attempt)
	if sig.HostQueue != "" {
		s.AgentHost = sig.HostQueue
	}
	if sig.AgentSessionID != "" {
		s.AgentSessionID = sig.AgentSessionID
	}
	// The attempt is over: nothing can be delivered into it, and what it asked is moot.
	t.HostQueue = ""
	s.cancelPermissions(now, t.TurnID, signals.DecidedByCancel, "the turn was limited")
	t.Limited = &limitWait{TurnLimitedSignal: sig}
	t.LimitWaits++
	s.maybeLimited(now)
}

// maybeLimited journals the live turn's turn.limited once its attempt's batches are in.
func (s *Core) maybeLimited(now time.Time) {
	t := s.Turn
	if t == nil || t.Limited == nil || t.Limited.Journaled {
		return
	}
	if l := t.Limited; l.Attempt == t.Attempt && l.Batches > t.LastBatch {
		return
	}
	l := t.Limited
	l.Journaled = true
	s.journal(now, signals.EventTurnLimited, t.TurnID, signals.TurnLimitedData{
		Attempt: l.Attempt, Reason: l.Limit.Reason, Message: l.Limit.Message, RetryAt: l.Limit.RetryAt, Backoff: l.Limit.Backoff,
	})
	t.Clock.pause(now)
}

// limitEnded is called as the next attempt of a limited turn starts: the wait is over.
func (s *Core) limitEnded(now time.Time, t *LiveTurn) {
	if t.Limited == nil {
		return
	}
	t.Limited = nil
	s.pauseClockIfAsked(now)
}

// limitRestartCause is the turn.restarted cause of the attempt after a limited one.
func limitRestartCause(t *LiveTurn, attempt int32) string {
	l := t.Limited
	how := "its wait ended at " + l.Limit.RetryAt.UTC().Format("15:04:05 UTC")
	if l.RetryNow {
		how = "a retry now ended its wait"
		if l.RetryNowBy != "" {
			how = "a retry now by " + l.RetryNowBy + " ended its wait"
		}
	}
	return fmt.Sprintf("attempt %d was limited (%s); %s; attempt %d runs the prompt again", attempt-1, l.Limit.Reason, how, attempt)
}

func (s *Core) checkRetryNow(req signals.RetryNowRequest) *signals.Rejection {
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return rej
	}
	t := s.Turn
	if t == nil || t.Limited == nil || t.Cancel != cancelNone || (req.TurnID != 0 && req.TurnID != t.TurnID) {
		return signals.Reject(signals.RejectNoLiveTurn, "no turn %s waits for a limit", turnLabel(req.TurnID))
	}
	return nil
}

// retryNow ends the live turn's wait: the drive runs the prompt now.
func (s *Core) retryNow(now time.Time, req signals.RetryNowRequest) (signals.RetryNowResult, error) {
	t := s.Turn
	if !t.Limited.RetryNow {
		t.Limited.RetryNow, t.Limited.RetryNowBy = true, answeredBy(req.AnsweredBy, req.ViewerID)
		s.journal(now, signals.EventTurnRetryNow, t.TurnID, signals.RetryNowData{AnsweredBy: t.Limited.RetryNowBy})
	}
	return signals.RetryNowResult{TurnID: t.TurnID}, nil
}

// wantsRetryNow reports whether a retry_now waits to be handed to the drive.
func (s *Core) wantsRetryNow() bool {
	t := s.Turn
	return t != nil && t.Drive != driveAsked && t.Limited != nil && t.Limited.RetryNow && !t.Limited.RetryNowSent && t.Cancel == cancelNone
}

// limitView is status's waiting_limit.
func (s *Core) limitView() *signals.LimitWait {
	t := s.Turn
	if t == nil || t.Limited == nil || !t.Limited.Journaled {
		return nil
	}
	l := t.Limited
	return &signals.LimitWait{
		TurnID: t.TurnID, Attempt: l.Attempt, Reason: l.Limit.Reason, Message: l.Limit.Message,
		RetryAt: l.Limit.RetryAt, Backoff: l.Limit.Backoff, RetryNow: l.RetryNow,
	}
}

// waitingUntil is the TacpWaitingUntil search attribute: when the limited turn runs again.
func (s *Core) waitingUntil() *time.Time {
	if v := s.limitView(); v != nil {
		at := v.RetryAt
		return &at
	}
	return nil
}

// limitDetails is the Current Details line of a limited turn's wait.
func (s *Core) limitDetails() string {
	v := s.limitView()
	if v == nil {
		return ""
	}
	what := "the usage limit to reset"
	if v.Reason == signals.LimitService {
		what = "the model provider to recover"
	}
	how := ""
	if v.Backoff {
		how = " (backing off: the agent gave no reset time)"
	}
	msg := v.Message
	if s.build.Confidential {
		msg = string(v.Reason)
	}
	return fmt.Sprintf("\n\nwaiting for %s at %s%s — turn %d, attempt %d: %s — `starter retry --session %s` runs it now, `starter cancel --session %s` gives up",
		what, v.RetryAt.UTC().Format("2006-01-02 15:04:05 UTC"), how, v.TurnID, v.Attempt, msg, s.cfg.SessionID, s.cfg.SessionID)
}

// answeredBy names who answered a person's request: the name the client gave, else the
// viewer it attached as, else "" (unknown).
func answeredBy(name, viewerID string) string {
	if name != "" {
		return name
	}
	if viewerID != "" {
		return "viewer " + viewerID
	}
	return ""
}

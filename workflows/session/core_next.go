package session

// What the session does next (contract §6 "Continue-as-new, also mid-turn"): next, the one
// place that orders the commands Ready hands out, and the continue-as-new policy behind it:
// the run's budgets, the shorter run at idle, and the move to the deployment's new target
// version at an idle safe point (workflows/doc.go).

import "github.com/tacp-dev/tacp/signals"

// RunInfo is what the shell reads of the run for the core: the server's suggestion, the
// history's length, and whether the target version of the run's Worker Deployment changed
// (a pinned run's; always false on an unversioned worker).
type RunInfo struct {
	Suggested     bool
	HistoryLength int
	TargetChanged bool
}

// idleSafePoint: nothing of the session is in flight (no turn, no queued prompt, no
// delivery, no command awaiting its result), so a new run on another build can take over
// without replaying anything of this one.
func (s *Core) idleSafePoint() bool {
	return s.Turn == nil && len(s.Queue.Items) == 0 && len(s.Deliveries) == 0 && !s.Closing && s.pending == 0
}

// upgradeDue: the session moves to its deployment's new target version now, continuing as
// new with AutoUpgrade (workflows/doc.go).
func (s *Core) upgradeDue(info RunInfo) bool {
	return !s.build.NoUpgradeForTest && (info.TargetChanged || s.UpgradeWanted) && s.idleSafePoint()
}

func (s *Core) canContinueAsNew(info RunInfo) bool {
	if s.pending > 0 || (s.Turn != nil && s.Turn.Drive == driveAsked && s.Turn.Finished == nil) {
		return false // a command in flight must resolve in this run
	}
	if t := s.Turn; t != nil && t.Finished == nil && t.Limited == nil && t.HostQueue == "" {
		return false // the next run could not say which host to adopt the attempt from
	}
	idle := s.Turn == nil && len(s.Queue.Items) == 0 && !s.Closing
	return s.upgradeDue(info) ||
		info.Suggested ||
		info.HistoryLength >= s.cfg.MaxRunEvents ||
		// At idle a much shorter run is enough: sessions shed old history (and the
		// old-version branches it needs) soon after a deploy.
		(idle && info.HistoryLength >= s.cfg.MaxRunEvents/8) ||
		s.updates >= maxRunUpdates || s.signalsSeen >= maxRunSignals
}

// command is what the core asks its shell to do next (next).
type command int

const (
	cmdNone command = iota
	// cmdClose: the session is closing and nothing is in flight: closeSession, then end
	// the run once every handler has finished.
	cmdClose
	// cmdContinueAsNew: hand the carried state to a new run.
	cmdContinueAsNew
	// cmdRequestCancel: cancel the shell's drive of the live turn (requestCancel).
	cmdRequestCancel
	// cmdDeliver: send the oldest queued delivery into the live turn (takeDelivery).
	cmdDeliver
	// cmdStartTurn: start the next queued prompt's turn (beginTurn).
	cmdStartTurn
	// cmdRetryNow: tell the limited turn to run now (RetryNow).
	cmdRetryNow
	// cmdResumeTurn: go on with the turn an earlier run drove (resumeTurn).
	cmdResumeTurn
)

// next is the one place that says what the session does next, in order of precedence: the
// shell's main loop waits until it is not cmdNone (or a signal or the alarm arrives), and
// then carries it out.
func (s *Core) next(info RunInfo) command {
	switch {
	case s.Turn == nil && s.Closing && s.pending == 0:
		return cmdClose
	case s.needsResume():
		return cmdResumeTurn
	case s.canContinueAsNew(info):
		return cmdContinueAsNew
	case s.Turn != nil && s.Turn.Cancel == cancelWanted && s.Turn.Drive != driveAsked:
		return cmdRequestCancel
	case s.wantsRetryNow():
		return cmdRetryNow
	case s.wantsDelivery():
		return cmdDeliver
	case s.Turn == nil && len(s.Queue.Items) > 0 && !s.Closing:
		return cmdStartTurn
	}
	return cmdNone
}

// needsResume: the live turn is one an earlier run drove, and this run's shell does not
// drive it yet (the run continued as new while it ran).
func (s *Core) needsResume() bool {
	t := s.Turn
	return t != nil && t.Drive != driveAsked && t.Finished == nil && s.driving != t.TurnID
}

// resumeTurn is the ResumeTurn of the live turn (needsResume): adopt its attempt from the
// host that runs it, or wait out its limit.
func (s *Core) resumeTurn() ResumeTurn {
	t := s.Turn
	c := ResumeTurn{Input: *t.Input, Attempt: t.Attempt, HostQueue: t.HostQueue, LimitWaits: t.LimitWaits}
	if s.AgentSessionID != "" {
		// The attempt's prompt is in the agent session once the attempt sent a batch: a new
		// attempt loads it and goes on; before that it sends the prompt (a duplicate, never
		// a lost prompt).
		c.Resume = &signals.TurnProgress{AgentSessionID: s.AgentSessionID, PromptSent: t.LastBatch > 0}
	}
	if l := t.Limited; l != nil {
		sig := l.TurnLimitedSignal
		c.Limited, c.RetryNow = &sig, l.RetryNow
	}
	return c
}

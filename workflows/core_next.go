package workflows

// What the session does next (contract §6 "Continue-as-new, also mid-turn"): next, the one
// place that orders the commands Ready hands out, and the continue-as-new policy behind it:
// the run's budgets, the shorter run at idle, and the move to the deployment's new target
// version at an idle safe point (versioning.go).

// runInfo is what the shell reads of the run for the core: the server's suggestion, the
// history's length, and whether the target version of the run's Worker Deployment changed
// (a pinned run's; always false on an unversioned worker).
type runInfo struct {
	suggested     bool
	historyLength int
	targetChanged bool
}

// idleSafePoint: nothing of the session is in flight (no turn, no queued prompt, no
// delivery, no command awaiting its result), so a new run on another build can take over
// without replaying anything of this one.
func (s *sessionCore) idleSafePoint() bool {
	return s.Turn == nil && len(s.Queue.Items) == 0 && len(s.Deliveries) == 0 && !s.Closing && s.pending == 0
}

// upgradeDue: the session moves to its deployment's new target version now, continuing as
// new with AutoUpgrade (versioning.go).
func (s *sessionCore) upgradeDue(info runInfo) bool {
	return !s.build.NoUpgradeForTest && (info.targetChanged || s.UpgradeWanted) && s.idleSafePoint()
}

func (s *sessionCore) canContinueAsNew(info runInfo) bool {
	if s.pending > 0 || (s.Turn != nil && s.Turn.Child == childAsked && s.Turn.Finished == nil) {
		return false // a command in flight must resolve in this run
	}
	idle := s.Turn == nil && len(s.Queue.Items) == 0 && !s.Closing
	return s.upgradeDue(info) ||
		info.suggested ||
		info.historyLength >= s.cfg.MaxRunEvents ||
		// At idle a much shorter run is enough: sessions shed old history (and the
		// old-version branches it needs) soon after a deploy.
		(idle && info.historyLength >= s.cfg.MaxRunEvents/8) ||
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
	// cmdRequestCancel: request the cancel of the live turn's TurnWorkflow (requestCancel).
	cmdRequestCancel
	// cmdDeliver: send the oldest queued delivery into the live turn (takeDelivery).
	cmdDeliver
	// cmdStartTurn: start the next queued prompt's turn (beginTurn).
	cmdStartTurn
	// cmdRetryNow: signal the limited turn's TurnWorkflow to run now (sendRetryNow).
	cmdRetryNow
)

// next is the one place that says what the session does next, in order of precedence: the
// shell's main loop waits until it is not cmdNone (or a signal or the alarm arrives), and
// then carries it out.
func (s *sessionCore) next(info runInfo) command {
	switch {
	case s.Turn == nil && s.Closing && s.pending == 0:
		return cmdClose
	case s.canContinueAsNew(info):
		return cmdContinueAsNew
	case s.Turn != nil && s.Turn.Cancel == cancelWanted && s.Turn.Child != childAsked:
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

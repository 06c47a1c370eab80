package session

// The turn's life in the session core (contract §6 "Turns", §7 "A turn attempt", "Carried
// reports"). beginTurn makes the next queued prompt the live turn (LiveTurn) and hands the
// shell its input, for the shell's drive of the turn's RunTurn activity
// (workflows/turn_session.go); the drive's start and end come back (turnDrive: asked,
// running, ended). The turn runner's reports move the turn: turn_started and turn_events,
// numbered per attempt (a newer attempt supersedes the old one's output: turn.restarted),
// and turn_finished, which maybeFinish takes as the turn's end once every batch its attempt
// sent before it is in. What an agent says while no turn holds it is journaled between
// turns, once per agent process and batch (contract Glossary "Between").

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// LiveTurn is the running turn as the session knows it.
type LiveTurn struct {
	TurnID          int64     `json:"turn_id"`
	ClientMessageID string    `json:"client_message_id"`
	Attempt         int32     `json:"attempt"`
	HostQueue       string    `json:"host_queue,omitempty"`
	StartedAt       time.Time `json:"started_at"`
	// Drive is the life of the shell's drive of the turn as the session knows it
	// (turnDrive). Its JSON name is the one runs carry across continue-as-new.
	Drive turnDrive `json:"child,omitempty"`
	// Cancel is the life of the turn's cancel (turnCancel); CancelReason says who wanted it.
	Cancel       turnCancel `json:"cancel,omitempty"`
	CancelReason string     `json:"cancel_reason,omitempty"`
	// HostLost is set when a delivery found the attempt's host gone.
	HostLost bool `json:"host_lost,omitempty"`
	// HadViewer: grace applies only to a turn that has had a viewer.
	HadViewer bool `json:"had_viewer,omitempty"`
	// Background: the prompt said nobody follows the turn (PromptRequest.Unwatched). A
	// viewer may come and go; the turn never waits for one, so no grace applies to it.
	Background bool      `json:"background,omitempty"`
	Clock      turnClock `json:"clock"`
	// LastBatch is the watermark of turn_events for Attempt (batches are numbered from 1).
	LastBatch int64 `json:"last_batch"`
	// Finished holds a turn_finished that waits for its attempt's last batches.
	Finished *signals.TurnFinishedSignal `json:"finished,omitempty"`
	// Choices is what the turn's input carried of the clients' choices: every attempt's
	// runner applies these, so its report predates any choice made since (core_settings.go).
	Choices *signals.SessionChoices `json:"choices,omitempty"`
	// OutcomesDue is how long the turn's end waits for the outcomes of the steers it took
	// (set at its turn_finished); once Drive is driveOver no outcome can come any more.
	OutcomesDue *time.Time `json:"outcomes_due,omitempty"`
	// Limited is the turn's wait for a provider's limit (core_limits.go).
	Limited *limitWait `json:"limited,omitempty"`
	// LimitWaits counts the turn's waits for a limit (its backoff grows with them).
	LimitWaits int32 `json:"limit_waits,omitempty"`
	// Input is what a later run needs to go on with the turn after a continue-as-new
	// (ResumeTurn: adopt the running attempt, or wait out its limit).
	Input *signals.TurnInput `json:"input,omitempty"`
}

// turnDrive is the life of the shell's drive of a turn, as the session knows it. It only
// moves forward.
type turnDrive uint8

const (
	// driveAsked: beginTurn made the turn live and the StartTurn command is out; its
	// drive is not known to run yet (a continue-as-new waits, and no cancel is requested
	// of it).
	driveAsked turnDrive = iota
	// driveRunning: DriveStarted said this run drives the turn (driveStarted).
	driveRunning
	// driveOver: DriveEnded said the drive completed or ended cancelled while the turn's
	// end waited for the outcomes of the steers it took (driveEnded): none can come any
	// more. A drive ends only after it started, so driveOver always follows driveRunning.
	driveOver
)

var turnDriveNames = [...]string{driveAsked: "asked", driveRunning: "running", driveOver: "ended"}

func (c turnDrive) String() string { return enumName(turnDriveNames[:], c, "turnDrive") }

// MarshalText writes the name: the carried state reads "child":"running".
func (c turnDrive) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads a name MarshalText wrote.
func (c *turnDrive) UnmarshalText(b []byte) error {
	return unmarshalEnum(b, turnDriveNames[:], c, "turn drive")
}

// turnCancel is the life of a turn's cancel. It only moves forward.
type turnCancel uint8

const (
	// cancelNone: nobody asked to cancel the turn.
	cancelNone turnCancel = iota
	// cancelWanted: cancel, close, the grace window or the deadline asked for it
	// (startCancel); next asks the shell to cancel its drive of the turn once the drive
	// is known to run (cmdRequestCancel).
	cancelWanted
	// cancelSent: the RequestCancel command is out (take): it is not sent again.
	cancelSent
)

var turnCancelNames = [...]string{cancelNone: "none", cancelWanted: "wanted", cancelSent: "sent"}

func (c turnCancel) String() string { return enumName(turnCancelNames[:], c, "turnCancel") }

// MarshalText writes the name: the carried state reads "cancel":"wanted".
func (c turnCancel) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads a name MarshalText wrote.
func (c *turnCancel) UnmarshalText(b []byte) error {
	return unmarshalEnum(b, turnCancelNames[:], c, "turn cancel")
}

// enumName is v's name in names, or what(v) for a value without one.
func enumName[E ~uint8](names []string, v E, what string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return what + "(" + strconv.Itoa(int(v)) + ")"
}

// unmarshalEnum sets *v to the index of name b in names.
func unmarshalEnum[E ~uint8](b []byte, names []string, v *E, what string) error {
	i := slices.Index(names, string(b))
	if i < 0 {
		return fmt.Errorf("unknown %s %q", what, b)
	}
	*v = E(i)
	return nil
}

func (s *Core) LiveTurnByID(turnID int64) *LiveTurn {
	if s.Turn == nil || s.Turn.TurnID != turnID {
		return nil
	}
	return s.Turn
}

// --- the turn's start and the shell's drive of it ---

// beginTurn makes the next queued prompt the live turn (StartTurn) and returns its input.
func (s *Core) beginTurn(now time.Time) signals.TurnInput {
	p, _ := s.Queue.Pop()
	t := &LiveTurn{TurnID: p.TurnID, ClientMessageID: p.ClientMessageID, Attempt: 1, StartedAt: now, HadViewer: len(s.Viewers) > 0 && !p.Unwatched, Background: p.Unwatched, Choices: s.Settings.Wanted()}
	t.Clock.resume(now)
	s.Turn = t
	s.Steer.Begin(t.TurnID)
	s.journal(now, signals.EventTurnStarted, t.TurnID, signals.TurnStartedData{Attempt: 1, PromptClientMessageID: p.ClientMessageID, Unwatched: p.Unwatched})
	s.metric(MetricTurnsStarted, nil)
	in := signals.TurnInput{
		SessionID:       s.cfg.SessionID,
		TurnID:          t.TurnID,
		ClientMessageID: p.ClientMessageID,
		Text:            p.Text,
		Content:         p.Content,
		Agent:           s.cfg.Agent,
		Workspace:       s.cfg.Workspace,
		AgentSessionID:  s.AgentSessionID,
		Choices:         t.Choices,
		Policy:          s.Policy.Level,
		McpServers:      s.cfg.McpServers,
		HostQueue:       s.AgentHost,
		ForkOf:          s.cfg.ForkOf,
		AffinityWait:    s.cfg.AffinityWait,
		StartToClose:    s.cfg.Deadline + turnStartToCloseSlack,
		Heartbeat:       TurnHeartbeat,
		Unwatched:       p.Unwatched,
	}
	t.Input = &in
	return in
}

// driveStarted: this run's shell drives turn turnID. It reports whether the turn is still
// the live one (its end matters to the session only then).
func (s *Core) driveStarted(turnID int64) bool {
	t := s.LiveTurnByID(turnID)
	if t != nil && t.Drive == driveAsked {
		t.Drive = driveRunning
	}
	if t != nil {
		s.driving = turnID
	}
	return t != nil
}

// driveEnded: the drive of turn turnID completed or ended cancelled. It matters
// only to a turn whose end waits for the outcomes of the steers it took: none can come now.
func (s *Core) driveEnded(now time.Time, turnID int64) {
	t := s.LiveTurnByID(turnID)
	if t == nil || !slices.ContainsFunc(s.Awaiting, func(d signals.Delivery) bool { return d.TurnID == turnID }) {
		return
	}
	t.Drive = driveOver
	s.maybeFinish(now)
}

// driveFailed: the drive of turn turnID failed without reporting (one that completes, or
// ends cancelled, has reported the turn's outcome first): the turn still gets its
// terminal event.
func (s *Core) driveFailed(now time.Time, turnID int64, err string) {
	if t := s.LiveTurnByID(turnID); t != nil && t.Finished == nil {
		t.Finished = &signals.TurnFinishedSignal{TurnID: turnID, Error: "the turn's drive ended without reporting: " + err, Orphaned: true}
		s.maybeFinish(now)
	}
}

// --- the turn runner's reports ---

// advanceAttempt moves the live turn to a newer attempt of its activity: the partial output
// of the old attempt is superseded, which viewers learn from turn.restarted.
func (s *Core) advanceAttempt(now time.Time, t *LiveTurn, attempt int32) {
	s.advanceAttemptResumed(now, t, attempt, false)
}

// advanceAttemptResumed is advanceAttempt for an attempt that says whether it found the
// prompt in the agent session it loaded (resumed: the prompt was not sent again).
func (s *Core) advanceAttemptResumed(now time.Time, t *LiveTurn, attempt int32, resumed bool) {
	if attempt <= t.Attempt {
		return
	}
	cause := restartCause(t, attempt)
	if t.Limited != nil {
		cause = limitRestartCause(t, attempt)
	}
	s.failAwaited(now, t.TurnID, attempt, fmt.Sprintf("attempt %d was given up before it reported the steer", attempt-1))
	t.Attempt, t.LastBatch, t.HostQueue, t.HostLost = attempt, 0, "", false
	s.cancelPermissions(now, t.TurnID, signals.DecidedByRestart, cause) // they belonged to the lost attempt
	s.journal(now, signals.EventTurnRestarted, t.TurnID, signals.TurnStartedData{Attempt: attempt, PromptClientMessageID: t.ClientMessageID, Cause: cause, Resumed: resumed})
	s.limitEnded(now, t)
}

// restartCause says why the attempt before attempt was given up, from what the session saw
// of it: the server retries a turn's activity only when its attempt stopped heartbeating
// (its worker died, stopped, or was cut off past the heartbeat timeout) or lost its worker.
func restartCause(t *LiveTurn, attempt int32) string {
	host := t.HostQueue
	if host == "" {
		host = "a worker that had not reported yet"
	}
	why := "stopped reporting for longer than the heartbeat timeout (its worker died, stopped or was cut off)"
	if t.HostLost {
		why = "was lost: its worker's host queue stopped taking deliveries"
	}
	return fmt.Sprintf("attempt %d on %s %s; attempt %d took the turn over", attempt-1, host, why, attempt)
}

func (s *Core) turnStarted(now time.Time, sig signals.TurnStartedSignal) {
	t := s.LiveTurnByID(sig.TurnID)
	if t == nil || sig.Attempt < t.Attempt {
		return
	}
	if sig.Attempt > t.Attempt {
		s.advanceAttemptResumed(now, t, sig.Attempt, sig.Resumed)
	}
	t.HostQueue, t.HostLost = sig.HostQueue, false
	s.RunnerReported = true
	if sig.HostQueue != "" {
		s.AgentHost = sig.HostQueue
	}
	if sig.AgentSessionID != "" {
		s.AgentSessionID = sig.AgentSessionID
	}
	if sig.Sandbox != "" {
		s.Sandbox = sig.Sandbox
	}
	s.offered(now, t.TurnID, sig.Settings)
	if w := sig.WorkspaceMissing; w != nil {
		s.journal(now, signals.EventWorkspaceMissing, t.TurnID, *w)
	}
	if w := sig.WorkspaceRestored; w != nil {
		s.journal(now, signals.EventWorkspaceRestored, t.TurnID, *w)
	}
	if cl := sig.ContextLost; cl != nil {
		ev := s.Journal.Append(signals.EventAgentContextLost, t.TurnID, now, *cl)
		s.ContextLost = &signals.ContextLostView{TurnID: t.TurnID, Seq: ev.Seq, At: ev.At, Reason: cl.Reason, Carried: cl.Carried}
	}
}

func (s *Core) turnEvents(now time.Time, sig signals.TurnEventsSignal) {
	if sig.TurnID == 0 {
		s.betweenTurns(now, sig)
		return
	}
	t := s.LiveTurnByID(sig.TurnID)
	if t == nil || sig.Attempt < t.Attempt {
		return
	}
	if st := sig.Started; st != nil && (sig.Attempt > t.Attempt || sig.Batch > t.LastBatch) {
		// The attempt's turn_started, carried by its batch: taken first, as the drain order
		// takes a turn_started signal before the batches.
		st.TurnID, st.Attempt = sig.TurnID, sig.Attempt
		s.turnStarted(now, *st)
	}
	s.advanceAttempt(now, t, sig.Attempt)
	if sig.Batch <= t.LastBatch {
		return // a repeated delivery of a batch already journaled
	}
	t.LastBatch = sig.Batch
	for _, ev := range sig.Events {
		s.journal(now, signals.EventAgentUpdate, t.TurnID, ev)
		s.observeSettings(now, t.TurnID, ev)
	}
	s.maybeLimited(now)
	s.maybeFinish(now)
}

func (s *Core) turnFinished(now time.Time, sig signals.TurnFinishedSignal) {
	t := s.LiveTurnByID(sig.TurnID)
	if t == nil || (sig.Attempt != 0 && sig.Attempt < t.Attempt) {
		return
	}
	if t.Finished == nil && sig.Attempt != 0 {
		// The runner's own report carries its turn_started (when no batch took it) and its
		// last batch, numbered Batches: taken as a turn_started and a turn_events would be.
		if st := sig.Started; st != nil {
			st.TurnID, st.Attempt = sig.TurnID, sig.Attempt
			s.turnStarted(now, *st)
		}
		if len(sig.Events) > 0 {
			s.turnEvents(now, signals.TurnEventsSignal{TurnID: sig.TurnID, Attempt: sig.Attempt, Batch: sig.Batches, Events: sig.Events})
		}
	}
	if sig.Attempt > t.Attempt {
		s.advanceAttempt(now, t, sig.Attempt)
	}
	sig.Events, sig.Started = nil, nil // journaled: the turn's end waits without them
	t.Finished = &sig
	s.maybeFinish(now)
}

// maybeFinish ends the live turn once its turn_finished has arrived and, when it came from a
// known attempt, every batch that attempt sent before it.
func (s *Core) maybeFinish(now time.Time) {
	t := s.Turn
	if t == nil || t.Finished == nil {
		return
	}
	fin := t.Finished
	if fin.Attempt == t.Attempt && fin.Batches > t.LastBatch {
		return
	}
	if s.steerInFlight(fin) {
		return // deliveryDone finishes the turn once the steer's outcome is known
	}
	if s.awaitingOutcomes(now, t, fin) {
		return // deliveryOutcome, the drive's end or the alarm finishes the turn
	}
	s.steersEnd(now, t.TurnID)
	if fin.AgentSessionID != "" {
		s.AgentSessionID = fin.AgentSessionID
	}
	// Affinity: the next turn goes to the worker that ran this one, even when this turn's
	// turn_started lost the race with its end.
	if fin.HostQueue != "" {
		s.AgentHost = fin.HostQueue
	}
	s.cancelPermissions(now, t.TurnID, signals.DecidedByCancel, "turn ended")
	if len(fin.Usage) > 0 {
		s.addUsage(now, t.TurnID, fin.Usage)
	}
	if fin.Error == "" && t.CancelReason == "deadline" {
		fin.Error = s.deadlineMessage()
	}
	s.GraceUntil = nil
	// The workspace as the turn left it, after everything the agent said in the turn.
	if c := fin.Checkpoint; c != nil {
		s.journal(now, signals.EventWorkspaceCheckpoint, t.TurnID, *c)
	}
	if fin.Error != "" {
		s.journal(now, signals.EventTurnFailed, t.TurnID, signals.TurnFailedData{Error: fin.Error, Orphaned: fin.Orphaned})
		s.LastOutcome = OutcomeFailed
	} else {
		s.journal(now, signals.EventTurnEnded, t.TurnID, signals.TurnEndedData{StopReason: fin.StopReason})
		s.LastOutcome = fin.StopReason
	}
	s.metric(MetricTurnsFinished, map[string]string{"outcome": turnOutcome(fin)})
	s.Turn = nil
	s.Steer.Halt()
}

// OutcomeFailed is the TacpLastOutcome of a session whose last turn failed.
const OutcomeFailed = "failed"

// --- between turns ---

// hostBatch is the last between-turn batch journaled from one agent process.
type hostBatch struct {
	Host  string `json:"host"`
	Batch int64  `json:"batch"`
}

// maxBetweenHosts bounds Between: older agent processes are forgotten first.
const maxBetweenHosts = 16

// betweenTurns journals what an agent said while no turn held it (background tools),
// idempotent per agent process and batch.
func (s *Core) betweenTurns(now time.Time, sig signals.TurnEventsSignal) {
	i := 0
	for i < len(s.Between) && s.Between[i].Host != sig.Host {
		i++
	}
	if i == len(s.Between) {
		s.Between = append(s.Between, hostBatch{Host: sig.Host})
		if len(s.Between) > maxBetweenHosts {
			s.Between = s.Between[1:]
			i--
		}
	}
	if sig.Batch <= s.Between[i].Batch {
		return
	}
	s.Between[i].Batch = sig.Batch
	for _, ev := range sig.Events {
		s.journal(now, signals.EventAgentUpdate, 0, ev)
		s.observeSettings(now, 0, ev)
	}
}

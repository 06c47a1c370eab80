package workflows

// The session core: every rule of a session (contract §6) as a state machine in plain Go, in
// the manner of etcd-io/raft's raft.go. Its inputs are the updates, the signals, the alarm
// and the results of what it asked for, each with the time `now` handed in by the shell
// (Step, core_step.go); Ready says what the shell does next (start a turn, request a cancel,
// deliver a decision, continue as new, close) with the command's data, the search
// attributes, the alarm and the metrics. It reads no clock, draws no random number and
// imports no workflow package, so tests drive it synchronously (core_test.go, the scenario
// files in testdata/scenarios). What only the workflow runtime can answer — a
// workflow.GetVersion marker, a log line — it asks of its sessionEnv, which the shell
// (session.go) implements and tests fake.
//
// This file holds the core's state and the turn's life: prompts, cancel and close, the turn
// runner's reports, usage, status.

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// version is a workflow.GetVersion answer as the core sees it (the values of
// workflow.Version: defaultVersion for a history recorded before the change).
type version int

const defaultVersion version = -1

// sessionEnv is what the core asks of the workflow runtime that a pure function cannot
// answer. None of it changes the core's state: a version is the answer the history records
// (asked in the same workflow task as before the core existed, so every recorded history
// replays), and logs write no history at all. Metrics are data: Ready hands them out.
type sessionEnv interface {
	// version is workflow.GetVersion(change, DefaultVersion, max), for the change ids of
	// before Worker Versioning that are not removed yet (versioning.go); no new one.
	version(change string, max version) version
	warn(msg string, keyvals ...any)
}

// sessionCore is the state machine of one run of a session: the state carried across
// continue-as-new and the run's own bookkeeping.
type sessionCore struct {
	sessionState
	cfg   Config
	env   sessionEnv
	build Build

	// per-run counters and bookkeeping (not carried)
	updates, signalsSeen int
	// pending counts the shell's commands whose results have not come back: continue-as-new
	// and close wait for them.
	pending    int
	delivering bool
	inFlight   signals.Delivery // the delivery being sent, while delivering

	// alarmAt is when the shell's timer is armed for (the last Ready's Alarm).
	alarmAt time.Time

	// readied: the run's first Ready is out (it holds no command).
	readied bool
	// metrics are the records for the next Ready.
	metrics []Metric
	// lastSA is the search attributes last upserted (searchAttrs); waitedUntil: this run
	// set TacpWaitingUntil (a limit's wait), to unset when it ends.
	lastSA      string
	waitedUntil bool
	// shownState is the TacpSessionState of the last upsert ("" before the run's first).
	shownState string

	// inFlightReported: the delivery_outcome of the steer in flight overtook its result.
	inFlightReported bool

	deliveryVersion *version
	alarmsVersion   *version
	settingsVersion *version
	asyncVersion    *version
	saVersion       *version
}

// ask answers the version of change once per run, at its first use.
func (s *sessionCore) ask(cached **version, change string, max version) version {
	if *cached == nil {
		v := s.env.version(change, max)
		*cached = &v
	}
	return **cached
}

// LiveTurn is the running turn as the session knows it.
type LiveTurn struct {
	TurnID          int64     `json:"turn_id"`
	ClientMessageID string    `json:"client_message_id"`
	Attempt         int32     `json:"attempt"`
	HostQueue       string    `json:"host_queue,omitempty"`
	StartedAt       time.Time `json:"started_at"`
	// Child is the life of the turn's TurnWorkflow as the session knows it (turnChild).
	Child turnChild `json:"child,omitempty"`
	// Cancel is the life of the turn's cancel (turnCancel); CancelReason says who wanted it.
	Cancel       turnCancel `json:"cancel,omitempty"`
	CancelReason string     `json:"cancel_reason,omitempty"`
	// HostLost is set when a delivery found the attempt's host gone.
	HostLost bool `json:"host_lost,omitempty"`
	// HadViewer: grace applies only to a turn that has had a viewer.
	HadViewer bool      `json:"had_viewer,omitempty"`
	Clock     turnClock `json:"clock"`
	// LastBatch is the watermark of turn_events for Attempt (batches are numbered from 1).
	LastBatch int64 `json:"last_batch"`
	// Finished holds a turn_finished that waits for its attempt's last batches.
	Finished *signals.TurnFinishedSignal `json:"finished,omitempty"`
	// Choices is what the turn's input carried of the clients' choices: every attempt's
	// runner applies these, so its report predates any choice made since (settings_shell.go).
	Choices *signals.SessionChoices `json:"choices,omitempty"`
	// OutcomesDue is how long the turn's end waits for the outcomes of the steers it took
	// (set at its turn_finished); once Child is childEnded no outcome can come any more.
	OutcomesDue *time.Time `json:"outcomes_due,omitempty"`
	// Limited is the turn's wait for a provider's limit (core_limits.go).
	Limited *limitWait `json:"limited,omitempty"`
}

// turnChild is the life of a turn's TurnWorkflow child, as the session knows it. It only
// moves forward.
type turnChild uint8

const (
	// childAsked: beginTurn made the turn live and the StartTurn command is out; whether
	// its TurnWorkflow exists is not known yet (a continue-as-new waits, and no cancel is
	// requested of it).
	childAsked turnChild = iota
	// childRunning: ChildStarted said the TurnWorkflow exists (turnWorkflowStarted).
	childRunning
	// childEnded: ChildEnded said the TurnWorkflow completed or ended cancelled while the
	// turn's end waited for the outcomes of the steers it took (turnWorkflowEnded): none
	// can come any more. The shell watches for the end only once the start is known, so
	// childEnded always follows childRunning.
	childEnded
)

var turnChildNames = [...]string{childAsked: "asked", childRunning: "running", childEnded: "ended"}

func (c turnChild) String() string {
	if int(c) < len(turnChildNames) {
		return turnChildNames[c]
	}
	return "turnChild(" + strconv.Itoa(int(c)) + ")"
}

// MarshalText writes the name: the carried state reads "child":"running".
func (c turnChild) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads a name MarshalText wrote.
func (c *turnChild) UnmarshalText(b []byte) error {
	return unmarshalEnum(b, turnChildNames[:], c, "turn child")
}

// turnCancel is the life of a turn's cancel. It only moves forward.
type turnCancel uint8

const (
	// cancelNone: nobody asked to cancel the turn.
	cancelNone turnCancel = iota
	// cancelWanted: cancel, close, the grace window or the deadline asked for it
	// (startCancel); next asks the shell to request the TurnWorkflow's cancel once the
	// child is known to exist (cmdRequestCancel).
	cancelWanted
	// cancelSent: the RequestCancel command is out (take): it is not sent again.
	cancelSent
)

var turnCancelNames = [...]string{cancelNone: "none", cancelWanted: "wanted", cancelSent: "sent"}

func (c turnCancel) String() string {
	if int(c) < len(turnCancelNames) {
		return turnCancelNames[c]
	}
	return "turnCancel(" + strconv.Itoa(int(c)) + ")"
}

// MarshalText writes the name: the carried state reads "cancel":"wanted".
func (c turnCancel) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads a name MarshalText wrote.
func (c *turnCancel) UnmarshalText(b []byte) error {
	return unmarshalEnum(b, turnCancelNames[:], c, "turn cancel")
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

// UnmarshalJSON reads a LiveTurn, also one carried (continue-as-new) or recorded (the
// histories' inputs) before Child and Cancel: its bools "started", "ended", "cancelling"
// and "cancel_sent" say the same, when the new fields are absent.
func (t *LiveTurn) UnmarshalJSON(b []byte) error {
	type plain LiveTurn // no methods: decodes field by field
	var v struct {
		plain
		Started    bool `json:"started"`
		Ended      bool `json:"ended"`
		Cancelling bool `json:"cancelling"`
		CancelSent bool `json:"cancel_sent"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*t = LiveTurn(v.plain)
	if t.Child == childAsked {
		switch {
		case v.Ended:
			t.Child = childEnded
		case v.Started:
			t.Child = childRunning
		}
	}
	if t.Cancel == cancelNone {
		switch {
		case v.CancelSent:
			t.Cancel = cancelSent
		case v.Cancelling:
			t.Cancel = cancelWanted
		}
	}
	return nil
}

// sessionState is everything a run carries to the next across continue-as-new.
type sessionState struct {
	Run            int       `json:"run"`
	Queue          *Queue    `json:"queue"`
	Steer          *Steer    `json:"steer"`
	Journal        *Journal  `json:"journal"`
	Turn           *LiveTurn `json:"turn,omitempty"`
	AgentSessionID string    `json:"agent_session_id,omitempty"`
	// AgentHost is the host queue of the worker that ran the last attempt, which holds the
	// live agent: the next turn goes there first (affinity, contract §10).
	AgentHost string `json:"agent_host,omitempty"`
	// Sandbox is the kernel sandbox of the last attempt's agent, as its worker said.
	Sandbox string `json:"sandbox,omitempty"`
	// ContextLost is the last agent.context_lost, for status.
	ContextLost *signals.ContextLostView `json:"context_lost,omitempty"`
	Closing     bool                     `json:"closing,omitempty"`
	CloseReason string                   `json:"close_reason,omitempty"`
	// Delete is the closing close's request to remove the session's data (and workspace).
	Delete          bool `json:"delete,omitempty"`
	DeleteWorkspace bool `json:"delete_workspace,omitempty"`
	// Deliveries wait to be sent into the live turn, oldest first.
	Deliveries []signals.Delivery `json:"deliveries,omitempty"`
	// Awaiting are the steers the live turn took (Async) whose delivery_outcome has not
	// come yet; DeliverySeq numbers the deliveries sent with Async (their DeliveryID).
	Awaiting    []signals.Delivery                       `json:"awaiting,omitempty"`
	DeliverySeq int64                                    `json:"delivery_seq,omitempty"`
	Permissions []openPermission                         `json:"permissions,omitempty"`
	Resolved    DedupIndex[signals.PermissionResolution] `json:"resolved"`
	// Elicitations are the open questions of the agent; ElicitationsDone their resolutions
	// (nil in a session older than elicitation: request_elicitation.go).
	Elicitations     []openElicitation                          `json:"elicitations,omitempty"`
	ElicitationsDone *DedupIndex[signals.ElicitationResolution] `json:"elicitations_done,omitempty"`
	// Between holds the batch watermark of each agent process that spoke between turns.
	Between []hostBatch `json:"between,omitempty"`
	// Usage totals the token usage the agent reported, by field.
	Usage map[string]int64 `json:"usage,omitempty"`
	// UsageLatest holds the usage fields that are gauges, not counters (objects: the agent's
	// context window, its cumulative cost): the latest value, never summed.
	UsageLatest map[string]json.RawMessage `json:"usage_latest,omitempty"`
	// Policy is the permission level and the remembered tools.
	Policy     *Policy    `json:"policy,omitempty"`
	Viewers    []viewer   `json:"viewers,omitempty"`
	GraceUntil *time.Time `json:"grace_until,omitempty"`
	// LastOutcome is how the last turn ended: its stop reason or OutcomeFailed.
	LastOutcome string `json:"last_outcome,omitempty"`
	// Withdrawn are requests a restart withdrew, newest last (cancelPermissions).
	Withdrawn []withdrawnRequest `json:"withdrawn,omitempty"`
	// Settings is the agent's offer and the clients' choices (settings.go).
	Settings *Settings `json:"settings,omitempty"`
	// Title is the session's title (set_title, core_title.go).
	Title string `json:"title,omitempty"`
	// RunnerBeats: the last attempt's runner said it Beats (signals.TurnStartedSignal), so
	// the next turn shows "running" in the search attributes only once it is
	// signals.RunningShownAfter old (searchAttrs).
	RunnerBeats bool `json:"runner_beats,omitempty"`
	// UpgradeWanted: a run saw its deployment's target version change and continued as new
	// pinned (busy, or for its history's size); the next run moves at its first idle safe
	// point without being told again (versioning.go).
	UpgradeWanted bool `json:"upgrade_wanted,omitempty"`
}

// OutcomeFailed is the TacpLastOutcome of a session whose last turn failed.
const OutcomeFailed = "failed"

// hostBatch is the last between-turn batch journaled from one agent process.
type hostBatch struct {
	Host  string `json:"host"`
	Batch int64  `json:"batch"`
}

// maxBetweenHosts bounds Between: older agent processes are forgotten first.
const maxBetweenHosts = 16

// journal appends an event at now.
func (s *sessionCore) journal(now time.Time, kind string, turnID int64, data any) {
	s.Journal.Append(kind, turnID, now, data)
}

// busy reports whether a turn holds the session (queued prompts wait behind it).
func (s *sessionCore) busy() bool { return s.Turn != nil }

// --- prompt ---

func (s *sessionCore) checkPrompt(req signals.PromptRequest) *signals.Rejection {
	if s.Closing {
		return signals.Reject(signals.RejectSessionClosed, "session is closed")
	}
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return rej
	}
	_, rej := s.Queue.Check(req, s.busy())
	return rej
}

func (s *sessionCore) prompt(now time.Time, req signals.PromptRequest) (signals.PromptResult, error) {
	res, rej := s.Queue.Offer(req, s.busy())
	if rej != nil {
		return res, rej.ApplicationError()
	}
	if !res.Duplicate {
		text, cut := journalText(req.Text)
		s.journal(now, signals.EventPromptAccepted, res.TurnID, signals.PromptAcceptedData{
			ClientMessageID: req.ClientMessageID, Text: text, TextTruncated: cut, Position: res.Position,
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

func (s *sessionCore) checkSteer(req signals.SteerRequest) *signals.Rejection {
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return rej
	}
	_, rej := s.Steer.Decide(req, s.steerChannel())
	return rej
}

func (s *sessionCore) steer(now time.Time, req signals.SteerRequest) (signals.SteerResult, error) {
	res, rej := s.Steer.Accept(req, s.steerChannel())
	if rej != nil {
		return res, rej.ApplicationError()
	}
	s.metric(MetricSteers, map[string]string{"outcome": res.Outcome})
	if res.Outcome == signals.SteerAccepted {
		text, cut := journalText(req.Text)
		s.journal(now, signals.EventSteerAccepted, res.Ref.TurnID, signals.SteerAcceptedData{
			Ref: res.Ref, Text: text, TextTruncated: cut, NextExpectedTurnID: res.NextExpectedTurnID,
		})
		s.queueDelivery(signals.Delivery{Kind: signals.DeliverSteer, Text: req.Text, Offset: res.Ref.Offset})
	}
	return res, nil
}

// --- cancel and close ---

func (s *sessionCore) checkCancel(req signals.CancelRequest) *signals.Rejection {
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return rej
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

func (s *sessionCore) cancel(now time.Time, req signals.CancelRequest) (signals.CancelResult, error) {
	if s.Turn.Cancel != cancelNone {
		return signals.CancelResult{Outcome: signals.CancelAlreadyCancelling}, nil
	}
	s.startCancel(now, "cancel")
	return signals.CancelResult{Outcome: signals.CancelCancelling}, nil
}

// startCancel marks the live turn cancelling; the main loop sends the cancel request.
func (s *sessionCore) startCancel(now time.Time, reason string) {
	s.Turn.Cancel, s.Turn.CancelReason = cancelWanted, reason
	s.GraceUntil = nil
	s.Steer.Halt()
	s.journal(now, signals.EventTurnCancelling, s.Turn.TurnID, signals.TurnCancellingData{Reason: reason})
	who := reason // grace, deadline, close: the system's
	if reason == "cancel" {
		who = "user" // a person's (or a client's) cancel
	}
	s.cancelPermissions(now, s.Turn.TurnID, signals.DecidedByCancel, who)
	if s.Turn.Finished == nil {
		s.queueDelivery(signals.Delivery{Kind: signals.DeliverCancel})
	}
}

func (s *sessionCore) close(now time.Time, req signals.CloseRequest) (signals.CloseResult, error) {
	if s.Closing {
		return signals.CloseResult{}, nil
	}
	s.Closing, s.CloseReason = true, req.Reason
	s.Delete, s.DeleteWorkspace = req.Delete || req.DeleteWorkspace, req.DeleteWorkspace
	if s.Turn != nil && s.Turn.Cancel == cancelNone {
		s.startCancel(now, "close")
	}
	return signals.CloseResult{}, nil
}

// --- the turn runner's reports ---

func (s *sessionCore) liveTurn(turnID int64) *LiveTurn {
	if s.Turn == nil || s.Turn.TurnID != turnID {
		return nil
	}
	return s.Turn
}

// advanceAttempt moves the live turn to a newer attempt of its activity: the partial output
// of the old attempt is superseded, which viewers learn from turn.restarted.
func (s *sessionCore) advanceAttempt(now time.Time, t *LiveTurn, attempt int32) {
	s.advanceAttemptResumed(now, t, attempt, false)
}

// advanceAttemptResumed is advanceAttempt for an attempt that says whether it found the
// prompt in the agent session it loaded (resumed: the prompt was not sent again).
func (s *sessionCore) advanceAttemptResumed(now time.Time, t *LiveTurn, attempt int32, resumed bool) {
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

func (s *sessionCore) turnStarted(now time.Time, sig signals.TurnStartedSignal) {
	t := s.liveTurn(sig.TurnID)
	if t == nil || sig.Attempt < t.Attempt {
		return
	}
	if sig.Attempt > t.Attempt {
		s.advanceAttemptResumed(now, t, sig.Attempt, sig.Resumed)
	}
	t.HostQueue, t.HostLost = sig.HostQueue, false
	s.RunnerBeats = sig.Beats
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
	if cl := sig.ContextLost; cl != nil {
		ev := s.Journal.Append(signals.EventAgentContextLost, t.TurnID, now, *cl)
		s.ContextLost = &signals.ContextLostView{TurnID: t.TurnID, Seq: ev.Seq, At: ev.At, Reason: cl.Reason, Carried: cl.Carried}
	}
}

func (s *sessionCore) turnEvents(now time.Time, sig signals.TurnEventsSignal) {
	if sig.TurnID == 0 {
		s.betweenTurns(now, sig)
		return
	}
	t := s.liveTurn(sig.TurnID)
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

func (s *sessionCore) turnFinished(now time.Time, sig signals.TurnFinishedSignal) {
	t := s.liveTurn(sig.TurnID)
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

// betweenTurns journals what an agent said while no turn held it (background tools),
// idempotent per agent process and batch.
func (s *sessionCore) betweenTurns(now time.Time, sig signals.TurnEventsSignal) {
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

// addUsage adds a turn's reported usage to the session's totals and journals both.
func (s *sessionCore) addUsage(now time.Time, turnID int64, raw json.RawMessage) {
	var turn map[string]any
	if json.Unmarshal(raw, &turn) != nil || len(turn) == 0 {
		return
	}
	if s.Usage == nil {
		s.Usage = map[string]int64{}
	}
	for k, v := range turn { // sums and replacements: the order of the keys does not matter
		switch v := v.(type) {
		case float64:
			s.Usage[k] += int64(v)
		case map[string]any: // a gauge (the runner's context and cost): the latest wins
			if s.UsageLatest == nil {
				s.UsageLatest = map[string]json.RawMessage{}
			}
			s.UsageLatest[k], _ = json.Marshal(v)
		}
	}
	s.journal(now, signals.EventUsageUpdated, turnID, map[string]any{"turn": turn, "total": usageView(s.Usage, s.UsageLatest)})
}

// maybeFinish ends the live turn once its turn_finished has arrived and, when it came from a
// known attempt, every batch that attempt sent before it.
func (s *sessionCore) maybeFinish(now time.Time) {
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
		return // deliveryOutcome, the TurnWorkflow's end or the alarm finishes the turn
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

// --- queries ---

func (s *sessionCore) state() string {
	switch {
	case s.Turn == nil && s.Closing:
		return signals.StateClosed
	case s.Turn == nil:
		return signals.StateIdle
	case s.Turn.Cancel != cancelNone:
		return signals.StateCancelling
	case s.limitView() != nil:
		return signals.StateWaitingLimit
	case len(s.Permissions) > 0 || len(s.Elicitations) > 0:
		return signals.StateSuspended
	case s.GraceUntil != nil:
		return signals.StateGrace
	default:
		return signals.StateRunning
	}
}

// details is the session's Current Details in the Temporal UI (markdown): its state,
// what it waits for (the open requests with their titles and deadlines), the steer token,
// the queue, the last outcome.
func (s *sessionCore) details() string {
	state, turn, _ := s.searchAttributes()
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** · turn %d", state, turn)
	if s.Title != "" {
		fmt.Fprintf(&b, " · %q", s.Title)
	}
	if s.Turn != nil && s.Turn.Cancel == cancelNone {
		fmt.Fprintf(&b, " · steer token `%s`", s.Steer.Token())
	}
	if s.Turn != nil && s.Turn.Cancel != cancelNone {
		fmt.Fprintf(&b, " · cancelling (%s)", s.Turn.CancelReason)
	}
	fmt.Fprintf(&b, " · %d queued", len(s.Queue.Items))
	if s.LastOutcome != "" {
		fmt.Fprintf(&b, " · last turn: %s", s.LastOutcome)
	}
	if s.Sandbox != "" {
		fmt.Fprintf(&b, " · sandbox: %s", s.Sandbox)
	}
	for _, p := range s.pendingPermissions() {
		title := p.Title
		if title == "" {
			title = p.Kind
		}
		fmt.Fprintf(&b, "\n\nwaiting for approval of *%s* (`%s`, turn %d) until %s — `starter approve --session %s %s`",
			title, p.RequestID, p.TurnID, p.Deadline.UTC().Format("2006-01-02 15:04:05 UTC"), s.cfg.SessionID, p.RequestID)
	}
	b.WriteString(s.elicitationDetails())
	b.WriteString(s.limitDetails())
	if s.GraceUntil != nil {
		fmt.Fprintf(&b, "\n\nno viewer: the turn is cancelled at %s unless one attaches", s.GraceUntil.UTC().Format("15:04:05 UTC"))
	}
	fmt.Fprintf(&b, "\n\njournal seq %d · run %d", s.Journal.LastSeq, s.Run)
	return b.String()
}

// defaultAgent names the agent of a session that names none: the worker's default serves
// it (status.agent, session.started, the TacpAgent search attribute).
const defaultAgent = "default"

// sessionAgent is what serves the session, as status and session.started name it.
func sessionAgent(agent string) string {
	if strings.TrimSpace(agent) == "" {
		return defaultAgent
	}
	return agent
}

// agentName is the agent's program name, for the TacpAgent search attribute.
func agentName(cmd string) string {
	fields := strings.Fields(cmd)
	if len(fields) == 0 {
		return defaultAgent
	}
	return path.Base(fields[0])
}

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

// --- what the shell does next ---

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

// closeSession drops the queue and journals session.closed (Close).
func (s *sessionCore) closeSession(now time.Time) {
	dropped := s.Queue.Drain()
	s.journal(now, signals.EventSessionClosed, 0, signals.SessionClosedData{Reason: s.CloseReason, Dropped: dropped})
}

// beginTurn makes the next queued prompt the live turn (StartTurn) and returns the input
// of its TurnWorkflow.
func (s *sessionCore) beginTurn(now time.Time) signals.TurnInput {
	p, _ := s.Queue.Pop()
	t := &LiveTurn{TurnID: p.TurnID, ClientMessageID: p.ClientMessageID, Attempt: 1, StartedAt: now, HadViewer: len(s.Viewers) > 0, Choices: s.Settings.Wanted()}
	t.Clock.resume(now)
	s.Turn = t
	s.Steer.Begin(t.TurnID)
	s.journal(now, signals.EventTurnStarted, t.TurnID, signals.TurnStartedData{Attempt: 1, PromptClientMessageID: p.ClientMessageID})
	s.metric(MetricTurnsStarted, nil)
	return signals.TurnInput{
		SessionID:       s.cfg.SessionID,
		TurnID:          t.TurnID,
		ClientMessageID: p.ClientMessageID,
		Text:            p.Text,
		Content:         p.Content,
		Agent:           s.cfg.Agent,
		Workspace:       s.cfg.Workspace,
		AgentSessionID:  s.AgentSessionID,
		Choices:         t.Choices,
		McpServers:      s.cfg.McpServers,
		HostQueue:       s.AgentHost,
		ForkOf:          s.cfg.ForkOf,
		AffinityWait:    s.cfg.AffinityWait,
		StartToClose:    s.cfg.Deadline + turnStartToCloseSlack,
		Heartbeat:       TurnHeartbeat,
		CarriedReports:  true, // turnEvents and turnFinished take them
	}
}

// turnStartFailed: the TurnWorkflow of turnID could not be started; the turn fails.
func (s *sessionCore) turnStartFailed(now time.Time, turnID int64, err string) {
	t := s.liveTurn(turnID)
	if t == nil {
		return
	}
	t.Finished = &signals.TurnFinishedSignal{TurnID: turnID, Error: "start turn workflow: " + err}
	s.maybeFinish(now)
}

// turnWorkflowStarted: the TurnWorkflow of turnID exists. It reports whether the turn is
// still the live one (its end matters to the session only then).
func (s *sessionCore) turnWorkflowStarted(turnID int64) bool {
	t := s.liveTurn(turnID)
	if t != nil && t.Child == childAsked {
		t.Child = childRunning
	}
	return t != nil
}

// turnWorkflowEnded: the TurnWorkflow of turnID completed or ended cancelled. It matters
// only to a turn whose end waits for the outcomes of the steers it took: none can come now.
func (s *sessionCore) turnWorkflowEnded(now time.Time, turnID int64) {
	t := s.liveTurn(turnID)
	if t == nil || !slices.ContainsFunc(s.Awaiting, func(d signals.Delivery) bool { return d.TurnID == turnID }) {
		return
	}
	t.Child = childEnded
	s.maybeFinish(now)
}

// turnWorkflowFailed: the TurnWorkflow of turnID failed, timed out or was terminated
// without reporting (one that completes, or ends cancelled, has sent its turn_finished
// first): the turn still gets its terminal event.
func (s *sessionCore) turnWorkflowFailed(now time.Time, turnID int64, err string) {
	if t := s.liveTurn(turnID); t != nil && t.Finished == nil {
		t.Finished = &signals.TurnFinishedSignal{TurnID: turnID, Error: "turn workflow ended without reporting: " + err, Orphaned: true}
		s.maybeFinish(now)
	}
}

func usageView(u map[string]int64, latest map[string]json.RawMessage) map[string]any {
	if len(u) == 0 && len(latest) == 0 {
		return nil
	}
	out := make(map[string]any, len(u)+len(latest))
	for k, v := range u { // building a map: order does not matter
		out[k] = v
	}
	for k, v := range latest {
		out[k] = v
	}
	return out
}

// searchAttributes are what the TacpSessionState, TacpTurn and TacpAwaitingApproval search
// attributes show: the state, the live turn (or the last one queued), whether a permission
// request waits.
func (s *sessionCore) searchAttributes() (state string, turn int64, awaiting bool) {
	turn = s.Queue.LastTurnID
	if s.Turn != nil {
		turn = s.Turn.TurnID
	}
	return s.state(), turn, len(s.Permissions) > 0 || len(s.Elicitations) > 0
}

// status is the status query's answer; the shell adds the run's history length and build.
// It holds nothing of the worker that answers (not its profiles, not its default profile's
// name): every worker answers a session the same (contract §4).
func (s *sessionCore) status() signals.Status {
	st := signals.Status{
		SessionID:           s.cfg.SessionID,
		State:               s.state(),
		SteerToken:          s.Steer.Token(),
		Viewers:             s.viewersView(),
		Queue:               s.Queue.Entries(),
		PendingPermissions:  s.pendingPermissions(),
		PendingElicitations: s.pendingElicitations(),
		Policy:              s.Policy.Level,
		Rules:               append([]string{}, s.Policy.Rules...),
		Usage:               usageView(s.Usage, s.UsageLatest),
		Journal:             s.Journal.Range(),
		Agent:               sessionAgent(s.cfg.Agent),
		Title:               s.Title,
		AgentSessionID:      s.AgentSessionID,
		AgentSettings:       s.Settings.View(),
		AgentHost:           s.AgentHost,
		Sandbox:             s.Sandbox,
		ContextLost:         s.ContextLost,
		WaitingLimit:        s.limitView(),
		Run:                 s.Run,
	}
	if s.Turn != nil {
		st.TurnID = s.Turn.TurnID
		started := s.Turn.StartedAt
		st.TurnStartedAt = &started
		if d, ok := s.Turn.Clock.deadline(s.cfg.Deadline); ok {
			st.TurnDeadline = &d // nil while a permission waits: the clock is paused
		}
	}
	return st
}

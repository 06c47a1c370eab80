package workflows

// SessionWorkflow is the shell around the pure cores: it is the single writer of a session's
// state and serializes updates, signals and the turn loop into the queue, steer and journal
// cores. Handlers only change state and never block; the main loop alone issues commands
// (start a turn, cancel it, upsert search attributes, continue as new), so that a run can
// continue as new at any workflow-task boundary, a running turn included (DESIGN §6).

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
)

// LiveTurn is the running turn as the session knows it.
type LiveTurn struct {
	TurnID          int64     `json:"turn_id"`
	ClientMessageID string    `json:"client_message_id"`
	Attempt         int32     `json:"attempt"`
	HostQueue       string    `json:"host_queue,omitempty"`
	StartedAt       time.Time `json:"started_at"`
	// Started is set once the TurnWorkflow child is known to exist.
	Started bool `json:"started"`
	// Cancelling is set by cancel or close; CancelSent once the cancel request is recorded.
	Cancelling   bool   `json:"cancelling"`
	CancelReason string `json:"cancel_reason,omitempty"`
	CancelSent   bool   `json:"cancel_sent"`
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
	// live agent: the next turn goes there first (affinity, DESIGN §10).
	AgentHost string `json:"agent_host,omitempty"`
	// ContextLost is the last agent.context_lost, for status.
	ContextLost *signals.ContextLostView `json:"context_lost,omitempty"`
	Closing     bool                     `json:"closing,omitempty"`
	CloseReason string                   `json:"close_reason,omitempty"`
	// Deliveries wait to be sent into the live turn, oldest first.
	Deliveries  []signals.Delivery                       `json:"deliveries,omitempty"`
	Permissions []openPermission                         `json:"permissions,omitempty"`
	Resolved    DedupIndex[signals.PermissionResolution] `json:"resolved"`
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

// session is one run of SessionWorkflow.
type session struct {
	sessionState
	cfg Config
	adm Admission

	receivers []signalReceiver

	// per-run counters and bookkeeping (not carried)
	updates, signalsSeen int
	pending              int // commands whose futures have not resolved
	lastSA               string
	delivering           bool
	inFlight             signals.Delivery // the delivery being sent, while delivering
	deliveryVersion      *workflow.Version
	steerOrderVersion    *workflow.Version

	// the alarm timer of this run (belts.go)
	alarmAt       time.Time
	alarmFired    bool
	alarmGen      int
	cancelAlarm   workflow.CancelFunc
	alarmsVersion *workflow.Version
	alarmLabel    string

	saVersion       *workflow.Version
	settingsVersion *workflow.Version
}

// SessionWorkflow runs one tacp session with no admission of its own (tests; a worker
// registers NewSessionWorkflow with its Admission). See the package documentation and
// DESIGN.md.
func SessionWorkflow(ctx workflow.Context, in sessionInput) error {
	return sessionWorkflow(ctx, in, nil)
}

// sessionInput is SessionWorkflow's argument: a client's signals.SessionConfig, and, in a
// run started by continue-as-new, the state the previous run carried. The config is
// embedded, so the JSON is the config's own plus "carried": a client's {"session_id": "s1"}
// decodes, and so do the inputs recorded before Carried left signals.SessionConfig.
type sessionInput struct {
	signals.SessionConfig
	// Carried is the sessionState a run hands to the next; clients never set it.
	Carried json.RawMessage `json:"carried,omitempty"`
}

func sessionWorkflow(ctx workflow.Context, in sessionInput, adm Admission) error {
	cfg, err := ResolveConfig(in.SessionConfig)
	if err == nil && len(in.Carried) == 0 {
		if msg := admitAtStart(ctx, adm, in.SessionConfig); msg != "" {
			err = errors.New(msg)
		}
	}
	if err != nil {
		// signals.Client refuses such a config before it starts anything; a client that did
		// not check gets the reason for its first prompt instead of "unknown update".
		rej := signals.Reject(signals.RejectInvalidRequest, "invalid session config: %v", err)
		refuse := func(workflow.Context, json.RawMessage) (struct{}, error) { return struct{}{}, rej.ApplicationError() }
		validate := func(workflow.Context, json.RawMessage) error { return rej.ApplicationError() }
		// The updates a session can be started with (signals.Client's Prompt and Start).
		for _, name := range []string{signals.UpdatePrompt, signals.UpdateAttach, signals.UpdateDetach} {
			_ = workflow.SetUpdateHandlerWithOptions(ctx, name, refuse, workflow.UpdateHandlerOptions{Validator: validate})
		}
		return temporal.NewNonRetryableApplicationError(err.Error(), signals.RejectInvalidRequest, nil)
	}
	s := &session{cfg: cfg, adm: adm}
	if len(in.Carried) > 0 {
		if err := json.Unmarshal(in.Carried, &s.sessionState); err != nil {
			return temporal.NewNonRetryableApplicationError("decode carried state: "+err.Error(), "carried_state", nil)
		}
		s.Journal.Recount()
		s.Run++
		if s.Policy == nil { // carried by a version that had none
			s.Policy = &Policy{Level: cfg.Policy}
		}
	} else {
		s.Run = 1
		s.Queue = NewQueue(cfg.QueueLimit)
		s.Steer = NewSteer()
		s.Journal = NewJournal(cfg.JournalSize)
		s.Resolved = NewDedupIndex[signals.PermissionResolution]()
		s.Policy = &Policy{Level: cfg.Policy}
		s.journal(ctx, signals.EventSessionStarted, 0, signals.SessionStartedData{Agent: sessionAgent(cfg.Agent), Workspace: cfg.Workspace, Run: 1})
	}
	if err := s.register(ctx); err != nil {
		return err
	}
	return s.loop(ctx)
}

func (s *session) journal(ctx workflow.Context, kind string, turnID int64, data any) {
	s.Journal.Append(kind, turnID, workflow.Now(ctx), data)
}

// busy reports whether a turn holds the session (queued prompts wait behind it).
func (s *session) busy() bool { return s.Turn != nil }

func (s *session) register(ctx workflow.Context) error {
	type reg struct {
		name      string
		handler   any
		validator any
	}
	for _, r := range []reg{
		{signals.UpdatePrompt, s.prompt, s.validatePrompt},
		{signals.UpdateSteer, s.steer, s.validateSteer},
		{signals.UpdateCancel, s.cancel, s.validateCancel},
		{signals.UpdatePermissionRespond, s.respond, s.validateRespond},
		{signals.UpdatePermissionForget, s.forget, s.validateForget},
		{signals.UpdateSetPolicy, s.setPolicy, s.validateSetPolicy},
		{signals.UpdateAttach, s.attach, s.validateAttach},
		{signals.UpdateDetach, s.detach, nil},
		{signals.UpdateClose, s.close, nil},
		{signals.UpdateSetMode, s.setMode, s.validateSetMode},
		{signals.UpdateSetConfigOption, s.setConfig, s.validateSetConfig},
		{signals.UpdateSetMcpServers, s.setMcpServers, s.validateSetMcpServers},
	} {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, r.name, r.handler, workflow.UpdateHandlerOptions{Validator: r.validator}); err != nil {
			return err
		}
	}
	if err := workflow.SetQueryHandler(ctx, signals.QueryStatus, func() (signals.Status, error) {
		return s.status(ctx), nil
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, signals.QueryEvents, func(req signals.EventsRequest) (signals.EventsResult, error) {
		return s.Journal.Since(req.AfterSeq, req.Limit), nil
	}); err != nil {
		return err
	}
	// The transcript is asked for by a runner that could not load the agent's session, at
	// the moment it needs it: a query costs no history, so the warm path pays nothing.
	if err := workflow.SetQueryHandler(ctx, signals.QueryTranscript, func(req signals.TranscriptRequest) (signals.TranscriptResult, error) {
		return BuildTranscript(s.Journal.Events, req.BeforeTurn, req.MaxBytes), nil
	}); err != nil {
		return err
	}
	s.receivers = append(append(s.signalReceivers(), s.settingsSignals()...), s.mcpSignal())
	for i := range s.receivers {
		s.receivers[i].ch = workflow.GetSignalChannel(ctx, s.receivers[i].name)
	}
	return nil
}

// signalReceiver is one signal channel and its handler. Signals are handled by the main
// loop, not by coroutines of their own: a signal a coroutine has been handed but not yet run
// would be lost by a continue-as-new in the same workflow task.
type signalReceiver struct {
	name   string
	handle func(workflow.Context, json.RawMessage)
	ch     workflow.ReceiveChannel
}

// signalReceivers lists the signals in the order they are drained within a workflow task:
// a turn's start, its events, its end (turn_finished also waits for its last batch, whatever
// the order), then the clients' signals.
func (s *session) signalReceivers() []signalReceiver {
	return []signalReceiver{
		{name: signals.SignalTurnStarted, handle: decoded(s.turnStarted)},
		{name: signals.SignalTurnEvents, handle: decoded(s.turnEvents)},
		{name: signals.SignalPermissionRequested, handle: decoded(s.permissionRequested)},
		{name: signals.SignalTurnFinished, handle: decoded(s.turnFinished)},
		{name: signals.UpdatePrompt, handle: decoded(func(ctx workflow.Context, req signals.PromptRequest) {
			if rej := s.checkPrompt(req); rej != nil {
				s.journal(ctx, signals.EventPromptRejected, 0, signals.RejectedData{ClientMessageID: req.ClientMessageID, Type: rej.Type, Message: rej.Message})
				return
			}
			_, _ = s.prompt(ctx, req)
		})},
		{name: signals.UpdateSteer, handle: decoded(func(ctx workflow.Context, req signals.SteerRequest) {
			if err := s.validateSteer(ctx, req); err != nil {
				rej, _ := signals.AsRejection(err)
				s.journal(ctx, signals.EventSteerRejected, s.Steer.TurnID, signals.RejectedData{ClientMsgID: req.ClientMsgID, Type: rej.Type, Message: rej.Message, Details: rej.Details})
				countSteer(ctx, rej.Type)
				return
			}
			_, _ = s.steer(ctx, req)
		})},
		{name: signals.UpdateCancel, handle: decoded(func(ctx workflow.Context, req signals.CancelRequest) {
			if s.validateCancel(ctx, req) == nil {
				_, _ = s.cancel(ctx, req)
			}
		})},
		{name: signals.UpdatePermissionRespond, handle: decoded(func(ctx workflow.Context, req signals.PermissionRespondRequest) {
			if s.validateRespond(ctx, req) == nil {
				_, _ = s.respond(ctx, req)
			}
		})},
		{name: signals.UpdatePermissionForget, handle: decoded(func(ctx workflow.Context, req signals.PermissionForgetRequest) {
			_, _ = s.forget(ctx, req)
		})},
		{name: signals.UpdateSetPolicy, handle: decoded(func(ctx workflow.Context, req signals.SetPolicyRequest) {
			_, _ = s.setPolicy(ctx, req)
		})},
		{name: signals.UpdateAttach, handle: decoded(func(ctx workflow.Context, req signals.AttachRequest) {
			_, _ = s.attach(ctx, req)
		})},
		{name: signals.UpdateDetach, handle: decoded(func(ctx workflow.Context, req signals.DetachRequest) {
			_, _ = s.detach(ctx, req)
		})},
		{name: signals.UpdateClose, handle: decoded(func(ctx workflow.Context, req signals.CloseRequest) {
			_, _ = s.close(ctx, req)
		})},
	}
}

// decoded adapts a typed signal handler to raw JSON; a payload that does not decode is
// logged and dropped (a signal cannot be refused).
func decoded[T any](h func(workflow.Context, T)) func(workflow.Context, json.RawMessage) {
	return func(ctx workflow.Context, raw json.RawMessage) {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			workflow.GetLogger(ctx).Warn("dropping malformed signal", "error", err)
			return
		}
		h(ctx, v)
	}
}

// --- prompt ---

func (s *session) checkPrompt(req signals.PromptRequest) *signals.Rejection {
	if s.Closing {
		return signals.Reject(signals.RejectSessionClosed, "session is closed")
	}
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return rej
	}
	_, rej := s.Queue.Check(req, s.busy())
	return rej
}

func (s *session) validatePrompt(ctx workflow.Context, req signals.PromptRequest) error {
	if rej := s.checkPrompt(req); rej != nil {
		return rej.ApplicationError()
	}
	// Content is kept as the client's bytes (text fields are decoded, and Go's decoder
	// replaces invalid UTF-8 in them); refuse bytes that are not UTF-8 before they reach the
	// journal and the agent. Only the validator checks it: validators do not run on replay,
	// so a prompt an older worker accepted replays as it was.
	if !utf8.Valid(req.Content) {
		return signals.Reject(signals.RejectInvalidRequest, "prompt content is not valid UTF-8").ApplicationError()
	}
	// The worker may no longer offer what the session names (a profile removed, a workspace
	// that became a symlink out of its root): refuse before any turn runs (DESIGN §10).
	if msg := admissionMessage(s.adm, s.cfg.SessionConfig); msg != "" {
		return signals.Reject(signals.RejectInvalidRequest, "%s", msg).ApplicationError()
	}
	return nil
}

func (s *session) prompt(ctx workflow.Context, req signals.PromptRequest) (signals.PromptResult, error) {
	s.updates++
	if rej := s.checkPrompt(req); rej != nil {
		return signals.PromptResult{}, rej.ApplicationError()
	}
	res, rej := s.Queue.Offer(req, s.busy())
	if rej != nil {
		return res, rej.ApplicationError()
	}
	if !res.Duplicate {
		text, cut := journalText(req.Text)
		s.journal(ctx, signals.EventPromptAccepted, res.TurnID, signals.PromptAcceptedData{
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

func (s *session) validateSteer(ctx workflow.Context, req signals.SteerRequest) error {
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return rej.ApplicationError()
	}
	if _, rej := s.Steer.Decide(req, s.steerChannel()); rej != nil {
		return rej.ApplicationError()
	}
	return nil
}

func (s *session) steer(ctx workflow.Context, req signals.SteerRequest) (signals.SteerResult, error) {
	s.updates++
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return signals.SteerResult{}, rej.ApplicationError()
	}
	res, rej := s.Steer.Accept(req, s.steerChannel())
	if rej != nil {
		return res, rej.ApplicationError()
	}
	countSteer(ctx, res.Outcome)
	if res.Outcome == signals.SteerAccepted {
		text, cut := journalText(req.Text)
		s.journal(ctx, signals.EventSteerAccepted, res.Ref.TurnID, signals.SteerAcceptedData{
			Ref: res.Ref, Text: text, TextTruncated: cut, NextExpectedTurnID: res.NextExpectedTurnID,
		})
		s.queueDelivery(signals.Delivery{Kind: signals.DeliverSteer, Text: req.Text, Offset: res.Ref.Offset})
	}
	return res, nil
}

// --- cancel and close ---

func (s *session) validateCancel(ctx workflow.Context, req signals.CancelRequest) error {
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return rej.ApplicationError()
	}
	if s.Turn == nil || (req.TurnID != 0 && req.TurnID != s.Turn.TurnID) {
		return signals.Reject(signals.RejectNoLiveTurn, "no turn %s is running", turnLabel(req.TurnID)).ApplicationError()
	}
	return nil
}

func turnLabel(id int64) string {
	if id == 0 {
		return "at all"
	}
	return strconv.FormatInt(id, 10)
}

func (s *session) cancel(ctx workflow.Context, req signals.CancelRequest) (signals.CancelResult, error) {
	s.updates++
	if err := s.validateCancel(ctx, req); err != nil {
		return signals.CancelResult{}, err
	}
	if s.Turn.Cancelling {
		return signals.CancelResult{Outcome: signals.CancelAlreadyCancelling}, nil
	}
	s.startCancel(ctx, "cancel")
	return signals.CancelResult{Outcome: signals.CancelCancelling}, nil
}

// startCancel marks the live turn cancelling; the main loop sends the cancel request.
func (s *session) startCancel(ctx workflow.Context, reason string) {
	s.Turn.Cancelling, s.Turn.CancelReason = true, reason
	s.GraceUntil = nil
	s.Steer.Halt()
	s.journal(ctx, signals.EventTurnCancelling, s.Turn.TurnID, signals.TurnCancellingData{Reason: reason})
	who := reason // grace, deadline, close: the system's
	if reason == "cancel" {
		who = "user" // a person's (or a client's) cancel
	}
	s.cancelPermissions(ctx, s.Turn.TurnID, signals.DecidedByCancel, who)
	if s.Turn.Finished == nil {
		s.queueDelivery(signals.Delivery{Kind: signals.DeliverCancel})
	}
}

func (s *session) close(ctx workflow.Context, req signals.CloseRequest) (signals.CloseResult, error) {
	s.updates++
	if s.Closing {
		return signals.CloseResult{}, nil
	}
	s.Closing, s.CloseReason = true, req.Reason
	if s.Turn != nil && !s.Turn.Cancelling {
		s.startCancel(ctx, "close")
	}
	return signals.CloseResult{}, nil
}

// --- the turn runner's signals ---

func (s *session) liveTurn(turnID int64) *LiveTurn {
	if s.Turn == nil || s.Turn.TurnID != turnID {
		return nil
	}
	return s.Turn
}

// advanceAttempt moves the live turn to a newer attempt of its activity: the partial output
// of the old attempt is superseded, which viewers learn from turn.restarted.
func (s *session) advanceAttempt(ctx workflow.Context, t *LiveTurn, attempt int32) {
	s.advanceAttemptResumed(ctx, t, attempt, false)
}

// advanceAttemptResumed is advanceAttempt for an attempt that says whether it found the
// prompt in the agent session it loaded (resumed: the prompt was not sent again).
func (s *session) advanceAttemptResumed(ctx workflow.Context, t *LiveTurn, attempt int32, resumed bool) {
	if attempt <= t.Attempt {
		return
	}
	cause := restartCause(t, attempt)
	t.Attempt, t.LastBatch, t.HostQueue, t.HostLost = attempt, 0, "", false
	s.cancelPermissions(ctx, t.TurnID, signals.DecidedByRestart, cause) // they belonged to the lost attempt
	s.journal(ctx, signals.EventTurnRestarted, t.TurnID, signals.TurnStartedData{Attempt: attempt, PromptClientMessageID: t.ClientMessageID, Cause: cause, Resumed: resumed})
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

func (s *session) turnStarted(ctx workflow.Context, sig signals.TurnStartedSignal) {
	t := s.liveTurn(sig.TurnID)
	if t == nil || sig.Attempt < t.Attempt {
		return
	}
	if sig.Attempt > t.Attempt {
		s.advanceAttemptResumed(ctx, t, sig.Attempt, sig.Resumed)
	}
	t.HostQueue, t.HostLost = sig.HostQueue, false
	if sig.HostQueue != "" {
		s.AgentHost = sig.HostQueue
	}
	if sig.AgentSessionID != "" {
		s.AgentSessionID = sig.AgentSessionID
	}
	s.offered(ctx, t.TurnID, sig.Settings)
	if w := sig.WorkspaceMissing; w != nil {
		s.journal(ctx, signals.EventWorkspaceMissing, t.TurnID, *w)
	}
	if cl := sig.ContextLost; cl != nil {
		ev := s.Journal.Append(signals.EventAgentContextLost, t.TurnID, workflow.Now(ctx), *cl)
		s.ContextLost = &signals.ContextLostView{TurnID: t.TurnID, Seq: ev.Seq, At: ev.At, Reason: cl.Reason, Carried: cl.Carried}
	}
}

func (s *session) turnEvents(ctx workflow.Context, sig signals.TurnEventsSignal) {
	if sig.TurnID == 0 {
		s.betweenTurns(ctx, sig)
		return
	}
	t := s.liveTurn(sig.TurnID)
	if t == nil || sig.Attempt < t.Attempt {
		return
	}
	s.advanceAttempt(ctx, t, sig.Attempt)
	if sig.Batch <= t.LastBatch {
		return // a repeated delivery of a batch already journaled
	}
	t.LastBatch = sig.Batch
	for _, ev := range sig.Events {
		s.journal(ctx, signals.EventAgentUpdate, t.TurnID, ev)
		s.observeSettings(ctx, t.TurnID, ev)
	}
	s.maybeFinish(ctx)
}

func (s *session) turnFinished(ctx workflow.Context, sig signals.TurnFinishedSignal) {
	t := s.liveTurn(sig.TurnID)
	if t == nil || (sig.Attempt != 0 && sig.Attempt < t.Attempt) {
		return
	}
	if sig.Attempt > t.Attempt {
		s.advanceAttempt(ctx, t, sig.Attempt)
	}
	t.Finished = &sig
	s.maybeFinish(ctx)
}

// betweenTurns journals what an agent said while no turn held it (background tools),
// idempotent per agent process and batch.
func (s *session) betweenTurns(ctx workflow.Context, sig signals.TurnEventsSignal) {
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
		s.journal(ctx, signals.EventAgentUpdate, 0, ev)
		s.observeSettings(ctx, 0, ev)
	}
}

// addUsage adds a turn's reported usage to the session's totals and journals both.
func (s *session) addUsage(ctx workflow.Context, turnID int64, raw json.RawMessage) {
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
	s.journal(ctx, signals.EventUsageUpdated, turnID, map[string]any{"turn": turn, "total": usageView(s.Usage, s.UsageLatest)})
}

// maybeFinish ends the live turn once its turn_finished has arrived and, when it came from a
// known attempt, every batch that attempt sent before it.
func (s *session) maybeFinish(ctx workflow.Context) {
	t := s.Turn
	if t == nil || t.Finished == nil {
		return
	}
	fin := t.Finished
	if fin.Attempt == t.Attempt && fin.Batches > t.LastBatch {
		return
	}
	if s.steerInFlight(ctx, fin) {
		return // delivered() finishes the turn once the steer's outcome is journaled
	}
	if fin.AgentSessionID != "" {
		s.AgentSessionID = fin.AgentSessionID
	}
	// Affinity: the next turn goes to the worker that ran this one, even when this turn's
	// turn_started lost the race with its end.
	if fin.HostQueue != "" {
		s.AgentHost = fin.HostQueue
	}
	s.cancelPermissions(ctx, t.TurnID, signals.DecidedByCancel, "turn ended")
	if len(fin.Usage) > 0 {
		s.addUsage(ctx, t.TurnID, fin.Usage)
	}
	if fin.Error == "" && t.CancelReason == "deadline" {
		fin.Error = s.deadlineMessage()
	}
	s.GraceUntil = nil
	if fin.Error != "" {
		s.journal(ctx, signals.EventTurnFailed, t.TurnID, signals.TurnFailedData{Error: fin.Error, Orphaned: fin.Orphaned})
		s.LastOutcome = OutcomeFailed
	} else {
		s.journal(ctx, signals.EventTurnEnded, t.TurnID, signals.TurnEndedData{StopReason: fin.StopReason})
		s.LastOutcome = fin.StopReason
	}
	countTurnFinished(ctx, fin)
	s.Turn = nil
	s.Steer.Halt()
}

// --- queries ---

func (s *session) state() string {
	switch {
	case s.Turn == nil && s.Closing:
		return signals.StateClosed
	case s.Turn == nil:
		return signals.StateIdle
	case s.Turn.Cancelling:
		return signals.StateCancelling
	case len(s.Permissions) > 0:
		return signals.StateSuspended
	case s.GraceUntil != nil:
		return signals.StateGrace
	default:
		return signals.StateRunning
	}
}

func (s *session) status(ctx workflow.Context) signals.Status {
	st := signals.Status{
		SessionID:          s.cfg.SessionID,
		State:              s.state(),
		SteerToken:         s.Steer.Token(),
		Viewers:            s.viewersView(),
		Queue:              s.Queue.Entries(),
		PendingPermissions: s.pendingPermissions(),
		Policy:             s.Policy.Level,
		Rules:              append([]string{}, s.Policy.Rules...),
		Usage:              usageView(s.Usage, s.UsageLatest),
		Journal:            s.Journal.Range(),
		Agent:              sessionAgent(s.cfg.Agent),
		Profiles:           s.offer(),
		AgentSessionID:     s.AgentSessionID,
		AgentSettings:      s.Settings.View(),
		AgentHost:          s.AgentHost,
		ContextLost:        s.ContextLost,
		HistoryLength:      workflow.GetInfo(ctx).GetCurrentHistoryLength(),
		Run:                s.Run,
	}
	if s.cfg.Agent == "" && s.adm != nil {
		st.Agent = s.adm.DefaultProfile() // a query reads the worker's settings, not history
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

// offer lists the profiles the worker answering a status query offers.
func (s *session) offer() []signals.ProfileInfo {
	if s.adm == nil {
		return nil
	}
	return s.adm.Offer()
}

// --- the main loop ---

// signalsPending reports whether a signal waits in a channel.
func (s *session) signalsPending() bool {
	for _, r := range s.receivers {
		if r.ch.Len() > 0 {
			return true
		}
	}
	return false
}

// drainSignals handles every signal received so far, channel by channel.
func (s *session) drainSignals(ctx workflow.Context) {
	for _, r := range s.receivers {
		for {
			var raw json.RawMessage
			if !r.ch.ReceiveAsync(&raw) {
				break
			}
			s.signalsSeen++
			r.handle(ctx, raw)
		}
	}
}

func (s *session) loop(ctx workflow.Context) error {
	for {
		s.drainSignals(ctx)
		s.upsertSearchAttributes(ctx)
		s.armAlarm(ctx)
		err := workflow.Await(ctx, func() bool {
			return s.signalsPending() || s.alarmFired || s.alarmNeedsArming() || s.canContinueAsNew(ctx) || s.wantsDelivery() ||
				(s.Turn != nil && s.Turn.Cancelling && s.Turn.Started && !s.Turn.CancelSent) ||
				(s.Turn == nil && len(s.Queue.Items) > 0 && !s.Closing) ||
				(s.Turn == nil && s.Closing && s.pending == 0)
		})
		if err != nil {
			return err
		}
		s.drainSignals(ctx)
		if s.alarmFired {
			s.fireAlarms(ctx)
		}
		switch {
		case s.Turn == nil && s.Closing && s.pending == 0:
			dropped := s.Queue.Drain()
			s.journal(ctx, signals.EventSessionClosed, 0, signals.SessionClosedData{Reason: s.CloseReason, Dropped: dropped})
			s.upsertSearchAttributes(ctx)
			return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
		case s.canContinueAsNew(ctx):
			return s.continueAsNew(ctx)
		case s.Turn != nil && s.Turn.Cancelling && s.Turn.Started && !s.Turn.CancelSent:
			s.Turn.CancelSent = true
			s.track(ctx, workflow.RequestCancelExternalWorkflow(ctx, signals.TurnWorkflowID(s.cfg.SessionID, s.Turn.TurnID), ""), nil)
		case s.wantsDelivery():
			s.deliverNext(ctx)
		case s.Turn == nil && len(s.Queue.Items) > 0 && !s.Closing:
			s.startTurn(ctx)
		}
	}
}

// track counts a command's future as pending until it resolves, so that continue-as-new and
// close wait for it; done, if set, runs with its error.
func (s *session) track(ctx workflow.Context, f workflow.Future, done func(error)) {
	s.pending++
	workflow.Go(ctx, func(ctx workflow.Context) {
		err := f.Get(ctx, nil)
		s.pending--
		if done != nil {
			done(err)
		}
	})
}

func (s *session) startTurn(ctx workflow.Context) {
	p, _ := s.Queue.Pop()
	now := workflow.Now(ctx)
	t := &LiveTurn{TurnID: p.TurnID, ClientMessageID: p.ClientMessageID, Attempt: 1, StartedAt: now, HadViewer: len(s.Viewers) > 0, Choices: s.Settings.Wanted()}
	t.Clock.resume(now)
	s.Turn = t
	s.Steer.Begin(t.TurnID)
	s.journal(ctx, signals.EventTurnStarted, t.TurnID, signals.TurnStartedData{Attempt: 1, PromptClientMessageID: p.ClientMessageID})
	countTurnStarted(ctx)

	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            signals.TurnWorkflowID(s.cfg.SessionID, t.TurnID),
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		StaticSummary:         fmt.Sprintf("turn %d of session %s", t.TurnID, s.cfg.SessionID),
	})
	child := workflow.ExecuteChildWorkflow(cctx, signals.TurnWorkflowType, signals.TurnInput{
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
		AffinityWait:    s.cfg.AffinityWait,
		StartToClose:    s.cfg.Deadline + turnStartToCloseSlack,
		Heartbeat:       TurnHeartbeat,
	})
	turnID := t.TurnID
	s.track(ctx, child.GetChildWorkflowExecution(), func(err error) {
		t := s.liveTurn(turnID)
		if t == nil {
			return
		}
		if err != nil {
			t.Finished = &signals.TurnFinishedSignal{TurnID: turnID, Error: "start turn workflow: " + err.Error()}
			s.maybeFinish(ctx)
			return
		}
		t.Started = true
		// In this run the child's end is visible too. A TurnWorkflow that completes, or ends
		// cancelled, has sent its turn_finished first; one that fails, times out or is
		// terminated by an operator has not, and the turn still gets its terminal event.
		workflow.Go(ctx, func(ctx workflow.Context) {
			err := child.Get(ctx, nil)
			if err == nil || temporal.IsCanceledError(err) {
				return
			}
			if t := s.liveTurn(turnID); t != nil && t.Finished == nil {
				t.Finished = &signals.TurnFinishedSignal{TurnID: turnID, Error: "turn workflow ended without reporting: " + err.Error(), Orphaned: true}
				s.maybeFinish(ctx)
			}
		})
	})
}

func (s *session) upsertSearchAttributes(ctx workflow.Context) {
	state := s.state()
	var turn int64
	if s.Turn != nil {
		turn = s.Turn.TurnID
	} else {
		turn = s.Queue.LastTurnID
	}
	awaiting := len(s.Permissions) > 0
	// What the session is doing and waiting for, for the Temporal UI's Current Details (not
	// history: the SDK answers it from the workflow's state).
	workflow.SetCurrentDetails(ctx, s.currentDetails(state, turn))
	outcome := ""
	v := s.searchAttrsVersion(ctx)
	if v > workflow.DefaultVersion {
		outcome = s.LastOutcome
	}
	key := fmt.Sprintf("%s/%d/%t/%s", state, turn, awaiting, outcome)
	if key == s.lastSA {
		return
	}
	s.lastSA = key
	attrs := []temporal.SearchAttributeUpdate{
		temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrSessionState).ValueSet(state),
		temporal.NewSearchAttributeKeyInt64(signals.SearchAttrTurn).ValueSet(turn),
		temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrAgent).ValueSet(agentName(s.cfg.Agent)),
		temporal.NewSearchAttributeKeyBool(signals.SearchAttrAwaitingApproval).ValueSet(awaiting),
	}
	if v > workflow.DefaultVersion {
		attrs = append(attrs, temporal.NewSearchAttributeKeyTime(signals.SearchAttrLastActivity).ValueSet(workflow.Now(ctx)))
	}
	if outcome != "" {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrLastOutcome).ValueSet(outcome))
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, attrs...); err != nil {
		workflow.GetLogger(ctx).Warn("upsert search attributes", "error", err)
	}
}

// searchAttrsChange guards the TacpLastOutcome and TacpLastActivity search attributes for
// runs that upserted without them.
const searchAttrsChange = "search-attributes-v2"

// searchAttrsVersion is asked once per run, at its first upsert.
func (s *session) searchAttrsVersion(ctx workflow.Context) workflow.Version {
	if s.saVersion == nil {
		v := workflow.GetVersion(ctx, searchAttrsChange, workflow.DefaultVersion, 1)
		s.saVersion = &v
	}
	return *s.saVersion
}

// currentDetails is the session's Current Details in the Temporal UI (markdown): its state,
// what it waits for (the open requests with their titles and deadlines), the steer token,
// the queue, the last outcome.
func (s *session) currentDetails(state string, turn int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** · turn %d", state, turn)
	if s.Turn != nil && !s.Turn.Cancelling {
		fmt.Fprintf(&b, " · steer token `%s`", s.Steer.Token())
	}
	if s.Turn != nil && s.Turn.Cancelling {
		fmt.Fprintf(&b, " · cancelling (%s)", s.Turn.CancelReason)
	}
	fmt.Fprintf(&b, " · %d queued", len(s.Queue.Items))
	if s.LastOutcome != "" {
		fmt.Fprintf(&b, " · last turn: %s", s.LastOutcome)
	}
	for _, p := range s.pendingPermissions() {
		title := p.Title
		if title == "" {
			title = p.Kind
		}
		fmt.Fprintf(&b, "\n\nwaiting for approval of *%s* (`%s`, turn %d) until %s — `starter approve --session %s %s`",
			title, p.RequestID, p.TurnID, p.Deadline.UTC().Format("2006-01-02 15:04:05 UTC"), s.cfg.SessionID, p.RequestID)
	}
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

// --- continue-as-new ---

func (s *session) canContinueAsNew(ctx workflow.Context) bool {
	if s.pending > 0 || (s.Turn != nil && !s.Turn.Started && s.Turn.Finished == nil) {
		return false // a command in flight must resolve in this run
	}
	info := workflow.GetInfo(ctx)
	idle := s.Turn == nil && len(s.Queue.Items) == 0 && !s.Closing
	return info.GetContinueAsNewSuggested() ||
		info.GetCurrentHistoryLength() >= s.cfg.MaxRunEvents ||
		// At idle a much shorter run is enough: sessions shed old history (and the
		// old-version branches it needs) soon after a deploy.
		(idle && info.GetCurrentHistoryLength() >= s.cfg.MaxRunEvents/8) ||
		s.updates >= maxRunUpdates || s.signalsSeen >= maxRunSignals
}

func (s *session) continueAsNew(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	s.drainSignals(ctx)
	carried, err := json.Marshal(s.sessionState)
	if err != nil {
		return fmt.Errorf("encode carried state: %w", err)
	}
	next := sessionInput{SessionConfig: s.cfg.SessionConfig, Carried: carried}
	return workflow.NewContinueAsNewError(ctx, SessionWorkflow, next)
}

// IsContinueAsNew reports whether err is the continue-as-new a run ends with.
func IsContinueAsNew(err error) bool {
	var can *workflow.ContinueAsNewError
	return errors.As(err, &can)
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

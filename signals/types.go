package signals

import (
	"encoding/json"
	"time"
)

// SessionConfig is the one argument of SessionWorkflow. Only SessionID is required;
// durations are Go duration strings ("15m"); zero values take the defaults of contract §6.
//
// Agent names an agent profile the worker's operator defined (empty: the worker's default);
// it is never a command line. Workspace must resolve inside the worker's workspace roots
// (empty: the session's own folder; relative: inside the first root). contract §10.
type SessionConfig struct {
	SessionID         string `json:"session_id"`
	Agent             string `json:"agent,omitempty"`
	Workspace         string `json:"workspace,omitempty"`
	QueueLimit        int    `json:"queue_limit,omitempty"`
	JournalSize       int    `json:"journal_size,omitempty"`
	GraceWindow       string `json:"grace_window,omitempty"`
	TurnDeadline      string `json:"turn_deadline,omitempty"`
	PermissionTimeout string `json:"permission_timeout,omitempty"`
	// AffinityWait bounds how long a turn waits for the worker holding the session's agent
	// to take it before any worker may (contract §10; empty: 3s).
	AffinityWait string `json:"affinity_wait,omitempty"`
	Policy       string `json:"policy,omitempty"`
	Steering     *bool  `json:"steering,omitempty"`
	MaxRunEvents int    `json:"max_run_events,omitempty"`
	// McpServers is the ACP McpServer list the client passes the agent (session/new's
	// mcpServers), as JSON: kept in the session, encrypted with its payloads when the codec
	// is on, never logged or journaled, and checked by the worker's MCP policy.
	McpServers json.RawMessage `json:"mcp_servers,omitempty"`
	// ForkOf makes the session a fork of another's conversation (contract §3 "Forks"): its
	// agent starts from that session's transcript before ForkOf.BeforeTurn.
	ForkOf *ForkOrigin `json:"fork_of,omitempty"`
	// Access names the session's owner, its sharing rule and its shares (signals/access.go):
	// the doors people use check it; status and session.started show it.
	Access
}

// PromptRequest is the payload of the prompt update and signal.
type PromptRequest struct {
	Text string `json:"text"`
	// Content is optional ACP content blocks sent instead of a single text block.
	Content         json.RawMessage `json:"content,omitempty"`
	ClientMessageID string          `json:"client_message_id"`
	ViewerID        string          `json:"viewer_id,omitempty"`
	// By names the person or client that sends the prompt, as answered_by does
	// ("deck:alice", "cli:alice@laptop", "acp:Zed (viewer v1)"); journaled in
	// prompt.accepted.
	By string `json:"by,omitempty"`
	// Unwatched says nobody follows this turn as it streams (a background prompt, `prompt
	// --no-wait`): its runner journals the agent's events in batches at its longest flush
	// interval from the start, where a watched turn's first events go out at once and then
	// every FlushInterval. A streamed minute then costs a few dozen turn_events signals
	// instead of hundreds; the turn's end, its permission requests and questions are not
	// delayed.
	Unwatched bool `json:"unwatched,omitempty"`
}

// PromptResult answers a prompt: the turn it will run as, how many prompts are ahead of it
// (0: it runs now), and whether it repeats an earlier client_message_id.
type PromptResult struct {
	TurnID    int64 `json:"turn_id"`
	Position  int   `json:"position"`
	Duplicate bool  `json:"duplicate"`
}

// SteerRequest is the payload of the steer update and signal. ExpectedTurnID is the steer
// token the client last saw (status steer_token or a previous next_expected_turn_id).
type SteerRequest struct {
	Text           string `json:"text"`
	ExpectedTurnID string `json:"expected_turn_id"`
	ClientMsgID    string `json:"client_msg_id,omitempty"`
	ViewerID       string `json:"viewer_id,omitempty"`
	// By names who steers (as PromptRequest.By); journaled in steer.accepted.
	By string `json:"by,omitempty"`
}

// Steer outcomes of an accepted steer update.
const (
	SteerAccepted  = "accepted"
	SteerDuplicate = "duplicate"
)

// SteerRef names one accepted steer: its turn, its ordinal within the turn (1 for token
// "7.1") and the client's id for it.
type SteerRef struct {
	TurnID      int64  `json:"turn_id"`
	Offset      int    `json:"offset"`
	ClientMsgID string `json:"client_msg_id,omitempty"`
}

// SteerResult answers an accepted (or duplicate) steer.
type SteerResult struct {
	Outcome            string   `json:"outcome"`
	Ref                SteerRef `json:"ref"`
	NextExpectedTurnID string   `json:"next_expected_turn_id"`
}

// StaleTurnDetails are the details of a stale_turn rejection.
type StaleTurnDetails struct {
	Expected string `json:"expected"`
	Actual   string `json:"actual"`
}

// CancelRequest is the payload of the cancel update and signal. TurnID, when set, must name
// the live turn.
type CancelRequest struct {
	TurnID   int64  `json:"turn_id,omitempty"`
	ViewerID string `json:"viewer_id,omitempty"`
	// By names who cancels (as PromptRequest.By); journaled in turn.cancelling.
	By string `json:"by,omitempty"`
}

// Cancel outcomes.
const (
	CancelCancelling        = "cancelling"
	CancelAlreadyCancelling = "already_cancelling"
)

// CancelResult answers cancel.
type CancelResult struct {
	Outcome string `json:"outcome"`
}

// CloseRequest is the payload of the close update and signal.
type CloseRequest struct {
	Reason string `json:"reason,omitempty"`
	// By names who closes (as PromptRequest.By); journaled in session.closed.
	By string `json:"by,omitempty"`
	// Delete also removes what tacp keeps of the session on the worker that holds its
	// agent (its agent's per-session state and temp), and its workspace when
	// DeleteWorkspace; the journal's session.deleted says what went (contract §3 "Deleting").
	Delete          bool `json:"delete,omitempty"`
	DeleteWorkspace bool `json:"delete_workspace,omitempty"`
}

// CloseResult answers close.
type CloseResult struct{}

// EventsRequest is the argument of the events query.
type EventsRequest struct {
	AfterSeq int64 `json:"after_seq"`
	Limit    int   `json:"limit,omitempty"`
}

// EventsResult answers the events query. Gap is true when events after AfterSeq were
// dropped by retention: the caller must take the status snapshot instead.
type EventsResult struct {
	Events           []Event `json:"events"`
	LastSeq          int64   `json:"last_seq"`
	FirstRetainedSeq int64   `json:"first_retained_seq"`
	Gap              bool    `json:"gap"`
}

// Event is one journal entry (contract §5).
type Event struct {
	Seq    int64           `json:"seq"`
	Kind   string          `json:"kind"`
	TurnID int64           `json:"turn_id,omitempty"`
	At     time.Time       `json:"at"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// QueuedPrompt is a prompt waiting behind the running turn.
type QueuedPrompt struct {
	TurnID          int64           `json:"turn_id"`
	ClientMessageID string          `json:"client_message_id"`
	Text            string          `json:"text"`
	Content         json.RawMessage `json:"content,omitempty"`
	Unwatched       bool            `json:"unwatched,omitempty"`
}

// QueueEntry is a queued prompt as status shows it (without its text).
type QueueEntry struct {
	TurnID          int64  `json:"turn_id"`
	ClientMessageID string `json:"client_message_id"`
	Bytes           int    `json:"bytes"`
}

// JournalRange is the retained part of the journal.
type JournalRange struct {
	FirstSeq int64 `json:"first_seq"`
	LastSeq  int64 `json:"last_seq"`
}

// Status is the answer of the status query: a snapshot of the session.
type Status struct {
	SessionID string `json:"session_id"`
	// Title is the title a person gave the session (set_title), "" when none.
	Title              string              `json:"title,omitempty"`
	State              string              `json:"state"`
	TurnID             int64               `json:"turn_id"`
	SteerToken         string              `json:"steer_token"`
	TurnStartedAt      *time.Time          `json:"turn_started_at,omitempty"`
	TurnDeadline       *time.Time          `json:"turn_deadline,omitempty"`
	Viewers            []Viewer            `json:"viewers"`
	Queue              []QueueEntry        `json:"queue"`
	PendingPermissions []PendingPermission `json:"pending_permissions"`
	// PendingElicitations are the questions the agent asked that wait for an answer.
	PendingElicitations []PendingElicitation `json:"pending_elicitations,omitempty"`
	Policy              string               `json:"policy"`
	Rules               []string             `json:"rules"`
	// Access is the session's owner, sharing rule and shares, as it was created.
	Access
	Usage   map[string]any `json:"usage,omitempty"`
	Journal JournalRange   `json:"journal"`
	// Agent is the session's agent profile (the worker's default when it names none);
	// Profiles the profiles the worker answering offers.
	Agent          string        `json:"agent"`
	Profiles       []ProfileInfo `json:"profiles,omitempty"`
	AgentSessionID string        `json:"agent_session_id,omitempty"`
	// AgentSettings is the latest the agent offered (modes, config options, commands,
	// capabilities), with the clients' choices applied.
	AgentSettings *AgentSettings `json:"agent_settings,omitempty"`
	// AgentHost is the host queue of the worker that holds the session's live agent (the one
	// that ran its last attempt): the next turn goes there first.
	AgentHost string `json:"agent_host,omitempty"`
	// Sandbox is the kernel sandbox the session's last attempt ran its agent in, as that
	// worker said ("off", or what it allows; "" before any turn ran).
	Sandbox string `json:"sandbox,omitempty"`
	// ContextLost is the last agent.context_lost of the session, with its turn (nil: the
	// agent has kept the whole conversation).
	ContextLost *ContextLostView `json:"context_lost,omitempty"`
	// WaitingLimit is the live turn's wait for a provider's limit (nil: none waits).
	WaitingLimit *LimitWait `json:"waiting_limit,omitempty"`
	// WaitingWorker is set while the live turn's attempt is scheduled and no worker has
	// taken it: every worker runs as many turns as it may (-turns.max), or none polls.
	// Client.Status reads it from the session's pending activity; the workflow cannot know.
	WaitingWorker *WorkerWait `json:"waiting_worker,omitempty"`
	// Ended says how a session whose workflow ended without closing ended ("terminated by
	// an operator: …", "failed: …", "timed out"); State is then StateTerminated (or the
	// workflow's status: failed, timed_out, canceled). Client.Status reads it from the
	// workflow's description: a terminated run answers queries with the state it had.
	Ended         string `json:"ended,omitempty"`
	HistoryLength int    `json:"history_length"`
	Run           int    `json:"run"`
	// BuildID is the build of the worker that answered (a pinned run's is the build it is
	// pinned to); empty on an unversioned worker.
	BuildID string `json:"build_id,omitempty"`
}

// WorkerWait is status's account of a turn waiting for a worker with room.
type WorkerWait struct {
	TurnID int64 `json:"turn_id"`
	// Since is when the waiting attempt was scheduled.
	Since time.Time `json:"since"`
}

// ContextLostView is status's account of the last agent.context_lost.
type ContextLostView struct {
	TurnID  int64     `json:"turn_id"`
	Seq     int64     `json:"seq"`
	At      time.Time `json:"at"`
	Reason  string    `json:"reason"`
	Carried int       `json:"carried_bytes"`
}

// --- Turn runner wire (contract §7): the turn, the RunTurn activity's input and result, and
// the signals the runner sends to the session workflow. ---

// TurnInput is one turn as the session runs it: its prompt and what the runner needs to run
// it (RunTurnInput carries it to the RunTurn activity).
type TurnInput struct {
	SessionID       string          `json:"session_id"`
	TurnID          int64           `json:"turn_id"`
	ClientMessageID string          `json:"client_message_id"`
	Text            string          `json:"text"`
	Content         json.RawMessage `json:"content,omitempty"`
	Agent           string          `json:"agent,omitempty"`
	Workspace       string          `json:"workspace,omitempty"`
	AgentSessionID  string          `json:"agent_session_id,omitempty"`
	// Choices is the mode and config values clients chose: the runner applies them after
	// session/new or session/load, before the first prompt, where the agent differs.
	Choices *SessionChoices `json:"choices,omitempty"`
	// Policy is the session's permission level when the turn began: under an asking level
	// the runner puts the agent in a mode that asks before its first prompt (empty: ask).
	Policy string `json:"policy,omitempty"`
	// McpServers are the ACP McpServer JSON list the client gave the session (session/new),
	// passed to the agent's session/new and session/load after the worker's MCP policy.
	McpServers json.RawMessage `json:"mcp_servers,omitempty"`
	// StartToClose bounds one attempt of the turn activity.
	StartToClose time.Duration `json:"start_to_close"`
	// Heartbeat is the turn activity's heartbeat timeout: how fast a lost worker is noticed.
	Heartbeat time.Duration `json:"heartbeat"`
	// HostQueue is the host queue of the worker that ran the session's last turn, which
	// holds its live agent: the turn goes there first (affinity, contract §10) and to the
	// session queue only when that worker does not take it within AffinityWait.
	HostQueue string `json:"host_queue,omitempty"`
	// ForkOf is the session's SessionConfig.ForkOf: a new agent session of a fork starts
	// from the origin's transcript.
	ForkOf       *ForkOrigin   `json:"fork_of,omitempty"`
	AffinityWait time.Duration `json:"affinity_wait,omitempty"`
	// Unwatched is the prompt's PromptRequest.Unwatched.
	Unwatched bool `json:"unwatched,omitempty"`
}

// RunTurnInput is the argument of the RunTurn activity, which the session schedules for
// each attempt of a turn. When the session's run ends while an attempt runs (it continued
// as new), the attempt holds the turn for the next run to adopt (Adopt) instead of ending.
type RunTurnInput struct {
	TurnInput
	SessionWorkflowID string `json:"session_workflow_id"`
	// AttemptBase is how many attempts of the turn ran before this activity (an attempt on
	// the previous host's queue): the runner numbers its attempts AttemptBase+1, ...
	AttemptBase int32 `json:"attempt_base,omitempty"`
	// Resume is the last progress of the attempt before AttemptBase+1 when it ran in
	// another activity (on the previous host), so the next attempt knows how far it got.
	Resume *TurnProgress `json:"resume,omitempty"`
	// LimitWaits is how many times the turn already waited for a limit (its backoff).
	LimitWaits int32 `json:"limit_waits,omitempty"`
	// Adopt asks this host to take over its live attempt AttemptBase of the turn, scheduled
	// by a run of the session that continued as new: the activity answers for that attempt
	// (its heartbeats, its cancel, its result) instead of starting one. A host that does
	// not hold the attempt (any more) answers TypeNothingToAdopt.
	Adopt bool `json:"adopt,omitempty"`
}

// TurnProgress is what a turn attempt records with its heartbeats: how far it got, for the
// attempt that takes the turn over.
type TurnProgress struct {
	AgentSessionID string `json:"agent_session_id"`
	// PromptSent is set once the prompt went to the agent session AgentSessionID: an attempt
	// that loads that session finds the prompt there and does not send it again.
	PromptSent bool `json:"prompt_sent,omitempty"`
}

// TranscriptRequest is the argument of the transcript query: the session's conversation
// before turn BeforeTurn (0: all of it), at most MaxBytes (0: DefaultTranscriptBytes),
// newest kept.
type TranscriptRequest struct {
	BeforeTurn int64 `json:"before_turn,omitempty"`
	MaxBytes   int   `json:"max_bytes,omitempty"`
	// Header, when set (at most MaxTranscriptHeaderBytes), opens the transcript in place of
	// the default, which says the agent's own session could not be loaded (a fork's says
	// where it was taken from).
	Header string `json:"header,omitempty"`
}

// MaxTranscriptHeaderBytes bounds TranscriptRequest.Header.
const MaxTranscriptHeaderBytes = 1024

// TranscriptResult answers the transcript query. Truncated is set when older parts were
// left out to stay within MaxBytes.
type TranscriptResult struct {
	Text      string `json:"text"`
	Turns     int    `json:"turns"`
	Truncated bool   `json:"truncated,omitempty"`
}

// DefaultTranscriptBytes bounds the transcript a new agent session is seeded with.
const DefaultTranscriptBytes = 32 << 10

// RunTurnResult is what RunTurn returns when the agent answered the prompt.
type RunTurnResult struct {
	StopReason     string          `json:"stop_reason"`
	AgentSessionID string          `json:"agent_session_id,omitempty"`
	Usage          json.RawMessage `json:"usage,omitempty"`
	// Attempt is the activity attempt that answered; Batches how many turn_events batches
	// it sent.
	Attempt int32 `json:"attempt"`
	Batches int64 `json:"batches"`
	// Host is the host queue of the worker that ran the attempt.
	Host string `json:"host,omitempty"`
	// Limited is set, with no StopReason, when the model provider limited the attempt and
	// the turn is to wait until Limited.RetryAt (signals/limits.go).
	Limited *LimitInfo `json:"limited,omitempty"`
	// Events and Started are the attempt's last batch (numbered Batches) and its
	// turn_started when no batch took it: the session's turn_finished carries them.
	Events  []json.RawMessage  `json:"events,omitempty"`
	Started *TurnStartedSignal `json:"started,omitempty"`
	// Checkpoint is the workspace checkpoint taken at the turn's end (nil: checkpoints are
	// off on the worker, or the attempt ended before its agent ran).
	Checkpoint *WorkspaceCheckpointData `json:"checkpoint,omitempty"`
}

// TypeAgentError is the ApplicationError type of a turn the agent itself failed (it answered the
// prompt with an error): not retried. Its details are a RunTurnResult with Attempt and
// Batches.
const TypeAgentError = "agent_error"

// TypeTurnNotHere is the ApplicationError type of a delivery for a turn its host does not
// run (it ended, or it runs elsewhere after a failover).
const TypeTurnNotHere = "turn_not_here"

// TypeWorkspaceMissing is the ApplicationError type of a turn failed because the session's
// workspace did not follow it to the worker that took it (-workspace.missing=fail).
const TypeWorkspaceMissing = "workspace_missing"

// TypeNothingToAdopt is the ApplicationError type of an adopting RunTurn (RunTurnInput.Adopt)
// on a host that does not hold the attempt: retried as a new attempt on the session queue.
const TypeNothingToAdopt = "nothing_to_adopt"

// TypeAttemptLost is the ApplicationError type of a turn attempt its worker gave up (it is
// shutting down, or the server stopped waiting for it): retried, on another worker.
const TypeAttemptLost = "attempt_lost"

// TypeHostBusy is the ApplicationError type of a RunTurn on a worker's host queue when that
// worker runs as many turns as it may (-turns.max): no attempt ran, and the turn goes to the
// session queue, where a worker with room takes it.
const TypeHostBusy = "host_busy"

// TurnStartedSignal tells the session that an attempt of a turn is running, where it runs
// (the host queue deliveries go to) and what it opened. A runner carries it in the first
// turn_events batch (or turn_finished) of the attempt once its agent session is open, a
// beat if the agent says nothing (TurnBeatAfter), and sends it as a turn_started signal of
// its own only before the attempt asks a person something or at a failed end; the session
// takes either.
type TurnStartedSignal struct {
	TurnID         int64  `json:"turn_id"`
	Attempt        int32  `json:"attempt"`
	HostQueue      string `json:"host_queue,omitempty"`
	AgentSessionID string `json:"agent_session_id,omitempty"`
	// Settings is what the agent offered when this attempt opened its agent session
	// (session/new or session/load); nil when it took an agent session already open.
	Settings *AgentSettings `json:"settings,omitempty"`
	// ContextLost is set when this attempt could not load the agent session the session
	// held and started a new one: the session journals agent.context_lost.
	ContextLost *AgentContextLostData `json:"context_lost,omitempty"`
	// Resumed is set when the attempt loaded the agent session, found the prompt in it and
	// did not send it again.
	Resumed bool `json:"resumed,omitempty"`
	// WorkspaceMissing is set when the session's workspace was not found on this host.
	WorkspaceMissing *WorkspaceMissingData `json:"workspace_missing,omitempty"`
	// WorkspaceRestored is set when the session's workspace was not on this host and was
	// restored from its last checkpoint.
	WorkspaceRestored *WorkspaceRestoredData `json:"workspace_restored,omitempty"`
	// Sandbox is the kernel sandbox this attempt's agent runs in (SandboxInfo.Describe:
	// "off", or what it allows); "" from a runner that did not say.
	Sandbox string `json:"sandbox,omitempty"`
}

// RunningShownAfter is how old a turn is before its session's search attributes show it
// running (after the session's first turn_started): its runner beats at TurnBeatAfter, so a
// shorter turn costs one upsert (its end), not two.
const RunningShownAfter = 2 * time.Second

// TurnBeatAfter is when, after its agent session opened, a runner makes sure the session
// hears from a turn still running (and has its turn_started): later than
// RunningShownAfter by a margin for the worker's clock against the server's.
const TurnBeatAfter = 3 * time.Second

// TurnEventsSignal carries a batch of raw ACP session/update params. It is idempotent on
// (TurnID, Attempt, Batch); batches of one attempt are numbered from 1 and sent in order.
//
// Updates an agent sends between turns come as TurnID 0 and Attempt 0, numbered per Host
// (one agent process on one worker).
//
// Started is the attempt's turn_started, carried by the first batch the attempt sends once
// its agent session is open (a runner then sends no turn_started of its own, unless the
// agent stays quiet: see TurnStartedSignal). A batch may be empty: a runner's beat.
type TurnEventsSignal struct {
	Host    string             `json:"host,omitempty"`
	TurnID  int64              `json:"turn_id"`
	Attempt int32              `json:"attempt"`
	Batch   int64              `json:"batch"`
	Events  []json.RawMessage  `json:"events"`
	Started *TurnStartedSignal `json:"started,omitempty"`
}

// TurnFinishedSignal ends a turn: StopReason when the agent answered, Error otherwise.
type TurnFinishedSignal struct {
	TurnID         int64           `json:"turn_id"`
	Attempt        int32           `json:"attempt"`
	StopReason     string          `json:"stop_reason,omitempty"`
	Error          string          `json:"error,omitempty"`
	Orphaned       bool            `json:"orphaned,omitempty"`
	AgentSessionID string          `json:"agent_session_id,omitempty"`
	Usage          json.RawMessage `json:"usage,omitempty"`
	// HostQueue is the host queue of the worker that ran the turn, where the session's agent
	// now lives: turn_started says the same, but it is sent alongside the prompt and may
	// arrive after the turn is over (a quick turn), too late to name the next turn's host.
	HostQueue string `json:"host_queue,omitempty"`
	// Batches is how many turn_events batches Attempt sent before it ended: the session
	// journals the terminal event only after all of them.
	Batches int64 `json:"batches,omitempty"`
	// Events is the attempt's last batch, numbered Batches, carried by its end instead of a
	// turn_events of its own; Started its turn_started when no batch carried it. Only the
	// runner's own report of an answered turn carries them.
	Events  []json.RawMessage  `json:"events,omitempty"`
	Started *TurnStartedSignal `json:"started,omitempty"`
	// Checkpoint is the workspace checkpoint the attempt took at the turn's end: the session
	// journals workspace.checkpoint before the turn's end.
	Checkpoint *WorkspaceCheckpointData `json:"checkpoint,omitempty"`
}

// ReleaseAgentRequest is the argument of ReleaseAgent: the session whose idle agent the host
// should stop, because a turn of it now runs on NewHost (no orphans), or because the
// session closed (Closed: its agent session is closed with session/close where the agent
// offers it, and its process stopped, busy or not).
type ReleaseAgentRequest struct {
	SessionID string `json:"session_id"`
	NewHost   string `json:"new_host,omitempty"`
	Closed    bool   `json:"closed,omitempty"`
}

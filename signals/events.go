package signals

// Event kinds of the journal (contract §5).
const (
	EventSessionStarted       = "session.started"
	EventPromptAccepted       = "prompt.accepted"
	EventPromptRejected       = "prompt.rejected"
	EventTurnStarted          = "turn.started"
	EventTurnRestarted        = "turn.restarted"
	EventAgentUpdate          = "agent.update"
	EventSteerAccepted        = "steer.accepted"
	EventSteerRejected        = "steer.rejected"
	EventSteerDelivered       = "steer.delivered"
	EventTurnCancelling       = "turn.cancelling"
	EventTurnEnded            = "turn.ended"
	EventTurnFailed           = "turn.failed"
	EventPermissionRequested  = "permission.requested"
	EventPermissionResolved   = "permission.resolved"
	EventPermissionForgotten  = "permission.forgotten"
	EventPolicyChanged        = "policy.changed"
	EventUsageUpdated         = "usage.updated"
	EventViewerGraceStarted   = "viewer.grace_started"
	EventViewerGraceCancelled = "viewer.grace_cancelled"
	EventSessionClosed        = "session.closed"
	// EventAgentContextLost: the host that took a turn could not load the agent's session
	// (no loadSession, or the load failed) and started a new one (contract §10, Affinity).
	EventAgentContextLost = "agent.context_lost"
	// EventWorkspaceMissing: the session's workspace did not follow it to the host that took
	// the turn (its marker is missing there).
	EventWorkspaceMissing = "workspace.missing"
	// EventWorkspaceCheckpoint: the host that ran a turn checkpointed its workspace at the
	// turn's end (or failed to: Error).
	EventWorkspaceCheckpoint = "workspace.checkpoint"
	// EventWorkspaceRestored: the host that took a turn did not have the session's workspace
	// and restored it from the last checkpoint in the checkpoint store.
	EventWorkspaceRestored = "workspace.restored"
)

// IsTerminal reports whether kind ends a turn (every turn.started has exactly one).
func IsTerminal(kind string) bool { return kind == EventTurnEnded || kind == EventTurnFailed }

// SessionStartedData is the data of session.started.
type SessionStartedData struct {
	Agent     string `json:"agent,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	Run       int    `json:"run"`
	// ForkOf is set on a fork: what it was taken from.
	ForkOf *ForkOrigin `json:"fork_of,omitempty"`
	// Access is who the session belongs to and whom it is shared with.
	Access
}

// PromptAcceptedData is the data of prompt.accepted. Text is cut to MaxJournalTextBytes
// (TextTruncated set) so that the journal tail always fits a continue-as-new payload; the
// agent receives the whole text.
type PromptAcceptedData struct {
	ClientMessageID string `json:"client_message_id"`
	Text            string `json:"text"`
	TextTruncated   bool   `json:"text_truncated,omitempty"`
	Position        int    `json:"position"`
	By              string `json:"by,omitempty"`
}

// RejectedData is the data of prompt.rejected and steer.rejected (signal path only): the
// rejection its sender would have got from the update.
type RejectedData struct {
	ClientMessageID string `json:"client_message_id,omitempty"`
	ClientMsgID     string `json:"client_msg_id,omitempty"`
	Type            string `json:"type"`
	Message         string `json:"message"`
	Details         any    `json:"details,omitempty"`
}

// TurnStartedData is the data of turn.started and turn.restarted.
type TurnStartedData struct {
	Attempt               int32  `json:"attempt"`
	PromptClientMessageID string `json:"prompt_client_message_id"`
	// Cause says, on turn.restarted, why the previous attempt was given up.
	Cause string `json:"cause,omitempty"`
	// Resumed is set on the turn.restarted of an attempt that loaded the agent session and
	// found the prompt already in it: the prompt was not sent again; the agent was asked to
	// continue. Viewers drop the partial text of the earlier attempt all the same.
	Resumed bool `json:"resumed,omitempty"`
	// Unwatched is set on the turn.started of a turn prompted as unwatched
	// (PromptRequest.Unwatched): its events arrive in batches seconds apart.
	Unwatched bool `json:"unwatched,omitempty"`
}

// SteerAcceptedData is the data of steer.accepted.
type SteerAcceptedData struct {
	Ref                SteerRef `json:"ref"`
	Text               string   `json:"text"`
	TextTruncated      bool     `json:"text_truncated,omitempty"`
	NextExpectedTurnID string   `json:"next_expected_turn_id"`
	By                 string   `json:"by,omitempty"`
}

// TurnCancellingData is the data of turn.cancelling.
type TurnCancellingData struct {
	Reason string `json:"reason,omitempty"`
	// By names who cancelled (a person's or client's cancel); empty for the session's own
	// (grace, deadline).
	By string `json:"by,omitempty"`
}

// TurnEndedData is the data of turn.ended.
type TurnEndedData struct {
	StopReason string `json:"stop_reason"`
}

// TurnFailedData is the data of turn.failed.
type TurnFailedData struct {
	Error    string `json:"error"`
	Orphaned bool   `json:"orphaned,omitempty"`
}

// CloseReasonOperatorCancel is the reason session.closed gives when the session closed
// because an operator requested the cancellation of its workflow through Temporal's own
// tools (the Temporal UI's "Request Cancellation", `temporal workflow cancel`).
const CloseReasonOperatorCancel = "cancelled by an operator"

// SessionClosedData is the data of session.closed. Dropped lists the client_message_ids of
// queued prompts that closing the session discarded.
type SessionClosedData struct {
	Reason  string   `json:"reason,omitempty"`
	By      string   `json:"by,omitempty"`
	Dropped []string `json:"dropped,omitempty"`
}

// AgentContextLostData is the data of agent.context_lost. Reason says why the host could not
// load the agent session it was given; Carried is how many bytes of the session's
// transcript seeded the new agent session (0: carrying context is off on that worker).
type AgentContextLostData struct {
	Reason           string `json:"reason"`
	Attempt          int32  `json:"attempt"`
	Host             string `json:"host,omitempty"`
	LostSessionID    string `json:"lost_agent_session_id,omitempty"`
	NewSessionID     string `json:"agent_session_id,omitempty"`
	Carried          int    `json:"carried_bytes"`
	CarriedTruncated bool   `json:"carried_truncated,omitempty"`
}

// WorkspaceMissingData is the data of workspace.missing: the workspace Path (on Host) did not
// hold the marker the session's earlier turns left; Action is "failed" (the turn fails) or
// "empty" (the worker's operator chose to go on in an empty workspace).
type WorkspaceMissingData struct {
	Path   string `json:"path"`
	Host   string `json:"host,omitempty"`
	Action string `json:"action"`
	// RestoreError says why the session's last checkpoint could not be restored, when the
	// worker keeps checkpoints and the restore failed.
	RestoreError string `json:"restore_error,omitempty"`
}

// Actions of workspace.missing.
const (
	WorkspaceMissingFailed = "failed"
	WorkspaceMissingEmpty  = "empty"
)

// WorkspaceCheckpointData is the data of workspace.checkpoint: the commit ID of the
// workspace as turn Turn left it, in the worker's checkpoint store, and what it changed
// against the previous checkpoint. Skipped names the untracked files over the size cap that
// it left out. Error is set, with no ID, when no checkpoint was taken, or, with an ID, when
// it was taken but not stored; the turn's outcome is its own either way.
type WorkspaceCheckpointData struct {
	Turn         int64    `json:"turn"`
	ID           string   `json:"id,omitempty"`
	FilesChanged int      `json:"files_changed"`
	Insertions   int      `json:"insertions"`
	Deletions    int      `json:"deletions"`
	Bytes        int64    `json:"bytes"`
	Skipped      []string `json:"skipped,omitempty"`
	Host         string   `json:"host,omitempty"`
	Error        string   `json:"error,omitempty"`
}

// WorkspaceRestoredData is the data of workspace.restored: the workspace Path (on Host),
// missing there, was restored from checkpoint From, taken at the end of turn Turn.
type WorkspaceRestoredData struct {
	From string `json:"from"`
	Turn int64  `json:"turn"`
	// Session is the session whose checkpoint it was, when not this one: the origin of a
	// fork, whose files the fork's first turn starts with.
	Session string `json:"session,omitempty"`
	Path    string `json:"path,omitempty"`
	Host    string `json:"host,omitempty"`
}

// MaxJournalTextBytes caps prompt and steer text copied into journal events.
const MaxJournalTextBytes = 64 << 10

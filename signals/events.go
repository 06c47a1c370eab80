package signals

// Event kinds of the journal (DESIGN §5).
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
)

// IsTerminal reports whether kind ends a turn (every turn.started has exactly one).
func IsTerminal(kind string) bool { return kind == EventTurnEnded || kind == EventTurnFailed }

// SessionStartedData is the data of session.started.
type SessionStartedData struct {
	Agent     string `json:"agent,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	Run       int    `json:"run"`
}

// PromptAcceptedData is the data of prompt.accepted. Text is cut to MaxJournalTextBytes
// (TextTruncated set) so that the journal tail always fits a continue-as-new payload; the
// agent receives the whole text.
type PromptAcceptedData struct {
	ClientMessageID string `json:"client_message_id"`
	Text            string `json:"text"`
	TextTruncated   bool   `json:"text_truncated,omitempty"`
	Position        int    `json:"position"`
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
}

// SteerAcceptedData is the data of steer.accepted.
type SteerAcceptedData struct {
	Ref                SteerRef `json:"ref"`
	Text               string   `json:"text"`
	TextTruncated      bool     `json:"text_truncated,omitempty"`
	NextExpectedTurnID string   `json:"next_expected_turn_id"`
}

// TurnCancellingData is the data of turn.cancelling.
type TurnCancellingData struct {
	Reason string `json:"reason,omitempty"`
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

// SessionClosedData is the data of session.closed. Dropped lists the client_message_ids of
// queued prompts that closing the session discarded.
type SessionClosedData struct {
	Reason  string   `json:"reason,omitempty"`
	Dropped []string `json:"dropped,omitempty"`
}

// MaxJournalTextBytes caps prompt and steer text copied into journal events.
const MaxJournalTextBytes = 64 << 10

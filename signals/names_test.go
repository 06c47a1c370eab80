package signals

// Tests of the names of contract §2–5: these strings are the public API that clients in other
// languages call, so each is pinned here to the value the contract states.

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidateSessionID(t *testing.T) {
	tests := []struct {
		name  string
		id    string
		valid bool
	}{
		{"one char", "a", true},
		{"every allowed class", "Az09._-", true},
		{"uuid", "3f2b8c1e-9d4a-4b7e-8f00-1234567890ab", true},
		{"128 chars", strings.Repeat("a", 128), true},
		{"dots inside an id", "a..b", true},
		{"dot alone names a directory", ".", false},
		{"dot dot alone names a directory", "..", false},
		{"empty", "", false},
		{"129 chars", strings.Repeat("a", 129), false},
		{"slash", "a/b", false},
		{"path traversal", "../x", false},
		{"backslash", `a\b`, false},
		{"space", "a b", false},
		{"colon", "a:b", false},
		{"trailing newline", "abc\n", false},
		{"non-ASCII letter", "café", false},
		{"NUL", "a\x00b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateSessionID(tt.id)
			if tt.valid {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), "invalid session id")
			require.Contains(t, err.Error(), "[A-Za-z0-9._-]")
		})
	}
}

func TestSessionWorkflowID(t *testing.T) {
	tests := []struct{ sessionID, want string }{
		{"s1", "tacp-session-s1"},
		{"a.b_c-d", "tacp-session-a.b_c-d"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, SessionWorkflowID(tt.sessionID))
	}
}

func TestNames_WireStringsMatchDesign(t *testing.T) {
	tests := []struct{ got, want string }{
		// §2
		{SessionWorkflowType, "SessionWorkflow"},
		{DefaultTaskQueue, "tacp-sessions"},
		{SearchAttrSessionState, "TacpSessionState"},
		{SearchAttrTurn, "TacpTurn"},
		{SearchAttrAgent, "TacpAgent"},
		{SearchAttrAwaitingApproval, "TacpAwaitingApproval"},
		{StateIdle, "idle"},
		{StateRunning, "running"},
		{StateGrace, "grace"},
		{StateCancelling, "cancelling"},
		{StateSuspended, "suspended"},
		{StateClosed, "closed"},
		// §3
		{UpdatePrompt, "prompt"},
		{UpdateSteer, "steer"},
		{UpdateCancel, "cancel"},
		{UpdatePermissionRespond, "permission_respond"},
		{UpdatePermissionForget, "permission_forget"},
		{UpdateSetPolicy, "set_policy"},
		{UpdateAttach, "attach"},
		{UpdateDetach, "detach"},
		{UpdateClose, "close"},
		{UpdateSetMode, "set_mode"},
		{UpdateSetConfigOption, "set_config_option"},
		{UpdateSetTitle, "set_title"},
		{EventTitleChanged, "title.changed"},
		{SteerAccepted, "accepted"},
		{SteerDuplicate, "duplicate"},
		{CancelCancelling, "cancelling"},
		{CancelAlreadyCancelling, "already_cancelling"},
		// §4
		{QueryStatus, "status"},
		{QueryEvents, "events"},
		// §5
		{EventSessionStarted, "session.started"},
		{EventPromptAccepted, "prompt.accepted"},
		{EventPromptRejected, "prompt.rejected"},
		{EventTurnStarted, "turn.started"},
		{EventTurnRestarted, "turn.restarted"},
		{EventAgentUpdate, "agent.update"},
		{EventSteerAccepted, "steer.accepted"},
		{EventSteerRejected, "steer.rejected"},
		{EventSteerDelivered, "steer.delivered"},
		{EventTurnCancelling, "turn.cancelling"},
		{EventTurnEnded, "turn.ended"},
		{EventTurnFailed, "turn.failed"},
		{EventPermissionRequested, "permission.requested"},
		{EventPermissionResolved, "permission.resolved"},
		{EventPermissionForgotten, "permission.forgotten"},
		{EventPolicyChanged, "policy.changed"},
		{EventUsageUpdated, "usage.updated"},
		{EventViewerGraceStarted, "viewer.grace_started"},
		{EventViewerGraceCancelled, "viewer.grace_cancelled"},
		{EventSessionClosed, "session.closed"},
		// §10
		{EventAgentSettings, "agent.settings"},
		{EventModeChanged, "mode.changed"},
		{EventConfigOptionChanged, "config_option.changed"},
		{DeliverSettings, "settings"},
		{DeliverWatch, "watch"},
		{EventAgentContextLost, "agent.context_lost"},
		{EventWorkspaceMissing, "workspace.missing"},
		{EventWorkspaceCheckpoint, "workspace.checkpoint"},
		{EventWorkspaceRestored, "workspace.restored"},
		{QueryTranscript, "transcript"},
		// §7
		{SignalTurnStarted, "turn_started"},
		{SignalTurnEvents, "turn_events"},
		{SignalTurnFinished, "turn_finished"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tt.got)
	}
}

func TestNames_RejectionTypesMatchDesign(t *testing.T) {
	for got, want := range map[string]string{
		RejectQueueFull:        "queue_full",
		RejectInvalidRequest:   "invalid_request",
		RejectSessionClosed:    "session_closed",
		RejectStaleTurn:        "stale_turn",
		RejectNoLiveTurn:       "no_live_turn",
		RejectClientMsgIDReuse: "client_msg_id_reuse",
		RejectNoSteerChannel:   "no_steer_channel",
		RejectUnknownRequest:   "unknown_request",
		RejectInvalidOption:    "invalid_option",
		RejectForbidden:        "forbidden",
		RejectSessionFailed:    "session_failed",
	} {
		require.Equal(t, want, got)
	}
}

func TestNames_IsTerminal(t *testing.T) {
	for _, kind := range []string{EventTurnEnded, EventTurnFailed} {
		require.True(t, IsTerminal(kind), kind)
	}
	for _, kind := range []string{EventTurnStarted, EventTurnRestarted, EventTurnCancelling, EventAgentUpdate, EventSessionClosed, ""} {
		require.False(t, IsTerminal(kind), kind)
	}
}

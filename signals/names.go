// Package signals is tacp's wire contract (docs/contract.md §2–5): every workflow, update, signal
// and query name, every request, result and event payload, and the rejection types. It
// imports only the standard library, so a client in any language reads it as the contract
// and a Go client imports it without Temporal; the Go client over the Temporal SDK is
// tacpclient.
package signals

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Workflow types and the default task queue.
const (
	SessionWorkflowType = "SessionWorkflow"
	// ProfilesWorkflowType answers with the agent profiles of the worker that runs it
	// (workflow id ProfilesWorkflowID(task queue)).
	ProfilesWorkflowType = "ProfilesWorkflow"
	DefaultTaskQueue     = "tacp-sessions"
)

// ProfilesLinger is how long a ProfilesWorkflow run stays open after it answers, its
// profiles a query away: the clients that ask meanwhile (each `starter status`, a deck's
// pages) start no run of their own.
const ProfilesLinger = time.Minute

// ProfilesWorkflowID is the id of the ProfilesWorkflow runs on taskQueue: one id, so the
// Temporal UI lists one row for them, not one per question.
func ProfilesWorkflowID(taskQueue string) string { return "tacp-profiles-" + taskQueue }

// Updates of contract §3. Each also exists as a signal of the same name and payload.
const (
	UpdatePrompt            = "prompt"
	UpdateSteer             = "steer"
	UpdateCancel            = "cancel"
	UpdatePermissionRespond = "permission_respond"
	UpdatePermissionForget  = "permission_forget"
	UpdateSetPolicy         = "set_policy"
	UpdateAttach            = "attach"
	UpdateDetach            = "detach"
	UpdateClose             = "close"
)

// Queries of contract §4.
const (
	QueryStatus = "status"
	// QueryProfiles answers a ProfilesWorkflow run's profiles while it stays open
	// (ProfilesLinger).
	QueryProfiles = "profiles"
	QueryEvents   = "events"
	// QueryTranscript returns the session's conversation as text, for seeding a new agent
	// session after the agent's own was lost (agent.context_lost).
	QueryTranscript = "transcript"
)

// Signals the turn runner sends to the session workflow (contract §7).
const (
	SignalTurnStarted  = "turn_started"
	SignalTurnEvents   = "turn_events"
	SignalTurnFinished = "turn_finished"
)

// Activity names of the turn runner.
const (
	ActivityRunTurn = "RunTurn"
	// ActivityReleaseAgent stops a session's idle agent on a host the session left.
	ActivityReleaseAgent = "ReleaseAgent"
)

// Search attributes of contract §2.
const (
	SearchAttrSessionState     = "TacpSessionState"
	SearchAttrTurn             = "TacpTurn"
	SearchAttrAgent            = "TacpAgent"
	SearchAttrAwaitingApproval = "TacpAwaitingApproval"
	// SearchAttrLastOutcome is how the session's last turn ended: its stop reason
	// (end_turn, cancelled, …) or "failed".
	SearchAttrLastOutcome = "TacpLastOutcome"
	// SearchAttrLastActivity is when the session's state last changed (Datetime).
	SearchAttrLastActivity = "TacpLastActivity"
	// SearchAttrOwner, SearchAttrSharing and SearchAttrSharedWith are a session's Access,
	// set when it starts (signals/access.go): the person who created it, its sharing rule
	// and its shares as WHO=ROLE (KeywordList).
	SearchAttrOwner      = "TacpOwner"
	SearchAttrSharing    = "TacpSharing"
	SearchAttrSharedWith = "TacpSharedWith"
	// MemoWorkspace is the memo field of a session's workflow that holds the workspace it
	// was started with (a continue-as-new carries it over): session lists read it.
	MemoWorkspace = "TacpWorkspace"
)

// Session states (status `state` and the TacpSessionState search attribute).
const (
	StateIdle       = "idle"
	StateRunning    = "running"
	StateGrace      = "grace"
	StateCancelling = "cancelling"
	StateSuspended  = "suspended"
	StateClosed     = "closed"
	// StateTerminated is status's state of a session whose workflow an operator terminated
	// (Temporal's terminate, which no workflow can catch): the client reads it from the
	// workflow's description, never the workflow. The next prompt starts a new session
	// under the same id, its journal from seq 1.
	StateTerminated = "terminated"
)

// Limits on what a request may carry. Temporal refuses payloads over 2 MiB; tacp refuses
// earlier, with a message, so nothing reaches the server that it would drop.
const (
	MaxTextBytes     = 1 << 20 // prompt and steer text
	MaxClientIDBytes = 128     // client_message_id, client_msg_id, viewer_id
)

var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// ValidateSessionID reports whether id is a valid session id: 1–128 chars of [A-Za-z0-9._-],
// and not "." or ".." (a session id names the session's default workspace directory).
func ValidateSessionID(id string) error {
	if !sessionIDPattern.MatchString(id) || id == "." || id == ".." {
		return fmt.Errorf("invalid session id %q: want 1-128 characters of [A-Za-z0-9._-] other than \".\" and \"..\"", id)
	}
	return nil
}

// MaxByBytes bounds the name of who did something (a request's by).
const MaxByBytes = 200

// ValidateBy reports whether by can name who made a request: at most MaxByBytes of UTF-8
// on one line ("" names nobody).
func ValidateBy(by string) error {
	switch {
	case len(by) > MaxByBytes:
		return fmt.Errorf("by: at most %d bytes, not %d", MaxByBytes, len(by))
	case !utf8.ValidString(by):
		return errors.New("by: not UTF-8")
	case strings.ContainsFunc(by, unicode.IsControl):
		return errors.New("by: one line, no control characters")
	}
	return nil
}

// SessionWorkflowID is the workflow id of a session: tacp-session-<session_id>.
func SessionWorkflowID(sessionID string) string { return "tacp-session-" + sessionID }

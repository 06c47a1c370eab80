package signals

import (
	"encoding/json"
	"slices"
	"time"
)

// Names of the host-routing path (contract §7): decisions reach a running turn as short
// Deliver activities on the task queue of the worker that hosts it.
const (
	ActivityDeliver           = "Deliver"
	SignalPermissionRequested = "permission_requested"
	// SignalDeliveryOutcome carries how a steer went (DeliveryOutcome), from the turn that
	// took it to its session, when the steer was delivered with Delivery.Async.
	SignalDeliveryOutcome = "delivery_outcome"
)

// Delivery kinds.
const (
	DeliverSteer      = "steer"
	DeliverCancel     = "cancel"
	DeliverPermission = "permission"
	// DeliverWatch tells a turn that streamed unwatched (PromptRequest.Unwatched) that a
	// viewer attached: its events go out at the watched cadence from now on.
	DeliverWatch = "watch"
)

// How a steer reached the agent (steer.delivered `how`).
const (
	HowInjected    = "injected"    // the agent's _session/steering extension
	HowInterrupted = "interrupted" // session/cancel, then session/prompt with the steer text
	HowFailed      = "failed"      // the turn's host could not be reached or refused it
)

// The ACP steering extension as agents serve it (claude-agent-acp): the request
// `_session/steering {sessionId, prompt: [content blocks], _meta?: {steering: {idleBehavior}}}`
// answered `{outcome}`. With idleBehavior "promptRequired" an agent whose turn has already
// ended answers SteerPromptRequired instead of starting a detached turn nobody asked for.
const (
	SteeringMethod             = "_session/steering"
	SteeringIdlePromptRequired = "promptRequired"

	SteerInjected       = "injected"
	SteerStartedNewTurn = "startedNewTurn"
	SteerPromptRequired = "promptRequired"
	// SteerFailed is the answer of tacp's ACP face (not of an agent) to a steer it could
	// neither deliver nor send as a prompt; its "error" says why.
	SteerFailed = "failed"
)

// TacpSteerMethod is the ACP face's own steer extension: the steer update of contract §3
// with its vocabulary (an explicit token, outcome accepted/duplicate or the rejection).
const TacpSteerMethod = "_tacp/session.steer"

// Delivery is one decision carried into a running turn.
type Delivery struct {
	Kind      string `json:"kind"`
	SessionID string `json:"session_id"`
	TurnID    int64  `json:"turn_id"`
	Attempt   int32  `json:"attempt"`
	// steer
	Text   string `json:"text,omitempty"`
	Offset int    `json:"offset,omitempty"`
	// permission
	RequestID string `json:"request_id,omitempty"`
	Outcome   string `json:"outcome,omitempty"`
	OptionID  string `json:"option_id,omitempty"`
	// elicitation (RequestID too): the answer's action and content
	Action  string          `json:"action,omitempty"`
	Content json.RawMessage `json:"content,omitempty"`
	// settings: the mode and config values to set in the live agent
	Choices *SessionChoices `json:"choices,omitempty"`
	// Async asks the host to answer as soon as the live turn has taken the delivery
	// (DeliveryResult.Taken) instead of when it is done: a steer's interrupt-and-continue
	// round trip (up to the interrupt timeout) then no longer holds up the cancel or the
	// permission answer the session delivers after it. How a steer went follows by the
	// delivery_outcome signal, sent before the turn reports its end. Sessions recorded before
	// it leave Async unset and get the answer when the delivery is done, as before.
	Async bool `json:"async,omitempty"`
	// DeliveryID names the delivery in its DeliveryOutcome (set with Async).
	DeliveryID string `json:"delivery_id,omitempty"`
}

// DeliveryResult answers a delivery. Taken says an Async delivery was handed to the live
// turn (How is then empty: it follows by delivery_outcome).
type DeliveryResult struct {
	How   string `json:"how,omitempty"`
	Taken bool   `json:"taken,omitempty"`
	// Settings is the agent's offer once a settings delivery is applied: tacp's own report
	// of the change (the agent's answers to it are not journaled as its own changes).
	Settings *AgentSettings `json:"settings,omitempty"`
}

// DeliveryOutcome is the payload of the delivery_outcome signal: how an Async steer went
// (HowInjected, HowInterrupted or HowFailed with Error), for the steer.delivered the session
// journals.
type DeliveryOutcome struct {
	DeliveryID string `json:"delivery_id"`
	Kind       string `json:"kind"`
	TurnID     int64  `json:"turn_id"`
	Attempt    int32  `json:"attempt"`
	Offset     int    `json:"offset,omitempty"`
	How        string `json:"how"`
	Error      string `json:"error,omitempty"`
}

// SteerDeliveredData is the data of steer.delivered. Error is set when How is "failed".
type SteerDeliveredData struct {
	Offset int    `json:"offset"`
	How    string `json:"how"`
	Error  string `json:"error,omitempty"`
}

// PermissionOption is an ACP permission option as the agent offered it.
type PermissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

// PermissionRequestedSignal carries an agent's session/request_permission to the session.
// ToolCall is the ACP tool call as the agent sent it. ToolName, when set, is the agent's
// own name of the tool, from the tool_call update that announced the call (claude-agent-acp
// names it there, in _meta.claudeCode.toolName, and not in the request): the key a rule
// remembers the tool by when the request's own _meta names none.
type PermissionRequestedSignal struct {
	TurnID    int64              `json:"turn_id"`
	Attempt   int32              `json:"attempt"`
	RequestID string             `json:"request_id"`
	ToolCall  json.RawMessage    `json:"tool_call"`
	Options   []PermissionOption `json:"options"`
	// Paths is where the files the tool call names lie, measured by the runner against the
	// session's workspace: PathsInside, PathsOutside or PathsNone ("" from a runner older
	// than workspace roots).
	Paths    string `json:"paths,omitempty"`
	ToolName string `json:"tool_name,omitempty"`
}

// MetaToolName is the agent's own tool name in an ACP _meta object: `toolName`, or else the
// `toolName` of the first object in _meta in sorted key order (claude-agent-acp's
// `claudeCode.toolName`); "" when it names none. Sorted, so the name is the same whichever
// order the agent wrote the keys in, on every replay.
func MetaToolName(meta map[string]json.RawMessage) string {
	var name string
	if json.Unmarshal(meta["toolName"], &name) == nil && name != "" {
		return name
	}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		var inner struct {
			ToolName string `json:"toolName"`
		}
		if json.Unmarshal(meta[k], &inner) == nil && inner.ToolName != "" {
			return inner.ToolName
		}
	}
	return ""
}

// Where a tool call's paths lie (PermissionRequestedSignal.Paths).
const (
	PathsInside  = "inside"
	PathsOutside = "outside"
	PathsNone    = "none"
)

// PermissionRequestedData is the data of permission.requested.
type PermissionRequestedData struct {
	RequestID string             `json:"request_id"`
	ToolCall  json.RawMessage    `json:"tool_call"`
	Options   []PermissionOption `json:"options"`
	Deadline  time.Time          `json:"deadline"`
	// Paths is where the tool call's files lie (PathsInside, PathsOutside, PathsNone).
	Paths string `json:"paths,omitempty"`
}

// Permission outcomes and deciders.
const (
	OutcomeSelected  = "selected"
	OutcomeCancelled = "cancelled"
	OutcomeExpired   = "expired"

	DecidedByUser     = "user"
	DecidedByPolicy   = "policy"
	DecidedByRule     = "rule"
	DecidedByDeadline = "deadline"
	DecidedByCancel   = "cancel"
	// DecidedByRestart withdraws the open requests of a turn attempt that was lost; the
	// next attempt asks again, and an answer to the withdrawn id goes to the new request.
	DecidedByRestart = "restart"
)

// PermissionResolution is how a permission request was resolved: the data of
// permission.resolved and the result of permission_respond.
type PermissionResolution struct {
	RequestID string `json:"request_id"`
	Outcome   string `json:"outcome"`
	OptionID  string `json:"option_id,omitempty"`
	DecidedBy string `json:"decided_by"`
	Remember  bool   `json:"remember,omitempty"`
	// Reason says why a request was withdrawn (decided_by cancel or restart): who or what
	// cancelled ("user", "grace", "deadline", "close", "turn ended"), or the lost attempt.
	Reason string `json:"reason,omitempty"`
	// Via is the request id a person answered when that request had been withdrawn by a
	// restart and asked again as RequestID by the next attempt.
	Via string `json:"via,omitempty"`
	// AnsweredBy names the person who answered (decided_by user): a deck token's name, the
	// CLI's identity, an ACP client's clientInfo and viewer.
	AnsweredBy string `json:"answered_by,omitempty"`
}

// PermissionRespondRequest is the payload of the permission_respond update and signal.
// Either OptionID (outcome "selected", the default) or Outcome "cancelled".
type PermissionRespondRequest struct {
	RequestID   string `json:"request_id"`
	OptionID    string `json:"option_id,omitempty"`
	Outcome     string `json:"outcome,omitempty"`
	ClientMsgID string `json:"client_msg_id,omitempty"`
	ViewerID    string `json:"viewer_id,omitempty"`
	// AnsweredBy names who answers (PermissionResolution.AnsweredBy).
	AnsweredBy string `json:"answered_by,omitempty"`
}

// PermissionRespondResult answers permission_respond; a later answer gets the existing
// resolution back.
type PermissionRespondResult struct {
	RequestID  string               `json:"request_id"`
	Resolution PermissionResolution `json:"resolution"`
}

// PendingPermission is an open request as status lists it (without the tool call's
// arguments).
type PendingPermission struct {
	RequestID string             `json:"request_id"`
	TurnID    int64              `json:"turn_id"`
	Title     string             `json:"title,omitempty"`
	Kind      string             `json:"kind,omitempty"`
	Options   []PermissionOption `json:"options"`
	Deadline  time.Time          `json:"deadline"`
	// Replaces lists requests a restart withdrew that this one asks again: an answer to any
	// of them is an answer to this one.
	Replaces []string `json:"replaces,omitempty"`
}

// Viewer roles.
const (
	RoleController = "controller"
	RoleObserver   = "observer"
)

// AttachRequest is the payload of attach: a lease renewed by attaching again.
type AttachRequest struct {
	ViewerID     string `json:"viewer_id"`
	Role         string `json:"role"`
	LeaseSeconds int    `json:"lease_seconds"`
}

// DetachRequest is the payload of detach.
type DetachRequest struct {
	ViewerID string `json:"viewer_id"`
}

// DetachResult answers detach.
type DetachResult struct{}

// Viewer is an attached viewer as status lists it.
type Viewer struct {
	ViewerID   string    `json:"viewer_id"`
	Role       string    `json:"role"`
	LeaseUntil time.Time `json:"lease_until"`
}

// SetPolicyRequest is the payload of set_policy; SetPolicyResult answers it.
type SetPolicyRequest struct {
	Level string `json:"level"`
	// ViewerID is the attached viewer that sets it (an observer may not); By names the person
	// or client, as answered_by does: both are journaled in policy.changed.
	ViewerID string `json:"viewer_id,omitempty"`
	By       string `json:"by,omitempty"`
}

// SetPolicyResult answers set_policy.
type SetPolicyResult struct {
	Level string `json:"level"`
}

// PermissionForgetRequest is the payload of permission_forget: a key of status rules.
type PermissionForgetRequest struct {
	Tool string `json:"tool"`
}

// PermissionForgetResult answers permission_forget.
type PermissionForgetResult struct {
	Forgotten bool `json:"forgotten"`
}

// PolicyChangedData is the data of policy.changed.
type PolicyChangedData struct {
	Level    string `json:"level"`
	Previous string `json:"previous"`
	ViewerID string `json:"viewer_id,omitempty"`
	By       string `json:"by,omitempty"`
}

// PermissionForgottenData is the data of permission.forgotten.
type PermissionForgottenData struct {
	Tool string `json:"tool"`
}

// GraceData is the data of viewer.grace_started and viewer.grace_cancelled.
type GraceData struct {
	Until    time.Time `json:"until,omitempty"`
	ViewerID string    `json:"viewer_id,omitempty"`
}

package signals

// Elicitation (contract §11 "A person's request"): an agent asks a person a question (ACP
// `elicitation/create`: a form with a JSON schema, or a URL to open). It is the same kind
// of thing as a permission request: an id, a deadline that fails closed (action cancel),
// the first valid answer wins, asked of every channel, and its answer names who gave it.
// The content of an answer is journaled (encrypted with the payloads when the codec is on)
// but never sent to webhooks.

import (
	"encoding/json"
	"time"
)

// Names of elicitation.
const (
	EventElicitationRequested = "elicitation.requested"
	EventElicitationResolved  = "elicitation.resolved"
	// SignalElicitationRequested is the runner's report of the agent's elicitation/create.
	SignalElicitationRequested = "elicitation_requested"
	// SignalElicitationCompleted is the runner's report of the agent's elicitation/complete:
	// the out-of-band flow of a url elicitation finished (ElicitationCompletedSignal).
	SignalElicitationCompleted = "elicitation_completed"
	// EventElicitationCompleted journals it (ElicitationCompletedData); the ACP face relays
	// it to editors as elicitation/complete.
	EventElicitationCompleted = "elicitation.completed"
	// UpdateElicitationRespond answers an open elicitation (with a signal twin).
	UpdateElicitationRespond = "elicitation_respond"
	// DeliverElicitation carries an elicitation's answer into the running turn.
	DeliverElicitation = "elicitation"
)

// Elicitation modes and actions (ACP).
const (
	ElicitationForm = "form"
	ElicitationURL  = "url"

	ActionAccept  = "accept"
	ActionDecline = "decline"
	ActionCancel  = "cancel"
)

// ElicitationRequestedSignal is the runner's elicitation_requested.
type ElicitationRequestedSignal struct {
	TurnID    int64  `json:"turn_id"`
	Attempt   int32  `json:"attempt"`
	RequestID string `json:"request_id"`
	Mode      string `json:"mode"`
	Message   string `json:"message"`
	// Schema is the form's requestedSchema (ACP JSON), URL the page of a url elicitation.
	Schema json.RawMessage `json:"schema,omitempty"`
	URL    string          `json:"url,omitempty"`
	// ElicitationID is the agent's id of a url elicitation (its elicitation/complete names it).
	ElicitationID string `json:"elicitation_id,omitempty"`
	// ToolCallID is the tool call the question belongs to (Claude's AskUserQuestion).
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// ElicitationRequestedData is the data of elicitation.requested.
type ElicitationRequestedData struct {
	RequestID     string          `json:"request_id"`
	TurnID        int64           `json:"turn_id"`
	Mode          string          `json:"mode"`
	Message       string          `json:"message"`
	Schema        json.RawMessage `json:"schema,omitempty"`
	URL           string          `json:"url,omitempty"`
	ElicitationID string          `json:"elicitation_id,omitempty"`
	ToolCallID    string          `json:"tool_call_id,omitempty"`
	Deadline      time.Time       `json:"deadline"`
}

// ElicitationRespondRequest is the payload of elicitation_respond: action accept (with
// content that fits the request's schema), decline or cancel.
type ElicitationRespondRequest struct {
	RequestID string          `json:"request_id"`
	Action    string          `json:"action"`
	Content   json.RawMessage `json:"content,omitempty"`
	ViewerID  string          `json:"viewer_id,omitempty"`
	// AnsweredBy names who answered (a deck token's name, the CLI's identity, an ACP
	// client's clientInfo).
	AnsweredBy string `json:"answered_by,omitempty"`
}

// ElicitationResolution is how an elicitation was resolved: the data of
// elicitation.resolved and the result of elicitation_respond.
type ElicitationResolution struct {
	RequestID  string          `json:"request_id"`
	Action     string          `json:"action"`
	Content    json.RawMessage `json:"content,omitempty"`
	DecidedBy  string          `json:"decided_by"`
	AnsweredBy string          `json:"answered_by,omitempty"`
	// Reason says why a request was withdrawn (decided_by cancel, restart or deadline).
	Reason string `json:"reason,omitempty"`
}

// ElicitationRespondResult answers elicitation_respond; a later answer gets the existing
// resolution back.
type ElicitationRespondResult struct {
	RequestID  string                `json:"request_id"`
	Resolution ElicitationResolution `json:"resolution"`
}

// PendingElicitation is an open elicitation as status lists it.
type PendingElicitation struct {
	RequestID  string          `json:"request_id"`
	TurnID     int64           `json:"turn_id"`
	Mode       string          `json:"mode"`
	Message    string          `json:"message"`
	Schema     json.RawMessage `json:"schema,omitempty"`
	URL        string          `json:"url,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Deadline   time.Time       `json:"deadline"`
}

// ElicitationCompletedSignal is the runner's elicitation_completed.
type ElicitationCompletedSignal struct {
	TurnID        int64  `json:"turn_id"`
	Attempt       int32  `json:"attempt"`
	ElicitationID string `json:"elicitation_id"`
}

// ElicitationCompletedData is the data of elicitation.completed: the agent's id of the url
// elicitation, and tacp's request id of it when the session knows it.
type ElicitationCompletedData struct {
	ElicitationID string `json:"elicitation_id"`
	RequestID     string `json:"request_id,omitempty"`
}

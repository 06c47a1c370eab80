// Package notify tells a person who is not looking that a session needs them: webhooks for
// permission.requested (and, by choice, turn.ended and turn.failed), run by the deck
// (`starter web --webhook URL`). A Follower watches the sessions through tacpclient.Client
// and a Webhook delivers each Notification as a signed HTTP POST, at least once, with
// retries and a bound.
//
// Why the deck and not the worker: the deck already follows sessions for people, knows its
// own URL (the link to the card) and holds the people-facing secrets; a notification there
// is a read of the journal, so it adds nothing to a session's history, needs no change of
// the workflow's shape (no GetVersion, no new recorded history), and a receiver that fails
// or never answers cannot block or fail a turn: it is another process. The price: with no
// deck running nobody is notified, and a deck that restarts sends again what is still open
// (same id: receivers deduplicate).
//
// # The POST
//
// The body is one JSON object (Notification): what happened, the session, the request or
// turn, the tool's title and kind, the deadline, the card's link, and text/title/message
// for the services people read it in: a Slack incoming webhook takes it as is (it reads
// text), ntfy through a template URL (https://ntfy.sh/TOPIC?tpl=1&t={{.title}}&m={{.message}}).
// It never carries a tool call's arguments, prompt or agent text, or an error message.
//
// Headers: Content-Type application/json; X-Tacp-Event, the event; X-Tacp-Delivery, the
// notification's id (the same on every attempt and after a deck restart: deduplicate on
// it); X-Tacp-Attempt, 1 for the first try; X-Tacp-Signature "sha256=" and the hex
// HMAC-SHA256 of the exact body bytes under the shared secret (when one is set). Any 2xx
// is delivered; 408, 429, 5xx and network errors are tried again with backoff until the
// attempts or the age bound run out; other statuses are not.
package notify

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// The events a webhook can be sent for: the journal's names (contract §5).
const (
	EventPermissionRequested = signals.EventPermissionRequested
	EventTurnEnded           = signals.EventTurnEnded
	EventTurnFailed          = signals.EventTurnFailed
	// EventElicitationRequested: the agent asked a person a question (elicitation.go).
	EventElicitationRequested = signals.EventElicitationRequested
)

// DefaultEvents are the events notified when none are chosen: the ones a person must act
// on.
var DefaultEvents = []string{EventPermissionRequested, EventElicitationRequested, EventTurnFailed}

// Headers of the POST.
const (
	HeaderEvent     = "X-Tacp-Event"
	HeaderDelivery  = "X-Tacp-Delivery"
	HeaderAttempt   = "X-Tacp-Attempt"
	HeaderSignature = "X-Tacp-Signature"
)

// Tool is what a notification says about the tool call a permission request is about: its
// title and kind as the agent gave them, never its arguments.
type Tool struct {
	Title string `json:"title,omitempty"`
	Kind  string `json:"kind,omitempty"`
}

// Notification is the body of a webhook POST.
type Notification struct {
	// ID identifies the notification across attempts and deck restarts:
	// "<session>:<event>:<request id>" or "<session>:<event>:<turn>".
	ID         string     `json:"id"`
	Event      string     `json:"event"`
	SessionID  string     `json:"session_id"`
	TurnID     int64      `json:"turn_id,omitempty"`
	RequestID  string     `json:"request_id,omitempty"`
	Tool       *Tool      `json:"tool,omitempty"`
	Deadline   *time.Time `json:"deadline,omitempty"`
	StopReason string     `json:"stop_reason,omitempty"`
	// At is when the event was journaled.
	At time.Time `json:"at"`
	// URL opens the session's card in the deck.
	URL string `json:"url,omitempty"`

	// For the services people read: Slack reads Text; ntfy templates read Title and
	// Message.
	Text    string `json:"text"`
	Title   string `json:"title"`
	Message string `json:"message"`
}

// CardURL is the deck's link to a session's card, under the deck's public URL.
func CardURL(deck, sessionID string) string {
	if deck == "" {
		return ""
	}
	return strings.TrimSuffix(deck, "/") + "/#/s/" + url.PathEscape(sessionID)
}

// PermissionRequested is the notification of an asked permission request of turn.
func PermissionRequested(sessionID string, turn int64, requestID string, tool Tool, deadline, at time.Time, deck string) Notification {
	n := Notification{
		ID: sessionID + ":" + EventPermissionRequested + ":" + requestID, Event: EventPermissionRequested,
		SessionID: sessionID, TurnID: turn, RequestID: requestID, Tool: &tool, Deadline: &deadline, At: at,
		URL: CardURL(deck, sessionID), Title: "tacp: permission needed",
	}
	what := tool.Kind
	if tool.Title != "" {
		what = fmt.Sprintf("%s %q", tool.Kind, tool.Title)
	}
	n.Message = fmt.Sprintf("Session %s asks permission: %s. Answer by %s, or it is refused.", sessionID, strings.TrimSpace(what), deadline.UTC().Format("15:04:05 MST"))
	return n.withText()
}

// TurnEnded is the notification of turn.ended.
func TurnEnded(sessionID string, turn int64, stopReason string, at time.Time, deck string) Notification {
	n := Notification{
		ID: fmt.Sprintf("%s:%s:%d", sessionID, EventTurnEnded, turn), Event: EventTurnEnded,
		SessionID: sessionID, TurnID: turn, StopReason: stopReason, At: at, URL: CardURL(deck, sessionID),
		Title:   fmt.Sprintf("tacp: turn %d ended", turn),
		Message: fmt.Sprintf("Session %s: turn %d ended (%s).", sessionID, turn, stopReason),
	}
	return n.withText()
}

// TurnFailed is the notification of turn.failed. The error stays in the deck: it may quote
// the agent.
func TurnFailed(sessionID string, turn int64, at time.Time, deck string) Notification {
	n := Notification{
		ID: fmt.Sprintf("%s:%s:%d", sessionID, EventTurnFailed, turn), Event: EventTurnFailed,
		SessionID: sessionID, TurnID: turn, At: at, URL: CardURL(deck, sessionID),
		Title:   fmt.Sprintf("tacp: turn %d failed", turn),
		Message: fmt.Sprintf("Session %s: turn %d failed.", sessionID, turn),
	}
	return n.withText()
}

func (n Notification) withText() Notification {
	if n.URL != "" {
		n.Message += " " + n.URL
	}
	n.Text = n.Title + " — " + n.Message
	return n
}

// toolOf reads the title and kind of an ACP tool call, and nothing else of it.
func toolOf(toolCall json.RawMessage) Tool {
	var tc struct {
		Title string `json:"title"`
		Kind  string `json:"kind"`
	}
	_ = json.Unmarshal(toolCall, &tc)
	return Tool{Title: tc.Title, Kind: tc.Kind}
}

// ParseEvents reads a comma-separated list of events ("" is DefaultEvents).
func ParseEvents(list string) (map[string]bool, error) {
	out := map[string]bool{}
	if strings.TrimSpace(list) == "" {
		for _, e := range DefaultEvents {
			out[e] = true
		}
		return out, nil
	}
	for _, e := range strings.Split(list, ",") {
		switch e = strings.TrimSpace(e); e {
		case EventPermissionRequested, EventElicitationRequested, EventTurnEnded, EventTurnFailed:
			out[e] = true
		case "":
		default:
			return nil, fmt.Errorf("webhook event %q: want %s, %s, %s or %s", e, EventPermissionRequested, EventElicitationRequested, EventTurnEnded, EventTurnFailed)
		}
	}
	return out, nil
}

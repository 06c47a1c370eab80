package notify

// The webhook of a question the agent asked a person (elicitation.requested). Like a
// permission's, it says that a person is needed, by when, and where to answer: never the
// question's text (the agent's words) nor, ever, an answer's content.

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// ElicitationRequested is the notification of a question of turn.
func ElicitationRequested(sessionID string, turn int64, requestID, mode string, deadline, at time.Time, deck string) Notification {
	n := Notification{
		ID: sessionID + ":" + EventElicitationRequested + ":" + requestID, Event: EventElicitationRequested,
		SessionID: sessionID, TurnID: turn, RequestID: requestID, Deadline: &deadline, At: at,
		URL: CardURL(deck, sessionID), Title: "tacp: a question for you",
	}
	what := "a question"
	if mode == signals.ElicitationURL {
		what = "you to open a page"
	}
	n.Message = fmt.Sprintf("Session %s asks %s. Answer by %s, or it is cancelled.", sessionID, what, deadline.UTC().Format("15:04:05 MST"))
	return n.withText()
}

func elicitationNotification(sessionID string, ev signals.Event, deck string) Notification {
	var d signals.ElicitationRequestedData
	_ = json.Unmarshal(ev.Data, &d)
	return ElicitationRequested(sessionID, ev.TurnID, d.RequestID, d.Mode, d.Deadline, ev.At, deck)
}

// questionEvent keeps asked (by request id) up to date with a question's event.
func questionEvent(ev signals.Event, asked map[string]signals.Event, order []string) []string {
	switch ev.Kind {
	case signals.EventElicitationRequested:
		var d signals.ElicitationRequestedData
		if json.Unmarshal(ev.Data, &d) == nil {
			asked[d.RequestID] = ev
			order = append(order, d.RequestID)
		}
	case signals.EventElicitationResolved:
		var r signals.ElicitationResolution
		if json.Unmarshal(ev.Data, &r) == nil {
			delete(asked, r.RequestID)
		}
	}
	return order
}

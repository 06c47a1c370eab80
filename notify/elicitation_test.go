package notify

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// A question's webhook says a person is needed and by when: never the question's words.
func TestElicitationRequestedCarriesNoQuestionNorAnswer(t *testing.T) {
	at := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	data, _ := json.Marshal(signals.ElicitationRequestedData{RequestID: "q1.1.1", Mode: signals.ElicitationForm, Message: "secret plan?", Deadline: at.Add(10 * time.Minute)})
	n := elicitationNotification("s1", signals.Event{Kind: signals.EventElicitationRequested, TurnID: 1, At: at, Data: data}, "https://deck.example")
	body, err := json.Marshal(n)
	require.NoError(t, err)
	require.Equal(t, "s1:elicitation.requested:q1.1.1", n.ID)
	require.Contains(t, n.Message, "Answer by 14:10:00 UTC, or it is cancelled")
	require.False(t, strings.Contains(string(body), "secret plan"), "%s", body)
	asked := map[string]signals.Event{}
	order := questionEvent(signals.Event{Kind: signals.EventElicitationRequested, Data: data}, asked, nil)
	require.Len(t, order, 1)
	res, _ := json.Marshal(signals.ElicitationResolution{RequestID: "q1.1.1", Action: signals.ActionAccept})
	questionEvent(signals.Event{Kind: signals.EventElicitationResolved, Data: res}, asked, order)
	require.Empty(t, asked, "an answered question is not notified")
}

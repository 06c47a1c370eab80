package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

// A turn prompted as unwatched (PromptRequest.Unwatched, `starter prompt --no-wait`) streams
// the same reply, every chunk once and in order, in a fraction of a watched turn's
// turn_events signals: its runner flushes at its longest interval and never at once. Both
// turns stream the same script side by side, so a slow machine stretches both alike.
func TestAnUnwatchedTurnStreamsInAFractionOfTheSignals(t *testing.T) {
	t.Parallel()
	const script = "/chunks 40 every 50ms"
	run := func(unwatched bool) (tacpclient.Actions, []signals.Event) {
		id := fmt.Sprintf("%s-%v", session(t), unwatched)
		res, err := sc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id},
			signals.PromptRequest{Text: script, ClientMessageID: signals.NewID(), Unwatched: unwatched})
		require.NoError(t, err)
		evs := turnEnd(t, id, res.TurnID)
		a, err := sc.Actions(ctxFor(t, 30*time.Second), id)
		require.NoError(t, err)
		return a, evs
	}
	type result struct {
		a   tacpclient.Actions
		evs []signals.Event
	}
	done := make(chan result, 1)
	go func() {
		a, evs := run(true)
		done <- result{a, evs}
	}()
	watched, _ := run(false)
	r := <-done
	unwatched, evs := r.a, r.evs

	var want []string
	for i := 1; i <= 40; i++ {
		want = append(want, fmt.Sprintf("chunk %d\n", i))
	}
	require.Equal(t, want, agentTexts(t, evs, 1), "every chunk once, in order")
	started := eventsOf(evs, signals.EventTurnStarted, 1)
	require.Len(t, started, 1)
	var sd signals.TurnStartedData
	require.NoError(t, json.Unmarshal(started[0].Data, &sd))
	require.True(t, sd.Unwatched, "turn.started says the turn is unwatched")

	w, u := watched.SignalsByName[signals.SignalTurnEvents], unwatched.SignalsByName[signals.SignalTurnEvents]
	t.Logf("turn_events signals: watched %d, unwatched %d; actions: watched %d, unwatched %d", w, u, watched.Total, unwatched.Total)
	require.Positive(t, w)
	require.LessOrEqual(t, u*4, w, "an unwatched turn sends at most a quarter of a watched turn's turn_events signals")
}

// A viewer that attaches to a turn streaming unwatched brings it to the watched cadence: the
// session delivers "watch" to the turn's host, which flushes every -events.flush from then
// on. Beside it the same script streams unwatched with nobody attached, so a slow machine
// stretches both alike. The viewer leaves before the end: a background turn never waits for
// a viewer, so no grace starts and the turn runs to its end.
func TestAViewerBringsAnUnwatchedTurnToTheWatchedCadence(t *testing.T) {
	t.Parallel()
	const script = "/chunks 120 every 50ms"
	start := func(id string) int64 {
		res, err := sc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id, GraceWindow: "1s"},
			signals.PromptRequest{Text: script, ClientMessageID: signals.NewID(), Unwatched: true})
		require.NoError(t, err)
		return res.TurnID
	}
	alone, seen := session(t)+"-alone", session(t)+"-seen"
	aloneTurn, seenTurn := start(alone), start(seen)
	// The first batch of an unwatched turn goes out at its longest interval; then a viewer.
	waitFor(t, seen, func(ev signals.Event) bool { return ev.Kind == signals.EventAgentUpdate && ev.TurnID == seenTurn })
	viewer := "v-" + signals.NewID()
	_, err := sc.Attach(ctxFor(t, 10*time.Second), seen, signals.AttachRequest{ViewerID: viewer, Role: signals.RoleObserver, LeaseSeconds: 120})
	require.NoError(t, err)
	waitFor(t, seen, func(ev signals.Event) bool {
		return ev.Kind == signals.EventAgentUpdate && strings.Contains(string(ev.Data), "chunk 60\\n")
	})
	require.NoError(t, sc.Detach(ctxFor(t, 10*time.Second), seen, signals.DetachRequest{ViewerID: viewer}))

	evs := endedWith(t, seen, seenTurn, "end_turn")
	require.Empty(t, eventsOf(evs, signals.EventViewerGraceStarted, seenTurn), "no grace for a background turn")
	turnEnd(t, alone, aloneTurn)
	var want []string
	for i := 1; i <= 120; i++ {
		want = append(want, fmt.Sprintf("chunk %d\n", i))
	}
	require.Equal(t, want, agentTexts(t, evs, 1), "every chunk once, in order")

	count := func(id string) (batches, delivers int) {
		iter := tc.GetWorkflowHistory(ctxFor(t, 10*time.Second), signals.SessionWorkflowID(id), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			ev, err := iter.Next()
			require.NoError(t, err)
			if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == signals.SignalTurnEvents {
				batches++
			}
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == signals.ActivityDeliver {
				delivers++
			}
		}
		return batches, delivers
	}
	s, d := count(seen)
	a, _ := count(alone)
	t.Logf("turn_events signals: with a viewer from the first batch %d, alone %d; Deliver activities %d", s, a, d)
	require.Equal(t, 1, d, "one watch delivery")
	require.GreaterOrEqual(t, s, 3*a, "the viewed turn streams at the watched cadence after the attach")
}

package session

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// A LiveTurn carried or recorded before Child and Cancel were enums says the same with its
// bools; the first is the turn the continue-as-new of a history recorded on 2026-11-30
// carried (session-continue-as-new-mid-turn, retired with commit 565c681).
func TestLiveTurn_DecodesTheOldBools(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		child      turnChild
		cancel     turnCancel
	}{
		{"recorded mid-turn", `{"turn_id":1,"client_message_id":"952e4547e1bec4a380171840","attempt":1,"started_at":"2026-11-30T06:53:48.52478155Z","started":true,"cancelling":false,"cancel_sent":false,"last_batch":11}`, childRunning, cancelNone},
		{"not started", `{"turn_id":2,"started":false,"cancelling":false,"cancel_sent":false}`, childAsked, cancelNone},
		{"cancel wanted", `{"turn_id":3,"started":true,"cancelling":true,"cancel_reason":"cancel","cancel_sent":false}`, childRunning, cancelWanted},
		{"cancel wanted before the start", `{"turn_id":3,"started":false,"cancelling":true,"cancel_reason":"close","cancel_sent":false}`, childAsked, cancelWanted},
		{"cancel sent", `{"turn_id":4,"started":true,"cancelling":true,"cancel_reason":"deadline","cancel_sent":true}`, childRunning, cancelSent},
		{"ended", `{"turn_id":5,"started":true,"cancelling":true,"cancel_sent":true,"ended":true}`, childEnded, cancelSent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got LiveTurn
			require.NoError(t, json.Unmarshal([]byte(tc.json), &got))
			require.Equal(t, tc.child, got.Child, "child")
			require.Equal(t, tc.cancel, got.Cancel, "cancel")
		})
	}
	var got LiveTurn
	require.NoError(t, json.Unmarshal([]byte(`{"turn_id":1,"attempt":2,"started":true,"last_batch":11,"cancel_reason":"cancel","cancelling":true}`), &got))
	require.Equal(t, LiveTurn{TurnID: 1, Attempt: 2, LastBatch: 11, CancelReason: "cancel", Child: childRunning, Cancel: cancelWanted}, got, "the other fields decode as before")
}

// The new shape round-trips by name, and the new fields win over stale bools.
func TestLiveTurn_EncodesTheEnumsByName(t *testing.T) {
	for _, in := range []LiveTurn{
		{TurnID: 1},
		{TurnID: 2, Child: childRunning, Cancel: cancelWanted, CancelReason: "grace"},
		{TurnID: 3, Child: childEnded, Cancel: cancelSent},
	} {
		b, err := json.Marshal(in)
		require.NoError(t, err)
		require.NotContains(t, string(b), `"started"`)
		var out LiveTurn
		require.NoError(t, json.Unmarshal(b, &out))
		require.Equal(t, in.Child, out.Child, string(b))
		require.Equal(t, in.Cancel, out.Cancel, string(b))
	}
	b, _ := json.Marshal(LiveTurn{Child: childRunning, Cancel: cancelWanted})
	require.Contains(t, string(b), `"child":"running"`)
	require.Contains(t, string(b), `"cancel":"wanted"`)

	var out LiveTurn
	require.NoError(t, json.Unmarshal([]byte(`{"child":"ended","cancel":"sent","started":true,"cancelling":true}`), &out))
	require.Equal(t, childEnded, out.Child)
	require.Equal(t, cancelSent, out.Cancel)

	require.ErrorContains(t, json.Unmarshal([]byte(`{"child":"bogus"}`), &out), `unknown turn child "bogus"`)
	require.ErrorContains(t, json.Unmarshal([]byte(`{"cancel":"bogus"}`), &out), `unknown turn cancel "bogus"`)
}

func TestLiveTurn_EnumNames(t *testing.T) {
	require.Equal(t, []string{"asked", "running", "ended"}, []string{childAsked.String(), childRunning.String(), childEnded.String()})
	require.Equal(t, []string{"none", "wanted", "sent"}, []string{cancelNone.String(), cancelWanted.String(), cancelSent.String()})
	require.Equal(t, "turnChild(9)", turnChild(9).String())
}

// A prompt sent as unwatched stays so through the queue, and across a continue-as-new while
// it waits there: its turn's input and turn.started say so; a watched prompt's do not.
func TestUnwatchedPromptsStartUnwatchedTurns(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.startTurn("watched", "m1")
	_, err := r.update(signals.UpdatePrompt, signals.PromptRequest{Text: "background", ClientMessageID: "m2", Unwatched: true})
	require.NoError(t, err)
	require.True(t, r.core.Queue.Items[0].Unwatched)
	carried, err := json.Marshal(r.core.sessionState)
	require.NoError(t, err)
	var back sessionState
	require.NoError(t, json.Unmarshal(carried, &back))
	require.True(t, back.Queue.Items[0].Unwatched, "the queued prompt's unwatched survives continue-as-new")

	r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
	r.settle()
	require.Len(t, r.inputs, 2)
	require.False(t, r.inputs[0].Unwatched)
	require.True(t, r.inputs[1].Unwatched, "the unwatched prompt's turn input")
	var started []signals.TurnStartedData
	for _, ev := range r.core.Journal.Events {
		if ev.Kind == signals.EventTurnStarted {
			var d signals.TurnStartedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			started = append(started, d)
		}
	}
	require.Len(t, started, 2)
	require.False(t, started[0].Unwatched)
	require.True(t, started[1].Unwatched)
}

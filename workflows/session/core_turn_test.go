package session

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

func TestLiveTurn_EncodesTheEnumsByName(t *testing.T) {
	for _, in := range []LiveTurn{
		{TurnID: 1},
		{TurnID: 2, Drive: driveRunning, Cancel: cancelWanted, CancelReason: "grace"},
		{TurnID: 3, Drive: driveOver, Cancel: cancelSent},
	} {
		b, err := json.Marshal(in)
		require.NoError(t, err)
		require.NotContains(t, string(b), `"started"`)
		var out LiveTurn
		require.NoError(t, json.Unmarshal(b, &out))
		require.Equal(t, in.Drive, out.Drive, string(b))
		require.Equal(t, in.Cancel, out.Cancel, string(b))
	}
	b, _ := json.Marshal(LiveTurn{Drive: driveRunning, Cancel: cancelWanted})
	require.Contains(t, string(b), `"child":"running"`)
	require.Contains(t, string(b), `"cancel":"wanted"`)

	var out LiveTurn
	require.NoError(t, json.Unmarshal([]byte(`{"child":"ended","cancel":"sent","started":true,"cancelling":true}`), &out))
	require.Equal(t, driveOver, out.Drive)
	require.Equal(t, cancelSent, out.Cancel)

	require.ErrorContains(t, json.Unmarshal([]byte(`{"child":"bogus"}`), &out), `unknown turn drive "bogus"`)
	require.ErrorContains(t, json.Unmarshal([]byte(`{"cancel":"bogus"}`), &out), `unknown turn cancel "bogus"`)
}

func TestLiveTurn_EnumNames(t *testing.T) {
	require.Equal(t, []string{"asked", "running", "ended"}, []string{driveAsked.String(), driveRunning.String(), driveOver.String()})
	require.Equal(t, []string{"none", "wanted", "sent"}, []string{cancelNone.String(), cancelWanted.String(), cancelSent.String()})
	require.Equal(t, "turnDrive(9)", turnDrive(9).String())
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

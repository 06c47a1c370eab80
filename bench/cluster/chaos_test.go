package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// turnJournal builds turn 1's events from a script: "3" is the agent's "chunk 3\n",
// "restart" a turn.restarted, "end" turn.ended end_turn, "fail" turn.failed.
func turnJournal(t *testing.T, script ...any) []signals.Event {
	t.Helper()
	evs := []signals.Event{{Kind: signals.EventTurnStarted, TurnID: 1}}
	for _, s := range script {
		ev := signals.Event{TurnID: 1}
		switch s {
		case "restart":
			ev.Kind = signals.EventTurnRestarted
		case "end":
			ev.Kind, ev.Data = signals.EventTurnEnded, json.RawMessage(`{"stop_reason":"end_turn"}`)
		case "fail":
			ev.Kind, ev.Data = signals.EventTurnFailed, json.RawMessage(`{"error":"agent exited"}`)
		default:
			b, err := json.Marshal(map[string]any{"update": map[string]any{
				"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": fmt.Sprintf("chunk %d\n", s)},
			}})
			require.NoError(t, err)
			ev.Kind, ev.Data = signals.EventAgentUpdate, b
		}
		evs = append(evs, ev)
	}
	for i := range evs {
		evs[i].Seq = int64(i + 1)
	}
	return evs
}

func TestCheckChunks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script []any
		err    string
	}{
		{"every chunk once, in order", []any{1, 2, 3, "end"}, ""},
		{"a restarted attempt streams the turn again", []any{1, 2, "restart", 1, 2, 3, "end"}, ""},
		{"a restart before any chunk", []any{"restart", 1, 2, 3, "end"}, ""},
		{"a chunk doubled", []any{1, 2, 2, 3, "end"}, "chunk 2 journaled where chunk 3 belongs (chunks 1-2,2-3)"},
		{"a chunk lost", []any{1, 3, "end"}, "chunk 3 journaled where chunk 2 belongs"},
		{"a chunk lost in an earlier attempt", []any{1, 3, "restart", 1, 2, 3, "end"}, "attempt 1 of 2: chunk 3"},
		{"the last chunks lost", []any{1, 2, "end"}, "ended with 2 of its 3 chunks"},
		{"an earlier attempt's chunks counted for the last", []any{1, 2, "restart", 3, "end"}, "attempt 2 of 2: chunk 3 journaled where chunk 1 belongs"},
		{"a failed turn", []any{1, 2, 3, "fail"}, "did not end end_turn: failed: agent exited"},
		{"no end", []any{1, 2, 3}, "did not end end_turn: no terminal event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkChunks(turnJournal(t, tc.script...), 1, 3)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
}

package session

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// journalOf builds events the way the session journals them.
func journalOf(t *testing.T, evs ...signals.Event) []signals.Event {
	t.Helper()
	for i := range evs {
		evs[i].Seq = int64(i + 1)
		evs[i].At = time.Unix(0, 0)
	}
	return evs
}

func tEv(kind string, turn int64, data any) signals.Event {
	b, _ := json.Marshal(data)
	return signals.Event{Kind: kind, TurnID: turn, Data: b}
}

func tChunk(text string) map[string]any {
	return map[string]any{"sessionId": "a", "update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}}}
}

func tToolCall(id, title, status string) map[string]any {
	return map[string]any{"sessionId": "a", "update": map[string]any{"sessionUpdate": "tool_call", "toolCallId": id, "title": title, "status": status}}
}

func tToolUpdate(id, status string) map[string]any {
	return map[string]any{"sessionId": "a", "update": map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": id, "status": status}}
}

func tTurn(id int64, prompt string, rest ...signals.Event) []signals.Event {
	out := []signals.Event{
		tEv(signals.EventPromptAccepted, id, signals.PromptAcceptedData{Text: prompt}),
		tEv(signals.EventTurnStarted, id, signals.TurnStartedData{Attempt: 1}),
	}
	return append(out, rest...)
}

func TestBuildTranscript(t *testing.T) {
	ended := tEv(signals.EventTurnEnded, 1, signals.TurnEndedData{StopReason: "end_turn"})
	tests := []struct {
		name       string
		events     []signals.Event
		beforeTurn int64
		want       []string // the lines after the header, in order
		absent     []string
	}{
		{
			name:   "NothingToCarry",
			events: nil,
		},
		{
			name: "PromptsAgentTextAndToolCalls",
			events: tTurn(1, "fix the bug",
				tEv(signals.EventAgentUpdate, 1, tChunk("Looking ")),
				tEv(signals.EventAgentUpdate, 1, tChunk("at it.")),
				tEv(signals.EventAgentUpdate, 1, tToolCall("t1", "Read main.go", "pending")),
				tEv(signals.EventAgentUpdate, 1, tToolUpdate("t1", "completed")),
				tEv(signals.EventAgentUpdate, 1, tChunk("Done.")),
				ended),
			want: []string{"## Turn 1", "User: fix the bug", "Agent: Looking at it.", "Tool call: Read main.go", "Tool call Read main.go — completed", "Agent: Done."},
		},
		{
			name: "SteersAreMarked",
			events: tTurn(1, "write tests",
				tEv(signals.EventSteerAccepted, 1, signals.SteerAcceptedData{Text: "only unit tests"}),
				ended),
			want: []string{"User: write tests", "User (steering, during the turn): only unit tests"},
		},
		{
			name: "RestartDropsTheLostAttemptsText",
			events: tTurn(1, "go",
				tEv(signals.EventAgentUpdate, 1, tChunk("partial of attempt 1")),
				tEv(signals.EventTurnRestarted, 1, signals.TurnStartedData{Attempt: 2}),
				tEv(signals.EventAgentUpdate, 1, tChunk("answer of attempt 2")),
				ended),
			want:   []string{"User: go", "Agent: answer of attempt 2"},
			absent: []string{"partial of attempt 1"},
		},
		{
			name: "TheTurnBeingSeededIsLeftOut",
			events: append(tTurn(1, "first", tEv(signals.EventAgentUpdate, 1, tChunk("one")), ended),
				tTurn(2, "second, the one that is sent")...),
			beforeTurn: 2,
			want:       []string{"User: first", "Agent: one"},
			absent:     []string{"second"},
		},
		{
			name: "FailuresAndCancelsAreSaid",
			events: append(tTurn(1, "a", tEv(signals.EventTurnFailed, 1, signals.TurnFailedData{Error: "agent: boom"})),
				tTurn(2, "b", tEv(signals.EventTurnEnded, 2, signals.TurnEndedData{StopReason: "cancelled"}))...),
			want: []string{"(the turn failed: agent: boom)", "(the turn ended: cancelled)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := BuildTranscript(journalOf(t, tt.events...), tt.beforeTurn, 0)
			if tt.want == nil {
				require.Empty(t, res.Text)
				return
			}
			require.True(t, strings.HasPrefix(res.Text, TranscriptHeader), res.Text)
			at := 0
			for _, line := range tt.want {
				i := strings.Index(res.Text[at:], line)
				require.GreaterOrEqual(t, i, 0, "%q missing (or out of order) in\n%s", line, res.Text)
				at += i + len(line)
			}
			for _, s := range tt.absent {
				require.NotContains(t, res.Text, s)
			}
			require.False(t, res.Truncated)
		})
	}
}

func TestBuildTranscript_BoundedNewestKept(t *testing.T) {
	var evs []signals.Event
	for i := int64(1); i <= 200; i++ {
		evs = append(evs, tTurn(i, strings.Repeat("x", 400)+" prompt "+string(rune('A'+i%26)),
			tEv(signals.EventTurnEnded, i, signals.TurnEndedData{StopReason: "end_turn"}))...)
	}
	evs = append(evs, tTurn(201, "the newest prompt", tEv(signals.EventTurnEnded, 201, signals.TurnEndedData{StopReason: "end_turn"}))...)
	const bound = 8 << 10
	res := BuildTranscript(journalOf(t, evs...), 0, bound)
	require.LessOrEqual(t, len(res.Text), bound)
	require.True(t, res.Truncated)
	require.Contains(t, res.Text, transcriptTruncated)
	require.Contains(t, res.Text, "the newest prompt")
	require.NotContains(t, res.Text, "## Turn 1\n")
}

func TestBuildTranscript_OneHugeTurnKeepsItsTail(t *testing.T) {
	evs := tTurn(1, "p", tEv(signals.EventAgentUpdate, 1, tChunk(strings.Repeat("é", 10000)+"THE END")))
	res := BuildTranscript(journalOf(t, evs...), 0, 4<<10)
	require.LessOrEqual(t, len(res.Text), 4<<10)
	require.True(t, res.Truncated)
	require.True(t, strings.HasSuffix(res.Text, "THE END"))
}

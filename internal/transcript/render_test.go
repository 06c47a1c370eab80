package transcript

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

func TestRendererStreamsAgentTextInlineAndTheRestOnLinesOfTheirOwn(t *testing.T) {
	var out bytes.Buffer
	r := NewRenderer(&out, &out)
	chunk := func(text string) signals.Event {
		raw, _ := json.Marshal(map[string]any{"update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]string{"type": "text", "text": text}}})
		return signals.Event{Kind: signals.EventAgentUpdate, TurnID: 1, Data: raw}
	}
	ended, _ := json.Marshal(signals.TurnEndedData{StopReason: "end_turn"})
	for _, ev := range []signals.Event{chunk("Hel"), chunk("lo"), {Kind: signals.EventTurnEnded, TurnID: 1, Data: ended}} {
		r.Render(ev)
	}
	r.Flush()
	require.Equal(t, "Hello\n[turn 1 ended: end_turn]\n", out.String())
}

func TestCompactCutsLongPayloads(t *testing.T) {
	require.Equal(t, `{"a":1}`, Compact(json.RawMessage(`{"a":1}`)))
	long := bytes.Repeat([]byte("x"), 300)
	require.Equal(t, string(long[:200])+"…", Compact(long))
}

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

// agent.settings reads as what a person can choose; an offer of capabilities alone (an
// editor's business) is left out rather than printed as JSON.
func TestRendererNamesWhatTheAgentOffers(t *testing.T) {
	var out bytes.Buffer
	r := NewRenderer(&out, &out)
	settings := func(s signals.AgentSettings) signals.Event {
		raw, _ := json.Marshal(s)
		return signals.Event{Kind: signals.EventAgentSettings, Data: raw}
	}
	r.Render(settings(signals.AgentSettings{PromptCapabilities: json.RawMessage(`{}`), McpCapabilities: json.RawMessage(`{}`)}))
	r.Render(settings(signals.AgentSettings{
		Modes:         []json.RawMessage{json.RawMessage(`{"id":"default","name":"Default"}`), json.RawMessage(`{"id":"plan","name":"Plan"}`)},
		CurrentModeID: "default",
		ConfigOptions: []json.RawMessage{
			json.RawMessage(`{"id":"mode","type":"select","currentValue":"default"}`),
			json.RawMessage(`{"id":"model","type":"select","currentValue":"sonnet"}`),
		},
		AvailableCommands: []json.RawMessage{json.RawMessage(`{"name":"init"}`)},
	}))
	changed, _ := json.Marshal(signals.ConfigOptionChangedData{ConfigID: "model", Value: "opus", ViewerID: "zed-1"})
	r.Render(signals.Event{Kind: signals.EventConfigOptionChanged, Data: changed})
	require.Equal(t, "[agent offers modes default, plan (current default); model sonnet; 1 command]\n[model opus (by zed-1)]\n", out.String())
}

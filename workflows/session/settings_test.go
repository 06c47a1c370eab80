package session

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/internal/testkit/fixture"
	"github.com/tacp-dev/tacp/signals"
)

// claudeOffer is what claude-agent-acp offers after session/new: modes, and config options
// mode and model (one flat, one grouped, to cover both ACP shapes).
func claudeOffer() signals.AgentSettings {
	return fixture.JSON[signals.AgentSettings]("testdata/claude-offer.json")
}

func TestSettings_NothingIsOfferedBeforeTheAgentReports(t *testing.T) {
	var s Settings
	require.Nil(t, s.View())
	require.Equal(t, signals.RejectInvalidRequest, s.CheckMode("plan").Type)
	require.Equal(t, signals.RejectInvalidRequest, s.CheckConfig("model", "opus").Type)
	require.Nil(t, s.Wanted())
}

func TestSettings_CheckMode(t *testing.T) {
	s := Settings{}
	require.True(t, s.Offered(claudeOffer()))
	for _, tt := range []struct {
		id string
		ok bool
	}{{"plan", true}, {"acceptEdits", true}, {"dontAsk", false}, {"", false}, {"Plan", false}} {
		rej := s.CheckMode(tt.id)
		require.Equal(t, tt.ok, rej == nil, tt.id)
	}
}

func TestSettings_CheckConfig(t *testing.T) {
	s := Settings{}
	s.Offered(claudeOffer())
	for _, tt := range []struct {
		id, value string
		ok        bool
	}{
		{"model", "opus", true},   // grouped values
		{"mode", "plan", true},    // flat values
		{"fast", "true", true},    // boolean
		{"fast", "yes", false},    // boolean takes true or false
		{"model", "gpt-5", false}, // not offered
		{"effort", "high", false}, // no such option
		{"model", "", false},
	} {
		rej := s.CheckConfig(tt.id, tt.value)
		require.Equal(t, tt.ok, rej == nil, "%s=%s: %v", tt.id, tt.value, rej)
	}
}

func TestSettings_SetRecordsTheChoiceAndTheCurrentValue(t *testing.T) {
	s := Settings{}
	s.Offered(claudeOffer())
	require.Equal(t, "default", s.SetMode("plan"))
	require.Equal(t, "sonnet", s.SetConfig("model", "opus"))
	require.Equal(t, "false", s.SetConfig("fast", "true"))
	v := s.View()
	require.Equal(t, "plan", v.CurrentModeID)
	cur, _ := s.current("model")
	require.Equal(t, "opus", cur)
	cur, _ = s.current("fast")
	require.Equal(t, "true", cur)
	require.JSONEq(t, `{"mode_id":"plan","config_options":[{"config_id":"model","value":"opus"},{"config_id":"fast","value":"true"}]}`, mustJSON(t, s.Wanted()))
}

// claude-agent-acp and codex-acp offer a mode config option beside their modes: setting
// either shows the same mode in both.
func TestSettings_TheModeAndTheModeOptionShowOneMode(t *testing.T) {
	s := Settings{}
	s.Offered(claudeOffer())
	s.SetMode("plan")
	cur, _ := s.current("mode")
	require.Equal(t, "plan", cur, "set_mode moves the mode option")
	s.SetConfig("mode", "default")
	require.Equal(t, "default", s.View().CurrentModeID, "the mode option moves the mode")
	s.SetMode("acceptEdits") // not a value of the mode option: it keeps its own
	cur, _ = s.current("mode")
	require.Equal(t, "default", cur)
}

func TestSettings_ANewAgentProcessReportsTheChoicesApplied(t *testing.T) {
	s := Settings{}
	s.Offered(claudeOffer())
	s.SetMode("plan")
	// The runner applied the choice before reporting: the offer says plan, nothing changed.
	o := claudeOffer()
	o.CurrentModeID = "plan"
	s.Offered(o)
	require.Equal(t, "plan", s.Wanted().ModeID)
}

func TestSettings_TheAgentsOwnChangeMovesTheChoice(t *testing.T) {
	s := Settings{}
	s.Offered(claudeOffer())
	s.SetMode("plan")
	require.True(t, s.Observe(json.RawMessage(`{"sessionId":"a","update":{"sessionUpdate":"current_mode_update","currentModeId":"acceptEdits"}}`)))
	require.Equal(t, "acceptEdits", s.Wanted().ModeID)
	require.False(t, s.Observe(json.RawMessage(`{"sessionId":"a","update":{"sessionUpdate":"current_mode_update","currentModeId":"acceptEdits"}}`)), "no change")
}

func TestSettings_ObserveTakesCommandsAndConfigOptions(t *testing.T) {
	s := Settings{}
	s.Offered(claudeOffer())
	require.True(t, s.Observe(json.RawMessage(`{"update":{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"review","description":"Review"}]}}`)))
	require.Len(t, s.View().AvailableCommands, 1)
	require.False(t, s.Observe(json.RawMessage(`{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}`)))
	require.True(t, s.Observe(json.RawMessage(`{"update":{"sessionUpdate":"config_option_update","configOptions":[{"id":"model","type":"select","currentValue":"opus","options":[{"value":"opus","name":"Opus"}]}]}}`)))
	require.NotNil(t, s.CheckConfig("fast", "true"), "the new list replaces the old")
	// The commands survive a new agent session that names none.
	s.Offered(claudeOffer())
	require.Len(t, s.View().AvailableCommands, 1)
}

func TestSettings_LegacyModels(t *testing.T) {
	s := Settings{}
	s.Offered(signals.AgentSettings{Models: json.RawMessage(`{"availableModels":[{"modelId":"gpt-5","name":"GPT-5"},{"modelId":"o3","name":"o3"}],"currentModelId":"gpt-5"}`)})
	require.True(t, s.IsLegacyModel(signals.ConfigModel))
	require.Nil(t, s.CheckConfig("model", "o3"))
	require.NotNil(t, s.CheckConfig("model", "o4"))
	require.Equal(t, "gpt-5", s.SetConfig("model", "o3"))
	cur, _ := s.current("model")
	require.Equal(t, "o3", cur)
	// A model config option wins over the legacy list.
	s.Offered(claudeOffer())
	require.False(t, s.IsLegacyModel(signals.ConfigModel))
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

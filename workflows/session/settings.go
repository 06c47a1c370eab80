package session

// The agent's offer as session state (contract §10): a pure core, no workflow.Context. The
// session feeds it what the runner reports after session/new or session/load (Offered) and
// every agent.update (Observe); clients change it through set_mode and set_config_option,
// checked against what the agent offered (CheckMode, CheckConfig) before anything changes.
// Choices is what clients chose, and what every new agent process gets re-applied; once a
// choice is made the agent's own later changes to the same setting follow it (an agent
// that leaves plan mode by itself is not put back there by a restart).

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/tacp-dev/tacp/signals"
)

// Settings is the session's view of the agent's offer and the clients' choices.
type Settings struct {
	Offer   signals.AgentSettings  `json:"offer"`
	Choices signals.SessionChoices `json:"choices"`
}

// View is status.agent_settings: nil until the agent has reported anything.
func (s *Settings) View() *signals.AgentSettings {
	if s == nil || s.empty() {
		return nil
	}
	v := s.Offer
	return &v
}

func (s *Settings) empty() bool {
	o := s.Offer
	return len(o.Modes) == 0 && o.CurrentModeID == "" && len(o.ConfigOptions) == 0 && len(o.AvailableCommands) == 0 &&
		len(o.PromptCapabilities) == 0 && len(o.McpCapabilities) == 0 && len(o.Models) == 0
}

func (s *Settings) snapshot() []byte {
	b, _ := json.Marshal(s.Offer)
	return b
}

// Offered takes what a new agent session offers (the runner's report after session/new or
// session/load, with the session's choices already applied): modes, config options, the
// models and the capabilities are replaced; the commands are kept unless it names some (an
// agent announces them with available_commands_update). It reports whether the view changed.
func (s *Settings) Offered(o signals.AgentSettings) bool {
	before := s.snapshot()
	cmds := s.Offer.AvailableCommands
	s.Offer = o
	if len(o.AvailableCommands) == 0 {
		s.Offer.AvailableCommands = cmds
	}
	s.follow()
	return !bytes.Equal(before, s.snapshot())
}

// Observe takes one agent.update (the raw session/update params): current_mode_update,
// config_option_update and available_commands_update change the view; other kinds are not
// its business. It reports whether the view changed.
func (s *Settings) Observe(params json.RawMessage) bool {
	var n struct {
		Update struct {
			Kind              string            `json:"sessionUpdate"`
			CurrentModeID     string            `json:"currentModeId"`
			ConfigOptions     []json.RawMessage `json:"configOptions"`
			AvailableCommands []json.RawMessage `json:"availableCommands"`
		} `json:"update"`
	}
	if json.Unmarshal(params, &n) != nil {
		return false
	}
	before := s.snapshot()
	u := n.Update
	switch u.Kind {
	case "current_mode_update":
		if u.CurrentModeID == "" {
			return false
		}
		s.Offer.CurrentModeID = u.CurrentModeID
	case "config_option_update":
		s.Offer.ConfigOptions = u.ConfigOptions
	case "available_commands_update":
		s.Offer.AvailableCommands = u.AvailableCommands
	default:
		return false
	}
	s.follow()
	return !bytes.Equal(before, s.snapshot())
}

// follow moves each choice to the agent's current value of the same setting: the latest
// decision wins, whoever made it.
func (s *Settings) follow() {
	if s.Choices.ModeID != "" && s.Offer.CurrentModeID != "" {
		s.Choices.ModeID = s.Offer.CurrentModeID
	}
	for i, c := range s.Choices.ConfigOptions {
		if cur, ok := s.current(c.ConfigID); ok {
			s.Choices.ConfigOptions[i].Value = cur
		}
	}
}

// modeIDs lists the ids of the modes the agent offers.
func (s *Settings) modeIDs() []string {
	ids := make([]string, 0, len(s.Offer.Modes))
	for _, m := range s.Offer.Modes {
		var v struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(m, &v) == nil && v.ID != "" {
			ids = append(ids, v.ID)
		}
	}
	return ids
}

// CheckMode refuses a mode the agent does not offer.
func (s *Settings) CheckMode(id string) *signals.Rejection {
	if id == "" {
		return signals.Reject(signals.RejectInvalidRequest, "mode_id is required")
	}
	ids := s.modeIDs()
	if len(ids) == 0 {
		return signals.Reject(signals.RejectInvalidRequest, "the agent offers no modes (yet: it reports them when a turn first runs)")
	}
	if !slices.Contains(ids, id) {
		return signals.Reject(signals.RejectInvalidRequest, "mode %q is not offered: want one of %v", id, ids)
	}
	return nil
}

// CheckModePolicy refuses, under an asking policy, a mode in which the agent decides by
// itself: the policy is the agent's ceiling, and allow_all is the explicit act that lifts it.
// An agent whose modes tacp does not know (no AskingModes) is not refused here.
func (s *Settings) CheckModePolicy(policy, id string) *signals.Rejection {
	asking := s.Offer.AskingModes
	if policy == signals.PolicyAllowAll || len(asking) == 0 || slices.Contains(asking, id) {
		return nil
	}
	if policy == "" {
		policy = signals.PolicyAskForRisky
	}
	return signals.Reject(signals.RejectForbidden,
		"mode %q lets the agent act without asking, and the session's policy %s asks first (it allows %v): to let the agent decide by itself, set the policy to allow_all first (starter policy allow_all)",
		id, policy, asking)
}

// Govern puts the session in a mode that asks when the agent is in one that does not (an
// asking policy set over allow_all), and reports the mode it left ("" when it was asking).
func (s *Settings) Govern() (left string) {
	o := s.Offer
	if len(o.AskingModes) == 0 || o.AskMode == "" || o.CurrentModeID == "" || slices.Contains(o.AskingModes, o.CurrentModeID) {
		return ""
	}
	return s.SetMode(o.AskMode)
}

// SetMode chooses mode id (checked by CheckMode) and returns the mode it replaces.
func (s *Settings) SetMode(id string) string {
	prev := s.Offer.CurrentModeID
	s.Offer.CurrentModeID = id
	s.Choices.ModeID = id
	s.mirrorMode(id)
	return prev
}

// mirrorMode shows mode id in the mode config option too, where the agent offers one beside
// its modes with the same values (claude-agent-acp and codex-acp do): a client reads the
// same mode in either, whichever way it was set.
func (s *Settings) mirrorMode(id string) {
	i, o, ok := s.option(signals.ConfigMode)
	if !ok || !slices.Contains(o.values(), id) {
		return
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(s.Offer.ConfigOptions[i], &raw) == nil {
		raw["currentValue"], _ = json.Marshal(id)
		s.Offer.ConfigOptions[i], _ = json.Marshal(raw)
	}
}

// configOption is the part of an ACP SessionConfigOption the session reads.
type configOption struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	CurrentValue json.RawMessage `json:"currentValue"`
	Options      json.RawMessage `json:"options"`
}

// selectValue is a value of a select option, or a group of them.
type selectValue struct {
	Value   string        `json:"value"`
	Options []selectValue `json:"options"`
}

func (o configOption) values() []string {
	var vals []selectValue
	_ = json.Unmarshal(o.Options, &vals)
	var out []string
	for _, v := range vals {
		if v.Value != "" {
			out = append(out, v.Value)
		}
		for _, g := range v.Options {
			out = append(out, g.Value)
		}
	}
	return out
}

func (s *Settings) option(id string) (int, configOption, bool) {
	for i, raw := range s.Offer.ConfigOptions {
		var o configOption
		if json.Unmarshal(raw, &o) == nil && o.ID == id {
			return i, o, true
		}
	}
	return -1, configOption{}, false
}

// legacyModels is the agent's unstable model state: {availableModels, currentModelId}.
type legacyModels struct {
	Available []struct {
		ModelID string `json:"modelId"`
	} `json:"availableModels"`
	Current string `json:"currentModelId"`
}

func (s *Settings) legacy(id string) (legacyModels, bool) {
	var m legacyModels
	if id != signals.ConfigModel || len(s.Offer.Models) == 0 || json.Unmarshal(s.Offer.Models, &m) != nil {
		return m, false
	}
	if _, _, ok := s.option(id); ok {
		return m, false // the config option wins over the legacy list
	}
	return m, true
}

// current is the agent's current value of config option id, as a string.
func (s *Settings) current(id string) (string, bool) {
	if m, ok := s.legacy(id); ok {
		return m.Current, true
	}
	_, o, ok := s.option(id)
	if !ok {
		return "", false
	}
	var str string
	if json.Unmarshal(o.CurrentValue, &str) == nil {
		return str, true
	}
	var b bool
	if json.Unmarshal(o.CurrentValue, &b) == nil {
		return strconv.FormatBool(b), true
	}
	return "", false
}

// CheckConfig refuses a config option the agent does not offer, or a value it does not
// offer for it (a boolean option takes "true" or "false").
func (s *Settings) CheckConfig(id, value string) *signals.Rejection {
	if id == "" || value == "" {
		return signals.Reject(signals.RejectInvalidRequest, "config_id and value are required")
	}
	if m, ok := s.legacy(id); ok {
		var ids []string
		for _, a := range m.Available {
			ids = append(ids, a.ModelID)
		}
		if !slices.Contains(ids, value) {
			return signals.Reject(signals.RejectInvalidRequest, "model %q is not offered: want one of %v", value, ids)
		}
		return nil
	}
	_, o, ok := s.option(id)
	if !ok {
		var ids []string
		for _, raw := range s.Offer.ConfigOptions {
			var o configOption
			if json.Unmarshal(raw, &o) == nil {
				ids = append(ids, o.ID)
			}
		}
		return signals.Reject(signals.RejectInvalidRequest, "config option %q is not offered: want one of %v", id, ids)
	}
	vals := o.values()
	if o.Type == "boolean" {
		vals = []string{"false", "true"}
	}
	if !slices.Contains(vals, value) {
		return signals.Reject(signals.RejectInvalidRequest, "config option %q has no value %q: want one of %v", id, value, vals)
	}
	return nil
}

// SetConfig chooses value for config option id (checked by CheckConfig) and returns the
// value it replaces.
func (s *Settings) SetConfig(id, value string) string {
	prev, _ := s.current(id)
	if _, ok := s.legacy(id); ok {
		var raw map[string]json.RawMessage
		if json.Unmarshal(s.Offer.Models, &raw) == nil {
			raw["currentModelId"], _ = json.Marshal(value)
			s.Offer.Models, _ = json.Marshal(raw)
		}
	} else if i, o, ok := s.option(id); ok {
		var raw map[string]json.RawMessage
		if json.Unmarshal(s.Offer.ConfigOptions[i], &raw) == nil {
			if o.Type == "boolean" {
				raw["currentValue"], _ = json.Marshal(value == "true")
			} else {
				raw["currentValue"], _ = json.Marshal(value)
			}
			s.Offer.ConfigOptions[i], _ = json.Marshal(raw)
		}
	}
	if id == signals.ConfigMode && s.CheckMode(value) == nil {
		s.Offer.CurrentModeID = value // the modes show what the mode option chose
	}
	for i, c := range s.Choices.ConfigOptions {
		if c.ConfigID == id {
			s.Choices.ConfigOptions[i].Value = value
			return prev
		}
	}
	s.Choices.ConfigOptions = append(s.Choices.ConfigOptions, signals.ConfigChoice{ConfigID: id, Value: value})
	return prev
}

// Wanted is what the runner applies to a new agent process: nil when nothing was chosen.
func (s *Settings) Wanted() *signals.SessionChoices {
	if s == nil || s.Choices.Empty() {
		return nil
	}
	c := s.Choices
	c.ConfigOptions = slices.Clone(c.ConfigOptions)
	return &c
}

// IsLegacyModel reports whether config option id is set through the legacy
// session/set_model (the runner decides by what its agent offers; the session by its view).
func (s *Settings) IsLegacyModel(id string) bool {
	_, ok := s.legacy(id)
	return ok
}

// IsSettingsUpdate reports whether agent.update params carry a settings update of the agent
// (current_mode_update, config_option_update, available_commands_update).
func IsSettingsUpdate(params json.RawMessage) bool {
	var n struct {
		Update struct {
			Kind string `json:"sessionUpdate"`
		} `json:"update"`
	}
	if json.Unmarshal(params, &n) != nil {
		return false
	}
	switch n.Update.Kind {
	case "current_mode_update", "config_option_update", "available_commands_update":
		return true
	}
	return false
}

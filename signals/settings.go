package signals

// What the agent offers is session state (contract §10): its modes, config options, slash
// commands and capabilities, kept in status.agent_settings and journaled as agent.settings
// when they change; set_mode and set_config_option change them, journaled as mode.changed
// and config_option.changed, delivered into the live agent and re-applied to every new agent
// process that takes the session.

import "encoding/json"

// Updates (each with a signal twin of the same name and payload).
const (
	UpdateSetMode         = "set_mode"
	UpdateSetConfigOption = "set_config_option"
)

// Events of the agent's offer and of the changes clients make to it.
const (
	EventAgentSettings       = "agent.settings"
	EventModeChanged         = "mode.changed"
	EventConfigOptionChanged = "config_option.changed"
)

// DeliverSettings carries a chosen mode or config value into the live agent
// (session/set_mode, session/set_config_option, or session/set_model for an agent that
// offers only the legacy model list).
const DeliverSettings = "settings"

// ConfigModel is the config option id that the legacy session/set_model maps onto: an
// agent that offers a `models` list and no `model` config option is set through it.
const ConfigModel = "model"

// ConfigMode is the config option id some agents offer beside their modes, with the modes
// as its values (claude-agent-acp, codex-acp): choosing it is choosing a mode.
const ConfigMode = "mode"

// AgentSettings is what the agent offers, as status.agent_settings and agent.settings show
// it. Modes, ConfigOptions, AvailableCommands and the capabilities are the agent's ACP JSON
// (camelCase inside), passed through so that an editor sees what the agent sent; Models is
// the agent's legacy (unstable) model state, for agents that offer no model config option.
type AgentSettings struct {
	Modes              []json.RawMessage `json:"modes,omitempty"`
	CurrentModeID      string            `json:"current_mode_id,omitempty"`
	ConfigOptions      []json.RawMessage `json:"config_options,omitempty"`
	AvailableCommands  []json.RawMessage `json:"available_commands,omitempty"`
	PromptCapabilities json.RawMessage   `json:"prompt_capabilities,omitempty"`
	McpCapabilities    json.RawMessage   `json:"mcp_capabilities,omitempty"`
	Models             json.RawMessage   `json:"models,omitempty"`
	// AskMode is the mode in which the agent asks before it acts, and AskingModes every
	// mode of the agent's that asks or does not act (plan): under an asking policy the
	// session takes no other (docs/real-agents.md). Empty for an agent whose modes tacp
	// does not know.
	AskMode     string   `json:"ask_mode,omitempty"`
	AskingModes []string `json:"asking_modes,omitempty"`
	// PolicyCeiling is set when the worker's operator forbids allow_all for the session's
	// agent profile: the session's policy asks at least this much (ProfileInfo).
	PolicyCeiling string `json:"policy_ceiling,omitempty"`
}

// ConfigChoice is one config option value a client chose.
type ConfigChoice struct {
	ConfigID string `json:"config_id"`
	Value    string `json:"value"`
}

// SessionChoices is what clients chose of the agent's offer: the runner applies it to every
// agent process that takes the session, before its first prompt, where the agent's own
// current values differ.
type SessionChoices struct {
	ModeID        string         `json:"mode_id,omitempty"`
	ConfigOptions []ConfigChoice `json:"config_options,omitempty"`
}

// Empty reports whether nothing was chosen.
func (c SessionChoices) Empty() bool { return c.ModeID == "" && len(c.ConfigOptions) == 0 }

// SetModeRequest is the payload of set_mode; SetModeResult answers it.
type SetModeRequest struct {
	ModeID   string `json:"mode_id"`
	ViewerID string `json:"viewer_id,omitempty"`
	// By names who acts (as PromptRequest.By); journaled with the change.
	By string `json:"by,omitempty"`
}

// SetModeResult answers set_mode.
type SetModeResult struct {
	ModeID string `json:"mode_id"`
}

// SetConfigOptionRequest is the payload of set_config_option; SetConfigOptionResult
// answers it.
type SetConfigOptionRequest struct {
	ConfigID string `json:"config_id"`
	Value    string `json:"value"`
	ViewerID string `json:"viewer_id,omitempty"`
	// By names who acts (as PromptRequest.By); journaled with the change.
	By string `json:"by,omitempty"`
}

// SetConfigOptionResult answers set_config_option.
type SetConfigOptionResult struct {
	ConfigID string `json:"config_id"`
	Value    string `json:"value"`
}

// ModeChangedData is the data of mode.changed.
type ModeChangedData struct {
	ModeID   string `json:"mode_id"`
	Previous string `json:"previous,omitempty"`
	ViewerID string `json:"viewer_id,omitempty"`
	By       string `json:"by,omitempty"`
	// ByPolicy is set when the session's policy chose the mode: an asking policy set while
	// the agent was in a mode in which it decides by itself (ViewerID set the policy).
	ByPolicy bool `json:"by_policy,omitempty"`
}

// ConfigOptionChangedData is the data of config_option.changed.
type ConfigOptionChangedData struct {
	ConfigID string `json:"config_id"`
	Value    string `json:"value"`
	Previous string `json:"previous,omitempty"`
	ViewerID string `json:"viewer_id,omitempty"`
	By       string `json:"by,omitempty"`
}

// UpdateSetMcpServers replaces the MCP servers the session passes its agent (an editor sends
// its project's on every session/load and session/resume); it has a signal twin. The
// worker's MCP policy checks them as it checks session/new's; like those they are kept in
// the session's config, never logged or journaled, and reach the agent at its next turn
// (the runner loads the agent session again when its servers changed).
const UpdateSetMcpServers = "set_mcp_servers"

// SetMcpServersRequest is the payload of set_mcp_servers: McpServers is the ACP McpServer
// JSON list ([] for none).
type SetMcpServersRequest struct {
	McpServers json.RawMessage `json:"mcp_servers"`
	ViewerID   string          `json:"viewer_id,omitempty"`
}

// SetMcpServersResult answers set_mcp_servers: Changed is false when the session had
// these servers already.
type SetMcpServersResult struct {
	Changed bool `json:"changed"`
}

package agent

// With Options.Settings (-settings) the agent offers what claude-agent-acp offers: modes
// default, acceptEdits and plan, and config options mode and model (sonnet, opus) in the
// answers of session/new and session/load, starting at default and sonnet in every new
// process (a mode is not kept across processes, as real agents do not keep it); it honours
// session/set_mode and session/set_config_option (an unknown mode or value is invalid
// params; set_mode publishes config_option_update with every option before it answers, as
// claude-agent-acp 0.101.0 does), advertises promptCapabilities {image, embeddedContext} and mcpCapabilities
// {http, sse}, and answers the directives
//
//	/settings            say "settings mode=<mode> model=<model>"
//	/mcp                 say "mcp: <names of the MCP servers session/new or session/load got>"

import (
	"context"
	"fmt"
	"slices"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

var (
	settingsModes  = []string{"default", "acceptEdits", "plan"}
	settingsModels = []string{"sonnet", "opus"}
)

func (s *session) modeState() *acp.SessionModeState {
	out := &acp.SessionModeState{CurrentModeId: acp.SessionModeId(s.mode)}
	for _, m := range settingsModes {
		out.AvailableModes = append(out.AvailableModes, acp.SessionMode{Id: acp.SessionModeId(m), Name: m})
	}
	return out
}

func selectOption(id, name, current string, values []string) acp.SessionConfigOption {
	opts := acp.SessionConfigSelectOptionsUngrouped{}
	for _, v := range values {
		opts = append(opts, acp.SessionConfigSelectOption{Value: acp.SessionConfigValueId(v), Name: v})
	}
	return acp.SessionConfigOption{Select: &acp.SessionConfigOptionSelect{
		Id: acp.SessionConfigId(id), Name: name, Type: "select", CurrentValue: acp.SessionConfigValueId(current),
		Options: acp.SessionConfigSelectOptions{Ungrouped: &opts},
	}}
}

func (s *session) configOptions() []acp.SessionConfigOption {
	return []acp.SessionConfigOption{
		selectOption("mode", "Mode", s.mode, settingsModes),
		selectOption("model", "Model", s.model, settingsModels),
	}
}

// offerSettings sets up a session's settings on session/new or session/load.
func (a *testAgent) offerSettings(s *session, servers []acp.McpServer) (*acp.SessionModeState, []acp.SessionConfigOption) {
	s.mode, s.model = settingsModes[0], settingsModels[0]
	if slices.Contains(settingsModes, a.opts.InitialMode) {
		s.mode = a.opts.InitialMode
	}
	s.mcp = s.mcp[:0]
	for _, m := range servers {
		switch {
		case m.Http != nil:
			s.mcp = append(s.mcp, "http:"+m.Http.Name)
		case m.Sse != nil:
			s.mcp = append(s.mcp, "sse:"+m.Sse.Name)
		case m.Stdio != nil:
			s.mcp = append(s.mcp, "stdio:"+m.Stdio.Name)
		}
	}
	if !a.opts.Settings {
		return nil, nil
	}
	return s.modeState(), s.configOptions()
}

func (a *testAgent) SetSessionMode(_ context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	if !a.opts.Settings {
		return acp.SetSessionModeResponse{}, nil // without -settings: accepted, changes nothing
	}
	s, err := a.lookup(p.SessionId)
	if err != nil {
		return acp.SetSessionModeResponse{}, err
	}
	if !slices.Contains(settingsModes, string(p.ModeId)) {
		return acp.SetSessionModeResponse{}, acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("unknown mode %q", p.ModeId)})
	}
	if a.opts.IgnoreSetMode {
		return acp.SetSessionModeResponse{}, acp.NewInternalError(map[string]any{"error": "this agent's own settings pin its mode"})
	}
	s.mu.Lock()
	s.mode = string(p.ModeId)
	opts := s.configOptions()
	s.mu.Unlock()
	// As claude-agent-acp does: the mode's change is published, before the answer, as a
	// config_option_update listing every option with its current value — the model too,
	// as it is now (a client that sets the model next has not yet).
	_ = a.connection().SessionUpdate(context.Background(), acp.SessionNotification{
		SessionId: p.SessionId,
		Update:    acp.SessionUpdate{ConfigOptionUpdate: &acp.SessionConfigOptionUpdate{SessionUpdate: "config_option_update", ConfigOptions: opts}},
	})
	return acp.SetSessionModeResponse{}, nil
}

func (a *testAgent) SetSessionConfigOption(_ context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	if !a.opts.Settings || p.ValueId == nil {
		return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
	}
	s, err := a.lookup(p.ValueId.SessionId)
	if err != nil {
		return acp.SetSessionConfigOptionResponse{}, err
	}
	v := string(p.ValueId.Value)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case p.ValueId.ConfigId == "mode" && a.opts.IgnoreSetMode:
		return acp.SetSessionConfigOptionResponse{}, acp.NewInternalError(map[string]any{"error": "this agent's own settings pin its mode"})
	case p.ValueId.ConfigId == "mode" && slices.Contains(settingsModes, v):
		s.mode = v
	case p.ValueId.ConfigId == "model" && slices.Contains(settingsModels, v):
		s.model = v
	default:
		return acp.SetSessionConfigOptionResponse{}, acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("no value %q for config option %q", v, p.ValueId.ConfigId)})
	}
	return acp.SetSessionConfigOptionResponse{ConfigOptions: s.configOptions()}, nil
}

// settingsLine is what /settings says.
func (s *session) settingsLine() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("settings mode=%s model=%s", s.mode, s.model)
}

// mcpLine is what /mcp says.
func (s *session) mcpLine() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "mcp: " + strings.Join(s.mcp, ",")
}

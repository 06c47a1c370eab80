package gateway

// The agent's offer on the ACP face (contract §10): session/new, load and resume answer with
// the session's modes and config options; session/set_mode, session/set_config_option and
// the legacy session/set_model map to the set_mode and set_config_option updates; and every
// attached client is sent current_mode_update, config_option_update and
// available_commands_update whenever the session's view changes (whoever changed it), and
// the current commands at once when it attaches. A new session's agent has not run yet:
// session/new answers with the profile's offer in a new session as the workers learned it
// (ProfileInfo.Settings: the probe's session/new, or an earlier session's first turn), and
// the updates follow when the first turn's agent reports.

import (
	"context"
	"encoding/json"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

// offerOf converts the session's view into ACP's modes and config options.
func offerOf(st *signals.AgentSettings) (*acp.SessionModeState, []acp.SessionConfigOption) {
	if st == nil {
		return nil, nil
	}
	var modes *acp.SessionModeState
	if len(st.Modes) > 0 {
		modes = &acp.SessionModeState{CurrentModeId: acp.SessionModeId(st.CurrentModeID), AvailableModes: []acp.SessionMode{}}
		for _, raw := range st.Modes {
			var m acp.SessionMode
			if json.Unmarshal(raw, &m) == nil {
				modes.AvailableModes = append(modes.AvailableModes, m)
			}
		}
	}
	var opts []acp.SessionConfigOption
	for _, raw := range st.ConfigOptions {
		var o acp.SessionConfigOption
		if json.Unmarshal(raw, &o) == nil {
			opts = append(opts, o)
		}
	}
	return modes, opts
}

// sessionOffer reads the session's view for an answer.
func (c *conn) sessionOffer(ctx context.Context, id string) (*acp.SessionModeState, []acp.SessionConfigOption) {
	st, err := c.client().Status(ctx, id)
	if err != nil {
		return nil, nil
	}
	return offerOf(st.AgentSettings)
}

func (c *conn) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	if c.observer() {
		return acp.SetSessionModeResponse{}, forbidden("set the mode")
	}
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	if err := c.mayAct(cctx, string(p.SessionId), "set the mode"); err != nil {
		return acp.SetSessionModeResponse{}, err
	}
	_, err := c.client().SetMode(cctx, string(p.SessionId), signals.SetModeRequest{ModeID: string(p.ModeId), ViewerID: c.viewer, By: c.answeredBy()})
	return acp.SetSessionModeResponse{}, rpcErr(err)
}

func (c *conn) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	var sid, id, value string
	switch {
	case p.ValueId != nil:
		sid, id, value = string(p.ValueId.SessionId), string(p.ValueId.ConfigId), string(p.ValueId.Value)
	case p.Boolean != nil:
		sid, id, value = string(p.Boolean.SessionId), string(p.Boolean.ConfigId), "false"
		if p.Boolean.Value {
			value = "true"
		}
	default:
		return acp.SetSessionConfigOptionResponse{}, invalidParams("want a config option value")
	}
	if err := c.setConfig(ctx, sid, id, value); err != nil {
		return acp.SetSessionConfigOptionResponse{}, err
	}
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	_, opts := c.sessionOffer(cctx, sid)
	if opts == nil {
		opts = []acp.SessionConfigOption{}
	}
	return acp.SetSessionConfigOptionResponse{ConfigOptions: opts}, nil
}

// UnstableSetSessionModel serves the legacy session/set_model: the session's model config
// option (or the agent's legacy model list, which the session maps onto it).
func (c *conn) UnstableSetSessionModel(ctx context.Context, p acp.UnstableSetSessionModelRequest) (acp.UnstableSetSessionModelResponse, error) {
	return acp.UnstableSetSessionModelResponse{}, c.setConfig(ctx, string(p.SessionId), signals.ConfigModel, string(p.ModelId))
}

func (c *conn) setConfig(ctx context.Context, sid, id, value string) error {
	if c.observer() {
		return forbidden("set config options")
	}
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	if err := c.mayAct(cctx, sid, "set config options"); err != nil {
		return err
	}
	_, err := c.client().SetConfigOption(cctx, sid, signals.SetConfigOptionRequest{ConfigID: id, Value: value, ViewerID: c.viewer, By: c.answeredBy()})
	return rpcErr(err)
}

func (c *conn) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	if c.observer() {
		return acp.CloseSessionResponse{}, forbidden("close sessions")
	}
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	if err := c.mayAct(cctx, string(p.SessionId), "close it"); err != nil {
		return acp.CloseSessionResponse{}, err
	}
	_, err := c.client().Close(cctx, string(p.SessionId), signals.CloseRequest{Reason: "session/close", By: c.answeredBy()})
	return acp.CloseSessionResponse{}, rpcErr(err)
}

// settingsSent is what an attachment last showed its client of the session's view, so that
// a change is sent once, whether the agent's own update or the session's event shows it.
type settingsSent struct {
	mode, options, commands string
}

// noteAgentUpdate records a settings update of the agent relayed as it came.
func (a *attachment) noteAgentUpdate(update json.RawMessage) {
	var u struct {
		Kind              string          `json:"sessionUpdate"`
		CurrentModeID     string          `json:"currentModeId"`
		ConfigOptions     json.RawMessage `json:"configOptions"`
		AvailableCommands json.RawMessage `json:"availableCommands"`
	}
	if json.Unmarshal(update, &u) != nil {
		return
	}
	switch u.Kind {
	case "current_mode_update":
		a.shown.mode = u.CurrentModeID
	case "config_option_update":
		a.shown.options = compact(u.ConfigOptions)
	case "available_commands_update":
		a.shown.commands = compact(u.AvailableCommands)
	}
}

func compact(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// pushSettings sends the client what changed of the session's view since it last saw it,
// asking the session for its view.
func (a *attachment) pushSettings(seq int64) {
	ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
	defer cancel()
	st, err := a.c.client().Status(ctx, a.id)
	if err != nil || st.AgentSettings == nil {
		return
	}
	a.showSettings(seq, st.AgentSettings)
}

// showSettings sends the client what changed of view v since it last saw it. An
// agent.settings event carries the whole view, so it is shown from the event itself: no
// query, and nothing held up behind one — it comes as an agent starts, just before its
// first chunk.
func (a *attachment) showSettings(seq int64, v *signals.AgentSettings) {
	meta := signals.ACPMeta{Seq: seq}.Map()
	send := func(update any) {
		u, err := json.Marshal(update)
		if err == nil {
			a.write(sessionUpdate{SessionID: a.id, Update: u, Meta: meta})
		}
	}
	if v.CurrentModeID != "" && v.CurrentModeID != a.shown.mode {
		a.shown.mode = v.CurrentModeID
		send(map[string]any{"sessionUpdate": "current_mode_update", "currentModeId": v.CurrentModeID})
	}
	if len(v.ConfigOptions) > 0 {
		raw, _ := json.Marshal(v.ConfigOptions)
		if s := compact(raw); s != a.shown.options {
			a.shown.options = s
			send(map[string]any{"sessionUpdate": "config_option_update", "configOptions": json.RawMessage(raw)})
		}
	}
	if len(v.AvailableCommands) > 0 {
		raw, _ := json.Marshal(v.AvailableCommands)
		if s := compact(raw); s != a.shown.commands {
			a.shown.commands = s
			send(map[string]any{"sessionUpdate": "available_commands_update", "availableCommands": json.RawMessage(raw)})
		}
	}
}

package activities

// What the agent offers (contract §10), on the runner's side: after session/new or
// session/load the runner reads the agent's modes, config options, models and
// capabilities, applies the session's choices where the agent's current values differ
// (before the first prompt, so a chosen mode or model survives every new agent process),
// and reports the result in turn_started. A choice made while a turn runs arrives as a
// settings delivery and is applied at once.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

// agentOffer is what one agent session offers, as the runner tracks it: kept on the
// hosted agent, so a turn on a live agent applies only what changed since.
type agentOffer struct {
	// mu guards the fields, never across a call to the agent: a notification the agent sends
	// before its answer is handled before the answer is.
	mu      sync.Mutex
	modes   *acp.SessionModeState
	options []acp.SessionConfigOption
	models  *acp.SessionModelState
	// fresh is set when the agent session was just opened: its offer goes to the session.
	fresh bool
	// applying counts tacp's own changes in flight (apply): the settings updates the agent
	// sends meanwhile answer them (claude-agent-acp publishes config_option_update before
	// it answers set_mode, the model in it as it was before tacp sets it next).
	applying atomic.Int32
}

// answersOwnChange reports whether raw, a session/update, is the agent's answer to a change
// tacp is making: it is not a change of the agent's and is not journaled as one (the
// session learns the result from tacp's own report: turn_started's settings, the delivery's
// outcome). What the agent changes by itself, outside tacp's requests, is journaled.
func (o *agentOffer) answersOwnChange(raw json.RawMessage) bool {
	if o.applying.Load() == 0 {
		return false
	}
	var n struct {
		Update struct {
			Kind string `json:"sessionUpdate"`
		} `json:"update"`
	}
	if json.Unmarshal(raw, &n) != nil {
		return false
	}
	return n.Update.Kind == "config_option_update" || n.Update.Kind == "current_mode_update"
}

// offerOf reads a session/new or session/load answer.
func offerOf(modes *acp.SessionModeState, options []acp.SessionConfigOption, models *acp.SessionModelState) *agentOffer {
	return &agentOffer{modes: modes, options: options, models: models, fresh: true}
}

// report is the offer as the session keeps it, with the agent's capabilities.
func (o *agentOffer) report(caps acp.InitializeResponse) *signals.AgentSettings {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := &signals.AgentSettings{}
	if o.modes != nil {
		out.CurrentModeID = string(o.modes.CurrentModeId)
		for _, m := range o.modes.AvailableModes {
			if b, err := json.Marshal(m); err == nil {
				out.Modes = append(out.Modes, b)
			}
		}
	}
	for _, c := range o.options {
		if b, err := json.Marshal(c); err == nil {
			out.ConfigOptions = append(out.ConfigOptions, b)
		}
	}
	if o.models != nil {
		out.Models, _ = json.Marshal(o.models)
	}
	out.PromptCapabilities, _ = json.Marshal(caps.AgentCapabilities.PromptCapabilities)
	out.McpCapabilities, _ = json.Marshal(caps.AgentCapabilities.McpCapabilities)
	return out
}

// option finds config option id.
func (o *agentOffer) option(id string) (int, bool) {
	for i, c := range o.options {
		if (c.Select != nil && string(c.Select.Id) == id) || (c.Boolean != nil && string(c.Boolean.Id) == id) {
			return i, true
		}
	}
	return -1, false
}

// current is the agent's current value of config option id.
func (o *agentOffer) current(id string) (string, bool) {
	if i, ok := o.option(id); ok {
		if c := o.options[i]; c.Select != nil {
			return string(c.Select.CurrentValue), true
		}
		return strconv.FormatBool(o.options[i].Boolean.CurrentValue), true
	}
	if id == signals.ConfigModel && o.models != nil {
		return string(o.models.CurrentModelId), true
	}
	return "", false
}

// apply sets in the agent what c chose and the agent does not have yet: session/set_mode,
// session/set_config_option, or the legacy session/set_model for an agent that offers
// models and no model config option. The first error stops it.
func (o *agentOffer) apply(ctx context.Context, conn *acp.ClientSideConnection, sid acp.SessionId, c signals.SessionChoices) error {
	o.applying.Add(1)
	defer o.applying.Add(-1)
	o.mu.Lock()
	setMode := c.ModeID != "" && (o.modes == nil || string(o.modes.CurrentModeId) != c.ModeID)
	o.mu.Unlock()
	if setMode {
		if _, err := conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: sid, ModeId: acp.SessionModeId(c.ModeID)}); err != nil {
			return fmt.Errorf("session/set_mode %s: %w", c.ModeID, err)
		}
		o.mu.Lock()
		if o.modes != nil {
			o.modes.CurrentModeId = acp.SessionModeId(c.ModeID)
		}
		o.mu.Unlock()
	}
	for _, ch := range c.ConfigOptions {
		if err := o.applyOption(ctx, conn, sid, ch); err != nil {
			return err
		}
	}
	return nil
}

func (o *agentOffer) applyOption(ctx context.Context, conn *acp.ClientSideConnection, sid acp.SessionId, ch signals.ConfigChoice) error {
	o.mu.Lock()
	cur, known := o.current(ch.ConfigID)
	i, isOption := o.option(ch.ConfigID)
	legacy := !isOption && ch.ConfigID == signals.ConfigModel && o.models != nil
	boolean := isOption && o.options[i].Boolean != nil
	o.mu.Unlock()
	switch {
	case known && cur == ch.Value:
		return nil
	case legacy:
		if _, err := conn.UnstableSetSessionModel(ctx, acp.UnstableSetSessionModelRequest{SessionId: sid, ModelId: acp.UnstableModelId(ch.Value)}); err != nil {
			return fmt.Errorf("session/set_model %s: %w", ch.Value, err)
		}
		o.mu.Lock()
		o.models.CurrentModelId = acp.ModelId(ch.Value)
		o.mu.Unlock()
		return nil
	case !isOption:
		return fmt.Errorf("the agent offers no config option %q", ch.ConfigID)
	}
	req := acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{SessionId: sid, ConfigId: acp.SessionConfigId(ch.ConfigID), Value: acp.SessionConfigValueId(ch.Value)}}
	if boolean {
		req = acp.SetSessionConfigOptionRequest{Boolean: &acp.SetSessionConfigOptionBoolean{SessionId: sid, ConfigId: acp.SessionConfigId(ch.ConfigID), Type: "boolean", Value: ch.Value == "true"}}
	}
	resp, err := conn.SetSessionConfigOption(ctx, req)
	if err != nil {
		return fmt.Errorf("session/set_config_option %s=%s: %w", ch.ConfigID, ch.Value, err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(resp.ConfigOptions) > 0 {
		o.options = resp.ConfigOptions
	} else if i, ok := o.option(ch.ConfigID); ok {
		if sel := o.options[i].Select; sel != nil {
			sel.CurrentValue = acp.SessionConfigValueId(ch.Value)
		} else {
			o.options[i].Boolean.CurrentValue = ch.Value == "true"
		}
	}
	return nil
}

// observe follows the agent's own changes (current_mode_update, config_option_update).
func (o *agentOffer) observe(raw json.RawMessage) {
	var n acp.SessionNotification
	if json.Unmarshal(raw, &n) != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch u := n.Update; {
	case u.CurrentModeUpdate != nil && o.modes != nil:
		o.modes.CurrentModeId = u.CurrentModeUpdate.CurrentModeId
	case u.ConfigOptionUpdate != nil:
		o.options = u.ConfigOptionUpdate.ConfigOptions
	}
}

// applyChoices applies the session's choices to the agent session the turn took, before
// its first prompt, and returns the offer to report in turn_started: set when the agent
// session was just opened, or when applying changed something. A choice the agent refuses
// is logged and left: the turn runs with what the agent has. Under an asking policy the
// agent's mode is governed (modes.go): it is put in a mode that asks, and an agent that
// stays in one that does not fails the turn before its prompt.
func (r *Runner) applyChoices(ctx context.Context, ag *hostedAgent, sid acp.SessionId, in signals.RunTurnInput, profile Profile, log *slog.Logger) (*signals.AgentSettings, error) {
	o := ag.offer.Load()
	if o == nil {
		return nil, nil
	}
	table := profile.modeTable(ag.proc.caps.AgentInfo)
	in.Policy = profile.sessionPolicy(in.Policy)
	o.mu.Lock()
	fresh := o.fresh
	o.fresh = false
	o.mu.Unlock()
	choices := signals.SessionChoices{}
	if in.Choices != nil {
		choices = *in.Choices
	}
	if table != nil {
		choices = governChoices(table, in.Policy, choices)
	}
	governed := table != nil && asksPolicy(in.Policy)
	var applyErr error
	if !choices.Empty() {
		if applyErr = o.apply(ctx, ag.proc.conn, sid, choices); applyErr != nil {
			log.Warn("the session's settings were not all applied to the agent", "error", applyErr)
		}
		fresh = true
	}
	if governed {
		if mode := o.currentMode(); !table.asks(mode) {
			return nil, selfDeciding(profile.Name, mode, in.Policy, table, applyErr)
		}
	}
	if !fresh && profile.PolicyCeiling() == "" {
		return nil, nil
	}
	out := o.report(ag.proc.caps)
	if table != nil {
		out.AskMode, out.AskingModes = table.Ask, table.modes()
	}
	out.PolicyCeiling = profile.PolicyCeiling()
	if in.Choices == nil || in.Choices.Empty() {
		// A session that chose nothing holds what any new session of the profile will.
		r.Trust.Profiles.Offered(profile.Name, out)
	}
	return out, nil
}

// governChoices is choices as the policy lets them reach the agent: the mode governMode
// says, and under an asking policy no value of the mode config option (which
// claude-agent-acp and codex-acp offer beside their modes) in which the agent decides.
func governChoices(table *ModeTable, policy string, c signals.SessionChoices) signals.SessionChoices {
	c.ModeID = governMode(table, policy, c.ModeID)
	var opts []signals.ConfigChoice
	for _, o := range c.ConfigOptions {
		if o.ConfigID == signals.ConfigMode && asksPolicy(policy) && !table.asks(o.Value) {
			continue
		}
		opts = append(opts, o)
	}
	c.ConfigOptions = opts
	return c
}

// currentMode is the agent's current mode ("" for an agent that offers none).
func (o *agentOffer) currentMode() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.modes == nil {
		if v, ok := o.current(signals.ConfigMode); ok {
			return v
		}
		return ""
	}
	return string(o.modes.CurrentModeId)
}

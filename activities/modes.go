package activities

// The session's policy is the agent's ceiling (docs/real-agents.md, "What each policy does
// to each agent"): under an asking policy (ask_for_risky, ask_always) no agent acts unasked,
// whatever its own defaults. An agent's ACP session modes decide whether it asks its client
// (session/request_permission) before it writes or runs anything: Claude Code starts in
// "auto", Codex in "agent", both approving their own tool calls. A profile knows its agent's
// modes (ModeTable); before each prompt the runner puts the agent in the mode that asks unless
// the session chose one the policy allows, and under an asking policy it checks the mode the
// agent reports and sends no prompt to one that stays in a mode in which it decides by itself.

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

// ModeTable is what tacp must know of an agent's modes to govern it.
type ModeTable struct {
	// Ask is the mode that asks the client before the agent writes a file or runs a
	// command: the mode the runner puts the agent in under an asking policy.
	Ask string `json:"ask"`
	// Asking are the modes that ask or do not act at all (a plan mode), Ask among them. Every
	// other mode the agent offers counts as deciding by itself.
	Asking []string `json:"asking,omitempty"`
}

// asks reports whether mode is one in which the agent asks.
func (m *ModeTable) asks(mode string) bool {
	return mode == m.Ask || slices.Contains(m.Asking, mode)
}

// modes lists Ask and Asking, once each, Ask first.
func (m *ModeTable) modes() []string {
	out := []string{m.Ask}
	for _, a := range m.Asking {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

func (m *ModeTable) check() error {
	if m.Ask == "" {
		return fmt.Errorf(`modes: "ask" names the mode in which the agent asks before it acts`)
	}
	return nil
}

// knownAgent is what tacp knows of a well-known agent beyond its profile.
type knownAgent struct {
	// info is the agentInfo.name it answers to initialize.
	info string
	// commands are the executables that run it (a command's first word, its base name).
	commands []string
	// modes is its mode table: nil for an agent with no modes (OpenCode, governed by the
	// permission configuration its profile's environment sets).
	modes *ModeTable
}

// knownAgents are the well-known agents by their profile name (wellKnown). The modes are
// those the pinned versions offer (.ci/peers): claude-agent-acp 0.101.0 offers default
// ("Manual"), acceptEdits, plan, auto and bypassPermissions; codex-acp 2.6.0 read-only,
// workspace-write, agent and agent-full-access; Gemini CLI 0.61.0 default, autoEdit, yolo
// and plan.
var knownAgents = map[string]knownAgent{
	"claude":   {info: "@agentclientprotocol/claude-agent-acp", commands: []string{"claude-agent-acp"}, modes: &ModeTable{Ask: "default", Asking: []string{"plan"}}},
	"codex":    {info: "@agentclientprotocol/codex-acp", commands: []string{"codex-acp"}, modes: &ModeTable{Ask: "read-only"}},
	"gemini":   {info: "gemini-cli", commands: []string{"gemini"}, modes: &ModeTable{Ask: "default", Asking: []string{"plan"}}},
	"opencode": {info: "OpenCode", commands: []string{"opencode"}},
}

// agentOfCommand recognises a well-known agent by the program a command line runs: its
// first word that is not env(1), one of env's VAR=value words or a flag, by base name.
func agentOfCommand(argv []string) string {
	for i, w := range argv {
		base := filepath.Base(w)
		switch {
		case i == 0 && base == "env", strings.HasPrefix(w, "-"), i > 0 && filepath.Base(argv[0]) == "env" && strings.Contains(w, "="):
			continue
		}
		for name, k := range knownAgents {
			if slices.Contains(k.commands, base) {
				return name
			}
		}
		return ""
	}
	return ""
}

// agentOfInfo recognises a well-known agent by the agentInfo it answered to initialize.
func agentOfInfo(info *acp.Implementation) string {
	if info == nil {
		return ""
	}
	for name, k := range knownAgents {
		if k.info == info.Name {
			return name
		}
	}
	return ""
}

// modeTable is the table that governs the profile's agent: the profile's own, else the
// well-known agent's it runs (named, recognised by its command, or by the agentInfo it
// answered). Nil: tacp does not know the agent's modes and leaves them as they are.
func (pr Profile) modeTable(info *acp.Implementation) *ModeTable {
	if pr.Modes != nil {
		return pr.Modes
	}
	name := pr.Agent
	if name == "" {
		name = agentOfInfo(info)
	}
	return knownAgents[name].modes
}

// PolicyCeiling is the most a session of the profile may allow: ask_for_risky when the
// profile forbids allow_all, else "" (any policy).
func (pr Profile) PolicyCeiling() string {
	if pr.AllowAll != nil && !*pr.AllowAll {
		return signals.PolicyAskForRisky
	}
	return ""
}

// sessionPolicy is the policy that governs a turn: the session's, under the profile's
// ceiling.
func (pr Profile) sessionPolicy(level string) string {
	if c := pr.PolicyCeiling(); c != "" && !asksPolicy(level) {
		return c
	}
	return level
}

// asksPolicy reports whether level is an asking policy (empty: the default, which asks).
func asksPolicy(level string) bool { return level != signals.PolicyAllowAll }

// governMode is what the runner sets of the agent's mode before a prompt: the session's
// chosen mode where the policy allows it (any under allow_all, one that asks under an asking
// policy), else the table's Ask. An agent starts in the mode that asks under allow_all too,
// whatever its own default: the policy answers its requests at once, and every decision is
// in the journal; the agent decides by itself only in a mode the session chose. With no
// table the choice stands as it is.
func governMode(table *ModeTable, policy, chosen string) string {
	if table == nil || (chosen != "" && (!asksPolicy(policy) || table.asks(chosen))) {
		return chosen
	}
	return table.Ask
}

// selfDeciding is the turn's failure when the agent stays in a mode in which it decides
// by itself under an asking policy: no prompt was sent.
func selfDeciding(profile, mode, policy string, table *ModeTable, cause error) error {
	why := ""
	if cause != nil {
		why = fmt.Sprintf(" (%v)", cause)
	}
	return fmt.Errorf("agent profile %q: the agent stays in mode %q, in which it acts without asking, and the session's policy %s asks first%s: no prompt was sent. "+
		"Fix the agent's own settings that pin its mode, give the profile the agent's asking modes (\"modes\": {\"ask\": ...}), or let the agent decide by itself: starter policy allow_all",
		profile, mode, policyName(policy), why)
}

func policyName(level string) string {
	if level == "" {
		return signals.PolicyAskForRisky
	}
	return level
}

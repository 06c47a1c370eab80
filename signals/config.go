package signals

// Validation of SessionConfig (contract §2), shared by the client, which refuses a bad config
// before it starts anything, and the workflow, which applies the defaults.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Permission policy levels (contract §6).
const (
	PolicyAllowAll    = "allow_all"
	PolicyAskForRisky = "ask_for_risky"
	PolicyAskAlways   = "ask_always"
)

// ValidPolicyLevel reports whether level is one of the three policy levels.
func ValidPolicyLevel(level string) bool {
	switch level {
	case PolicyAllowAll, PolicyAskForRisky, PolicyAskAlways:
		return true
	}
	return false
}

// MaxConfigDuration bounds the durations of a SessionConfig: past it, a turn's activity
// bound (turn_deadline plus slack) would overflow time.Duration.
const MaxConfigDuration = 100 * 365 * 24 * time.Hour

// ParseConfigDuration parses the SessionConfig duration field name: "" is 0 (the default),
// anything else must be a positive Go duration of at most MaxConfigDuration.
func ParseConfigDuration(name, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > MaxConfigDuration {
		return 0, fmt.Errorf("invalid %s %q: want a positive Go duration such as \"15m\", at most 100 years", name, s)
	}
	return d, nil
}

// ValidateSessionConfig reports the first field of cfg that cannot work: the session id, the
// agent profile's name, the policy level, or a duration. Whether the worker offers the
// profile and allows the workspace only the worker can tell (contract §10).
func ValidateSessionConfig(cfg SessionConfig) error {
	if err := ValidateSessionConfigFormat(cfg); err != nil {
		return err
	}
	if cfg.Agent != "" {
		if err := ValidateProfileName(cfg.Agent); err != nil {
			return err
		}
	}
	return nil
}

// ValidateSessionConfigFormat is ValidateSessionConfig without the agent's name: the checks a
// session has made of its config since its first version (a session started before agent
// profiles named a command line there, and still replays).
func ValidateSessionConfigFormat(cfg SessionConfig) error {
	if err := ValidateSessionID(cfg.SessionID); err != nil {
		return err
	}
	if err := ValidateAccess(cfg.Access); err != nil {
		return err
	}
	if cfg.Policy != "" && !ValidPolicyLevel(cfg.Policy) {
		return fmt.Errorf("invalid policy %q: want allow_all, ask_for_risky or ask_always", cfg.Policy)
	}
	if f := cfg.ForkOf; f != nil {
		if err := ValidateSessionID(f.SessionID); err != nil {
			return fmt.Errorf("fork_of: %w", err)
		}
		if f.SessionID == cfg.SessionID {
			return errors.New("fork_of: a session cannot be a fork of itself")
		}
		if f.BeforeTurn < 0 {
			return fmt.Errorf("fork_of: before_turn %d: want 0 (all) or a turn", f.BeforeTurn)
		}
	}
	for _, f := range []struct{ name, value string }{
		{"grace_window", cfg.GraceWindow},
		{"turn_deadline", cfg.TurnDeadline},
		{"permission_timeout", cfg.PermissionTimeout},
		{"affinity_wait", cfg.AffinityWait},
	} {
		if _, err := ParseConfigDuration(f.name, f.value); err != nil {
			return err
		}
	}
	return nil
}

// MaxProfileNameLen bounds an agent profile's name.
const MaxProfileNameLen = 64

// ValidateProfileName checks that name can name an agent profile: 1–64 of [A-Za-z0-9._-].
// A command line is refused with a note on what changed.
func ValidateProfileName(name string) error {
	ok := name != "" && len(name) <= MaxProfileNameLen
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c == '.' || c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	if ok {
		return nil
	}
	shown := name
	if len(shown) > MaxProfileNameLen {
		shown = shown[:MaxProfileNameLen] + "…"
	}
	return fmt.Errorf("invalid agent %q: want the name of an agent profile the worker offers (1-%d of A-Z a-z 0-9 . _ -); "+
		"agent is no longer a command line: the worker's operator defines the command (worker -agent.profile NAME=COMMAND)", shown, MaxProfileNameLen)
}

// ProfileInfo is an agent profile as clients see it: never its command or environment.
type ProfileInfo struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Default     bool   `json:"default,omitempty"`
	// PromptCapabilities and McpCapabilities are what the profile's agent answered in its
	// last initialize on the answering worker (ACP JSON), the MCP transports narrowed to
	// those the worker's MCP policy takes; empty until that worker has started the agent.
	PromptCapabilities json.RawMessage `json:"prompt_capabilities,omitempty"`
	McpCapabilities    json.RawMessage `json:"mcp_capabilities,omitempty"`
	// AuthMethods are the agent's auth methods (ACP JSON) when the worker cannot complete
	// them by itself: empty once the agent opened a session on the worker, or when the
	// agent's environment holds the key of one of its env-var methods.
	AuthMethods []json.RawMessage `json:"auth_methods,omitempty"`
	// Sandbox is the kernel sandbox the profile's agent runs in; nil: none (the profile
	// runs unsandboxed, or the worker predates sandboxes).
	Sandbox *SandboxInfo `json:"sandbox,omitempty"`
	// PolicyCeiling is the most a session of the profile may allow ("ask_for_risky" when the
	// worker's operator forbids allow_all for it; empty: any policy).
	PolicyCeiling string `json:"policy_ceiling,omitempty"`
	// Settings is the agent's offer in a new session (modes, config options, models), as
	// the session's first turn will hold it: the mode the policy puts it in. Learned on the
	// answering worker from the probe's session/new or a new session's first turn; nil
	// until then. Clients answer session/new with it before the agent has run.
	Settings *AgentSettings `json:"settings,omitempty"`
}

// Describe says in one line what the sandbox lets the agent do: "off" for none.
func (s *SandboxInfo) Describe() string {
	if s == nil {
		return "off"
	}
	line := "on · network " + s.Network
	if len(s.Allow) > 0 {
		line += " (" + strings.Join(s.Allow, ", ") + ")"
	}
	for _, part := range []struct {
		name  string
		items []string
	}{{"read-only", s.ReadOnly}, {"read-write", s.ReadWrite}, {"protected", s.Protect}, {"state per session", s.State}} {
		if len(part.items) > 0 {
			line += " · " + part.name + " " + strings.Join(part.items, ", ")
		}
	}
	return line
}

// SandboxInfo is what a profile's kernel sandbox lets its agent do, besides its session's
// workspace, temp folder and the system read-only.
type SandboxInfo struct {
	// Network is "all" (any port but the Temporal frontend's and the worker's), "none" or
	// "allowlist" (the hosts of Allow, through the worker's egress proxy).
	Network string   `json:"network"`
	Allow   []string `json:"allow,omitempty"`
	// ReadOnly and ReadWrite are the profile's extra paths; Protect the workspace paths kept
	// read-only; State the variables naming the agent state folders kept per session.
	ReadOnly  []string `json:"read_only,omitempty"`
	ReadWrite []string `json:"read_write,omitempty"`
	Protect   []string `json:"protect,omitempty"`
	State     []string `json:"state,omitempty"`
}

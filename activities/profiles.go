package activities

// Agent profiles: the agents a worker's operator allows it to run (contract §10, "The worker
// is the trust boundary"). A session names a profile; the profile, defined on the worker,
// says which program runs and with which environment. Nothing a client sends is ever a
// command line.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/tacp-dev/tacp/internal/sandbox"
	"github.com/tacp-dev/tacp/signals"
)

// DefaultProfile is the name of the profile that serves sessions naming none, unless the
// operator names another default.
const DefaultProfile = "default"

// Profile is one agent a worker may run.
type Profile struct {
	// Name is what a session's `agent` names: 1–64 of [A-Za-z0-9._-].
	Name string `json:"name"`
	// Command is the agent's command line: words split on spaces, quotes group words
	// (SplitCommand). Never a shell.
	Command string `json:"command"`
	// Env is set on top of the worker's environment (less tacp's and Temporal's own
	// variables, see AgentEnv).
	Env map[string]string `json:"env,omitempty"`
	// EnvFiles sets variables from files the worker reads when it starts the agent (a
	// secret's value, trailing newline trimmed): {"ANTHROPIC_API_KEY": "/run/secrets/key"}.
	EnvFiles map[string]string `json:"env_files,omitempty"`
	// Description is shown to clients beside the name.
	Description string `json:"description,omitempty"`
	// ClientFS, when false, keeps the agent on its own file tools: initialize offers it no
	// fs/* (default true: the workspace's files through tacp's sandbox). Gemini CLI 0.61
	// cannot create a file through a client's fs.
	ClientFS *bool `json:"client_fs,omitempty"`
	// TypedFailures, when false, does not ask the agent for typed failures in initialize
	// (default true). codex-acp 2.6.0 asked for them no longer reports a session's first
	// turn's usage, so its profile does not ask (and its limited turns fail as before).
	TypedFailures *bool `json:"typed_failures,omitempty"`
	// Sandbox is SandboxOn or SandboxOff: whether the agent process runs in the kernel
	// sandbox of its session (internal/sandbox). Empty: the worker's default (-agent.sandbox,
	// on in the worker binary).
	Sandbox string `json:"sandbox,omitempty"`
	// Agent names the well-known agent the profile runs (claude, codex, gemini, opencode):
	// its asking modes, quirks and state folders apply (adoptKnown). Empty: recognised by
	// the command's program, else by the agentInfo the agent answers to initialize.
	Agent string `json:"agent,omitempty"`
	// Modes is the agent's mode table, for an agent tacp does not know (modes.go).
	Modes *ModeTable `json:"modes,omitempty"`
	// AllowAll, when false, forbids sessions of the profile the allow_all policy: the
	// operator's ceiling for a managed team (default true). Such a session's policy asks.
	AllowAll *bool `json:"allow_all,omitempty"`
	// Settings are the sandbox's settings: network, allow, read_only, read_write, protect
	// and state (sandbox.Settings).
	sandbox.Settings
}

// The values of Profile.Sandbox.
const (
	SandboxOn  = "on"
	SandboxOff = "off"
)

// Sandboxed reports whether the profile's agent runs in the kernel sandbox.
func (pr Profile) Sandboxed() bool { return pr.Sandbox == SandboxOn }

// SandboxInfo is what clients see of the profile's sandbox (nil: none).
func (pr Profile) SandboxInfo() *signals.SandboxInfo {
	if !pr.Sandboxed() {
		return nil
	}
	network, _ := sandbox.ParseNetwork(pr.Network)
	protect := pr.Protect
	if protect == nil {
		protect = sandbox.DefaultProtect
	}
	return &signals.SandboxInfo{
		Network: network, Allow: pr.Allow, ReadOnly: pr.ReadOnly, ReadWrite: pr.ReadWrite,
		Protect: append([]string{WorkspaceMarker}, protect...), State: slices.Sorted(maps.Keys(pr.State)),
	}
}

// AsksTypedFailures reports whether initialize asks the agent for its typed failures (the
// AIR extension's sessionFailure, how a limited turn is told apart: limits.go).
func (pr Profile) AsksTypedFailures() bool { return pr.TypedFailures == nil || *pr.TypedFailures }

// OffersClientFS reports whether initialize offers the agent the client's files.
func (pr Profile) OffersClientFS() bool { return pr.ClientFS == nil || *pr.ClientFS }

// Profiles is the set of profiles a worker offers and the name of its default.
type Profiles struct {
	byName  map[string]Profile
	deflt   string
	ordered []string
	// learned is what the worker learned of the profiles' agents (agentinfo.go).
	learned learnedAgents
}

// NewProfiles checks ps and returns them as a set; deflt names the default profile ("" : the
// profile named DefaultProfile when there is one, else the only profile).
func NewProfiles(ps []Profile, deflt string) (*Profiles, error) {
	p := &Profiles{byName: map[string]Profile{}}
	for _, pr := range ps {
		if err := signals.ValidateProfileName(pr.Name); err != nil {
			return nil, err
		}
		if _, dup := p.byName[pr.Name]; dup {
			return nil, fmt.Errorf("agent profile %q is defined twice", pr.Name)
		}
		argv, err := SplitCommand(pr.Command)
		if err != nil {
			return nil, fmt.Errorf("agent profile %q: %w", pr.Name, err)
		}
		if len(argv) == 0 {
			return nil, fmt.Errorf("agent profile %q has no command", pr.Name)
		}
		for k := range pr.Env {
			if !sandbox.ValidEnvName(k) {
				return nil, fmt.Errorf("agent profile %q: invalid environment variable name %q", pr.Name, k)
			}
		}
		for k := range pr.EnvFiles {
			if !sandbox.ValidEnvName(k) {
				return nil, fmt.Errorf("agent profile %q: invalid environment variable name %q", pr.Name, k)
			}
		}
		if pr.Sandbox != "" && pr.Sandbox != SandboxOn && pr.Sandbox != SandboxOff {
			return nil, fmt.Errorf("agent profile %q: sandbox %q: want %q or %q", pr.Name, pr.Sandbox, SandboxOn, SandboxOff)
		}
		if err := pr.Settings.Check(); err != nil {
			return nil, fmt.Errorf("agent profile %q: sandbox: %w", pr.Name, err)
		}
		if pr.Modes != nil {
			if err := pr.Modes.check(); err != nil {
				return nil, fmt.Errorf("agent profile %q: %w", pr.Name, err)
			}
		}
		if pr.Agent == "" {
			pr.Agent = agentOfCommand(argv)
		} else if _, ok := knownAgents[pr.Agent]; !ok {
			return nil, fmt.Errorf("agent profile %q: agent %q: want one of the well-known agents %s", pr.Name, pr.Agent, strings.Join(slices.Sorted(maps.Keys(knownAgents)), ", "))
		}
		pr = pr.adoptKnown(argv)
		p.byName[pr.Name] = pr
		p.ordered = append(p.ordered, pr.Name)
	}
	if len(p.byName) == 0 {
		return nil, errors.New("no agent profiles: a worker needs at least one agent it may run")
	}
	slices.Sort(p.ordered)
	switch {
	case deflt != "":
		if _, ok := p.byName[deflt]; !ok {
			return nil, fmt.Errorf("default agent profile %q is not defined (profiles: %s)", deflt, strings.Join(p.ordered, ", "))
		}
	case len(p.ordered) == 1:
		deflt = p.ordered[0]
	default:
		if _, ok := p.byName[DefaultProfile]; ok {
			deflt = DefaultProfile
		}
	}
	p.deflt = deflt
	return p, nil
}

// LoadProfiles reads a profiles file: {"default": NAME, "profiles": [Profile...]}.
func LoadProfiles(path string) ([]Profile, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("agent profiles: %w", err)
	}
	var f struct {
		Default  string    `json:"default"`
		Profiles []Profile `json:"profiles"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, "", fmt.Errorf("agent profiles %s: %w", path, err)
	}
	return f.Profiles, f.Default, nil
}

// Default is the name of the profile serving sessions that name none ("" when the worker
// has none: such sessions are refused).
func (p *Profiles) Default() string { return p.deflt }

// Names lists the profiles, sorted.
func (p *Profiles) Names() []string { return slices.Clone(p.ordered) }

// Infos lists the profiles as clients see them: names and descriptions, never commands,
// with what the worker learned of their agents.
func (p *Profiles) Infos() []signals.ProfileInfo { return p.infos(MCPPolicy{Mode: MCPListed}) }

// infos is Infos with the agents' MCP transports narrowed to those policy mcp takes.
func (p *Profiles) infos(mcp MCPPolicy) []signals.ProfileInfo {
	out := make([]signals.ProfileInfo, 0, len(p.ordered))
	for _, n := range p.ordered {
		info := signals.ProfileInfo{Name: n, Description: p.byName[n].Description, Default: n == p.deflt, Sandbox: p.byName[n].SandboxInfo(), PolicyCeiling: p.byName[n].PolicyCeiling()}
		info.PromptCapabilities, info.McpCapabilities, info.AuthMethods = p.known(n, mcp)
		info.Settings = p.offered(n)
		out = append(out, info)
	}
	return out
}

// Resolve returns the profile a session's agent names ("" is the default). An unknown name
// is an invalid_request rejection that lists the names.
func (p *Profiles) Resolve(name string) (Profile, error) {
	if name == "" {
		name = p.deflt
		if name == "" {
			return Profile{}, signals.Reject(signals.RejectInvalidRequest,
				"this worker has no default agent profile: name one of %s", strings.Join(p.ordered, ", "))
		}
	}
	pr, ok := p.byName[name]
	if !ok {
		return Profile{}, signals.Reject(signals.RejectInvalidRequest,
			"unknown agent profile %q: this worker offers %s", clip(name, 64), strings.Join(p.ordered, ", "))
	}
	return pr, nil
}

// Argv is the profile's command split into words.
func (pr Profile) Argv() []string {
	argv, _ := SplitCommand(pr.Command) // checked by NewProfiles
	return argv
}

// hiddenEnvPrefixes are the worker's own variables an agent never sees: Temporal
// credentials and tacp's payload keys. An agent runs shell commands on a person's behalf;
// it has no business holding the keys to every session's history.
var hiddenEnvPrefixes = []string{"TEMPORAL_", "TACP_"}

// AgentEnv is the environment the agent process starts with: base (the worker's) without
// the hidden variables, then the profile's Env, then its EnvFiles.
func (pr Profile) AgentEnv(base []string) ([]string, error) {
	env := make([]string, 0, len(base)+len(pr.Env)+len(pr.EnvFiles))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if slices.ContainsFunc(hiddenEnvPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		if _, over := pr.Env[name]; over {
			continue
		}
		if _, over := pr.EnvFiles[name]; over {
			continue
		}
		env = append(env, kv)
	}
	for _, k := range slices.Sorted(maps.Keys(pr.Env)) {
		env = append(env, k+"="+pr.Env[k])
	}
	for _, k := range slices.Sorted(maps.Keys(pr.EnvFiles)) {
		b, err := os.ReadFile(pr.EnvFiles[k])
		if err != nil {
			// The path is the operator's; the error does not echo the file's content.
			return nil, fmt.Errorf("agent profile %q: %s from file: %w", pr.Name, k, err)
		}
		env = append(env, k+"="+strings.TrimRight(string(b), "\r\n"))
	}
	return env, nil
}

// clip shortens a client's string for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ParseProfileFlag parses one -agent.profile value: NAME=COMMAND, or the name of a
// well-known agent alone (claude, codex, gemini, opencode).
func ParseProfileFlag(v string) (Profile, error) {
	name, cmd, ok := strings.Cut(v, "=")
	if !ok {
		if p, known := WellKnownProfile(strings.TrimSpace(v)); known {
			return p, nil
		}
		return Profile{}, fmt.Errorf("agent profile %q: want NAME=COMMAND, or one of the well-known agents %s", v, strings.Join(slices.Sorted(maps.Keys(wellKnown)), ", "))
	}
	if strings.TrimSpace(cmd) == "" {
		return Profile{}, fmt.Errorf("agent profile %q: want NAME=COMMAND", v)
	}
	return Profile{Name: strings.TrimSpace(name), Command: cmd}, nil
}

// wellKnown are the agents an operator can enable by name alone (-agent.profile claude):
// the ACP adapters of the coding agents people run, with the settings they need behind a
// worker (README "Running real agents"). Each expects its executable on the worker's PATH
// and its credentials in the worker's environment (or env_files in a profiles file).
var wellKnown = map[string]Profile{
	// @agentclientprotocol/claude-agent-acp. Claude Code refuses to start as root unless
	// IS_SANDBOX is exactly "1"; with it set for every user, root or not, the profile works
	// the same. Telemetry and update checks are off: a worker's agent has no use for them.
	// In the sandbox each session's Claude Code has a CLAUDE_CONFIG_DIR of its own (its
	// conversations, its .claude.json), seeded with the files of ~/.claude (settings.json).
	"claude": {Name: "claude", Agent: "claude", Command: "claude-agent-acp", Description: "Claude Code (claude-agent-acp)",
		Env:      map[string]string{"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"},
		Settings: sandbox.Settings{State: map[string]string{"CLAUDE_CONFIG_DIR": "~/.claude"}}},
	// @agentclientprotocol/codex-acp. It starts in "Auto review" (it approves its own
	// writes); read-only makes it ask tacp before every write and every command.
	// In the sandbox each session's Codex has a CODEX_HOME of its own, seeded with the
	// files of ~/.codex (config.toml, auth.json).
	"codex": {Name: "codex", Agent: "codex", Command: "codex-acp", Description: "Codex (codex-acp)", TypedFailures: new(bool),
		Env:      map[string]string{"INITIAL_AGENT_MODE": "read-only"},
		Settings: sandbox.Settings{State: map[string]string{"CODEX_HOME": "~/.codex"}}},
	// @google/gemini-cli in ACP mode. Offered a client's fs it cannot create a file through
	// it (0.61.0 does not take the client's not-found error as a missing file), so it keeps
	// its own file tools.
	// In the sandbox each session's Gemini CLI has a GEMINI_CLI_HOME of its own (it keeps
	// .gemini there in place of ~/.gemini), empty at first.
	"gemini": {Name: "gemini", Agent: "gemini", Command: "gemini --acp", Description: "Gemini CLI", ClientFS: new(bool),
		Settings: sandbox.Settings{State: map[string]string{"GEMINI_CLI_HOME": ""}}},
	// opencode-ai's `opencode acp`. No autoupdate, no plugins installed at start. It has no
	// modes: its permission configuration decides, and by default lets it edit and run
	// commands unasked; OPENCODE_PERMISSION, which it merges over any configuration file,
	// makes it ask the client first (under allow_all tacp answers at once).
	// In the sandbox each session's OpenCode keeps its data (conversations), state, cache
	// and configuration in folders of its own (it writes them all at start), the latter
	// seeded with the files of ~/.config/opencode. Its ACP side talks to a server of its
	// own on a loopback port (--port): the sandbox gives each agent one it may reach.
	"opencode": {Name: "opencode", Agent: "opencode", Command: "opencode acp", Description: "OpenCode",
		Env: map[string]string{"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
			"OPENCODE_PERMISSION": OpenCodeAsks},
		Settings: sandbox.Settings{OwnPortFlag: "--port", State: map[string]string{
			"XDG_CONFIG_HOME": "~/.config/./opencode", "XDG_DATA_HOME": "", "XDG_STATE_HOME": "", "XDG_CACHE_HOME": ""}}},
}

// OpenCodeAsks is OpenCode's permission configuration under tacp: ask the client before
// every edit, command and fetch.
const OpenCodeAsks = `{"edit":"ask","bash":"ask","webfetch":"ask"}`

// adoptKnown gives a profile of a well-known agent what the agent's built-in profile has
// and the profile does not: its environment, quirks and state folders. The operator's own
// word wins: a variable the profile's env or its command (env(1)'s VAR=value words) sets,
// a state folder or quirk it names.
func (pr Profile) adoptKnown(argv []string) Profile {
	wk, ok := wellKnown[pr.Agent]
	if !ok {
		return pr
	}
	set := func(k string) bool {
		_, inEnv := pr.Env[k]
		_, inFiles := pr.EnvFiles[k]
		return inEnv || inFiles || slices.ContainsFunc(argv, func(w string) bool { return strings.HasPrefix(w, k+"=") })
	}
	env, state := maps.Clone(pr.Env), maps.Clone(pr.State)
	for k, v := range wk.Env {
		if !set(k) {
			if env == nil {
				env = map[string]string{}
			}
			env[k] = v
		}
	}
	for k, v := range wk.State {
		if _, own := pr.State[k]; !own && !set(k) {
			if state == nil {
				state = map[string]string{}
			}
			state[k] = v
		}
	}
	pr.Env, pr.State = env, state
	if pr.ClientFS == nil {
		pr.ClientFS = wk.ClientFS
	}
	if pr.TypedFailures == nil {
		pr.TypedFailures = wk.TypedFailures
	}
	if pr.OwnPortFlag == "" {
		pr.OwnPortFlag = wk.OwnPortFlag
	}
	return pr
}

// WellKnownProfile returns the built-in profile of a well-known agent: claude, codex,
// gemini or opencode.
func WellKnownProfile(name string) (Profile, bool) {
	p, ok := wellKnown[name]
	if !ok {
		return Profile{}, false
	}
	p.Env = maps.Clone(p.Env)
	if p.Env == nil {
		p.Env = map[string]string{}
	}
	p.State, p.ReadOnly = maps.Clone(p.State), slices.Clone(p.ReadOnly)
	return p, true
}

package activities

// Agent profiles: the agents a worker's operator allows it to run (DESIGN §10, "The worker
// is the trust boundary"). A session names a profile; the profile, defined on the worker,
// says which program runs and with which environment. Nothing a client sends is ever a
// command line.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

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
}

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
			if !validEnvName(k) {
				return nil, fmt.Errorf("agent profile %q: invalid environment variable name %q", pr.Name, k)
			}
		}
		for k := range pr.EnvFiles {
			if !validEnvName(k) {
				return nil, fmt.Errorf("agent profile %q: invalid environment variable name %q", pr.Name, k)
			}
		}
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
		info := signals.ProfileInfo{Name: n, Description: p.byName[n].Description, Default: n == p.deflt}
		info.PromptCapabilities, info.McpCapabilities, info.AuthMethods = p.known(n, mcp)
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
	for _, k := range sortedKeys(pr.Env) {
		env = append(env, k+"="+pr.Env[k])
	}
	for _, k := range sortedKeys(pr.EnvFiles) {
		b, err := os.ReadFile(pr.EnvFiles[k])
		if err != nil {
			// The path is the operator's; the error does not echo the file's content.
			return nil, fmt.Errorf("agent profile %q: %s from file: %w", pr.Name, k, err)
		}
		env = append(env, k+"="+strings.TrimRight(string(b), "\r\n"))
	}
	return env, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9' {
			continue
		}
		return false
	}
	return true
}

// clip shortens a client's string for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ParseProfileFlag parses one -agent.profile value: NAME=COMMAND.
func ParseProfileFlag(v string) (Profile, error) {
	name, cmd, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(cmd) == "" {
		return Profile{}, fmt.Errorf("agent profile %q: want NAME=COMMAND", v)
	}
	return Profile{Name: strings.TrimSpace(name), Command: cmd}, nil
}

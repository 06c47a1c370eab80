package tacpworker

// What a worker allows (contract §10): its agent profiles, workspace roots and MCP policy.

import (
	"fmt"
	"path/filepath"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/internal/selfagent"
	"github.com/tacp-dev/tacp/testagent/agent"
)

// sandboxDefault checks Options.Sandbox ("": off).
func sandboxDefault(s string) (string, error) {
	switch s {
	case "", activities.SandboxOff:
		return activities.SandboxOff, nil
	case activities.SandboxOn:
		return s, nil
	}
	return "", fmt.Errorf("sandbox %q: want %q or %q", s, activities.SandboxOn, activities.SandboxOff)
}

// NewTrust builds what a worker allows from opts (DataDir set): its profiles (Agent as the
// "default" profile; the built-in test agent when there are none; a profile that does not
// say whether it runs sandboxed takes opts.Sandbox), its workspace roots and its MCP policy.
func NewTrust(opts Options) (*activities.Trust, error) {
	profiles := append([]activities.Profile(nil), opts.Profiles...)
	if opts.Agent != "" || len(profiles) == 0 {
		p := activities.Profile{Name: activities.DefaultProfile, Command: opts.Agent, Description: "the worker's default agent"}
		if p.Command == "" {
			// The built-in test agent keeps its transcripts (its conversations) per session
			// in a sandbox, in the data dir's testagent folder without one.
			p.Command = selfagent.Command("")
			p.Env = map[string]string{agent.TranscriptsEnv: filepath.Join(opts.DataDir, "testagent")}
			p.State = map[string]string{agent.TranscriptsEnv: ""}
		}
		profiles = append(profiles, p)
	}
	deflt, err := sandboxDefault(opts.Sandbox)
	if err != nil {
		return nil, err
	}
	for i := range profiles {
		if profiles[i].Sandbox == "" {
			profiles[i].Sandbox = deflt
		}
	}
	ps, err := activities.NewProfiles(profiles, opts.DefaultProfile)
	if err != nil {
		return nil, err
	}
	dirs := opts.WorkspaceRoots
	if len(dirs) == 0 {
		dirs = []string{filepath.Join(opts.DataDir, "workspaces")}
	}
	roots, err := activities.NewRoots(dirs)
	if err != nil {
		return nil, err
	}
	mode, err := activities.ParseMCPMode(opts.MCP.Mode)
	if err != nil {
		return nil, err
	}
	return &activities.Trust{Profiles: ps, Roots: roots, MCP: activities.MCPPolicy{Mode: mode, Commands: opts.MCP.Commands}}, nil
}

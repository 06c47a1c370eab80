package tacpworker

// What a worker allows (DESIGN §10): its agent profiles, workspace roots and MCP policy.

import (
	"path/filepath"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/internal/selfagent"
)

// NewTrust builds what a worker allows from opts (DataDir set): its profiles (Agent as the
// "default" profile; the built-in test agent when there are none), its workspace roots and
// its MCP policy.
func NewTrust(opts Options) (*activities.Trust, error) {
	profiles := append([]activities.Profile(nil), opts.Profiles...)
	if opts.Agent != "" || len(profiles) == 0 {
		cmd := opts.Agent
		if cmd == "" {
			cmd = selfagent.Command(filepath.Join(opts.DataDir, "testagent"))
		}
		profiles = append(profiles, activities.Profile{Name: activities.DefaultProfile, Command: cmd, Description: "the worker's default agent"})
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

package activities

// Trust is what a worker's operator allows: the agent profiles it may run, the workspace
// roots sessions may work in, and the MCP servers a client may hand an agent. The session
// workflow asks it (workflows.Admission) before a session starts and before every prompt;
// the runner asks it again before every turn, so nothing a client sends runs on the worker
// without passing it.

import (
	"encoding/json"
	"errors"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

// Trust implements workflows.Admission for a worker.
type Trust struct {
	Profiles *Profiles
	Roots    *Roots
	MCP      MCPPolicy
}

// Admit checks that cfg names a profile this worker offers and a workspace inside its
// roots. It creates nothing. A refusal is a *signals.Rejection (invalid_request).
func (t *Trust) Admit(cfg signals.SessionConfig) error {
	if t == nil || t.Profiles == nil || t.Roots == nil {
		return errors.New("this worker has no agent profiles or workspace roots configured")
	}
	if cfg.Agent != "" {
		if err := signals.ValidateProfileName(cfg.Agent); err != nil {
			return signals.Reject(signals.RejectInvalidRequest, "%v", err)
		}
	}
	if _, err := t.Profiles.Resolve(cfg.Agent); err != nil {
		return err
	}
	if _, err := t.Roots.Resolve(cfg.SessionID, cfg.Workspace); err != nil {
		return err
	}
	if _, err := t.MCPServers(cfg.McpServers); err != nil {
		return err
	}
	return nil
}

// MCPServers decodes the MCP servers a client gave a session (ACP McpServer JSON) and
// checks them against the worker's MCP policy: the list the agent's session/new and
// session/load get, never nil. A refusal is a *signals.Rejection (invalid_request).
func (t *Trust) MCPServers(raw json.RawMessage) ([]acp.McpServer, error) {
	servers := []acp.McpServer{}
	if len(raw) == 0 || string(raw) == "null" {
		return servers, nil
	}
	if err := json.Unmarshal(raw, &servers); err != nil {
		return nil, signals.Reject(signals.RejectInvalidRequest, "mcp_servers: want ACP McpServer objects: %v", err)
	}
	if err := t.MCP.Check(servers); err != nil {
		return nil, err
	}
	return servers, nil
}

// CheckMCP is MCPServers' refusal alone (workflows: set_mcp_servers checks only the MCP
// policy, so that a session whose profile was since removed still loads).
func (t *Trust) CheckMCP(raw json.RawMessage) error {
	_, err := t.MCPServers(raw)
	return err
}

// Offer lists the profiles a session may pick.
func (t *Trust) Offer() []signals.ProfileInfo {
	if t == nil || t.Profiles == nil {
		return nil
	}
	return t.Profiles.infos(t.MCP)
}

// DefaultProfile names the profile serving sessions that name none.
func (t *Trust) DefaultProfile() string {
	if t == nil || t.Profiles == nil {
		return ""
	}
	return t.Profiles.Default()
}

package workflows

// set_mcp_servers in the session core: an editor sends its project's MCP servers on every
// session/load and session/resume, and expects the session to use them, as session/new's.
// The worker's MCP policy (Admission) checks them — in the update's validator, which never
// runs on replay, and for the signal twin inside a SideEffect (mcp.go, the shell) — and the
// session keeps them in its config (carried across continue-as-new, never journaled). The
// next turn's TurnInput carries them; the runner loads the agent session again when they
// changed.

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// mcpChecker is the MCP part of an Admission (activities.Trust has it).
type mcpChecker interface {
	CheckMCP(servers json.RawMessage) error
}

// mcpRefusal is the worker's MCP policy's refusal of servers ("" when allowed, and when the
// admission has no MCP policy: the runner is the last gate). Only the MCP policy is asked,
// so that a session whose profile the operator removed still loads.
func (s *sessionCore) mcpRefusal(servers json.RawMessage) string {
	m, ok := s.adm.(mcpChecker)
	if !ok || s.adm == nil {
		return ""
	}
	if err := m.CheckMCP(servers); err != nil {
		if rej, ok := err.(*signals.Rejection); ok {
			return rej.Message
		}
		return err.Error()
	}
	return ""
}

func checkMcpServers(req signals.SetMcpServersRequest) *signals.Rejection {
	var list []json.RawMessage
	if len(req.McpServers) == 0 || json.Unmarshal(req.McpServers, &list) != nil {
		return signals.Reject(signals.RejectInvalidRequest, "mcp_servers: want a JSON list of ACP McpServer objects")
	}
	return nil
}

func (s *sessionCore) validateSetMcpServers(req signals.SetMcpServersRequest) error {
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return rej.ApplicationError()
	}
	if rej := checkMcpServers(req); rej != nil {
		return rej.ApplicationError()
	}
	if msg := s.mcpRefusal(req.McpServers); msg != "" {
		return signals.Reject(signals.RejectInvalidRequest, "%s", msg).ApplicationError()
	}
	return nil
}

func (s *sessionCore) setMcpServers(_ time.Time, req signals.SetMcpServersRequest) (signals.SetMcpServersResult, error) {
	s.updates++
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return signals.SetMcpServersResult{}, rej.ApplicationError()
	}
	if rej := checkMcpServers(req); rej != nil {
		return signals.SetMcpServersResult{}, rej.ApplicationError()
	}
	return signals.SetMcpServersResult{Changed: s.takeMcpServers(req.McpServers)}, nil
}

// takeMcpServers keeps servers as the session's, reporting whether they changed. None is
// kept as none, so that a session that never had servers reads as before.
func (s *sessionCore) takeMcpServers(servers json.RawMessage) bool {
	var list []json.RawMessage
	_ = json.Unmarshal(servers, &list)
	if len(list) == 0 {
		servers = nil
	}
	if bytes.Equal(s.cfg.McpServers, servers) {
		return false
	}
	s.cfg.McpServers = servers
	return true
}

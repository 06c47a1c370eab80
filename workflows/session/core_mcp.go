package session

// set_mcp_servers in the session core: an editor sends its project's MCP servers on every
// session/load and session/resume, and expects the session to use them, as session/new's.
// The worker's MCP policy (Admission) checks them — the core asks it (Ask.McpServers) and
// the shell answers: in the update's validator, which never runs on replay, and for the
// signal twin inside a SideEffect (workflows/session.go, signalIn) — and the session keeps them in its config
// (carried across continue-as-new, never journaled). The next turn's TurnInput carries them;
// the runner loads the agent session again when they changed.

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

func checkMcpServers(req signals.SetMcpServersRequest) *signals.Rejection {
	var list []json.RawMessage
	if len(req.McpServers) == 0 || json.Unmarshal(req.McpServers, &list) != nil {
		return signals.Reject(signals.RejectInvalidRequest, "mcp_servers: want a JSON list of ACP McpServer objects")
	}
	return nil
}

func (s *Core) checkSetMcpServers(req signals.SetMcpServersRequest) *signals.Rejection {
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return rej
	}
	return checkMcpServers(req)
}

func (s *Core) setMcpServers(_ time.Time, req signals.SetMcpServersRequest) (signals.SetMcpServersResult, error) {
	return signals.SetMcpServersResult{Changed: s.takeMcpServers(req.McpServers)}, nil
}

// takeMcpServers keeps servers as the session's, reporting whether they changed. None is
// kept as none, so that a session that never had servers reads as before.
func (s *Core) takeMcpServers(servers json.RawMessage) bool {
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

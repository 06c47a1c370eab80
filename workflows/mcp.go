package workflows

// The shell's side of set_mcp_servers (core_mcp.go holds its rules): the signal twin asks
// the worker's MCP policy inside a SideEffect, so that its answer is recorded and a replay
// on a worker with another policy takes the same path.

import (
	"encoding/json"

	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
)

// mcpSignal is the signal twin of set_mcp_servers: the policy's answer is recorded in a
// SideEffect (a signal has no validator), and a refused one changes nothing.
func (s *session) mcpSignal() signalReceiver {
	return signalReceiver{name: signals.UpdateSetMcpServers, handle: func(ctx workflow.Context, raw json.RawMessage) {
		s.signalsSeen++
		var req signals.SetMcpServersRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			workflow.GetLogger(ctx).Warn("dropping malformed signal", "error", err)
			return
		}
		if s.forbidden(req.ViewerID) != nil || checkMcpServers(req) != nil {
			return
		}
		var refused string
		_ = workflow.SideEffect(ctx, func(workflow.Context) any { return s.mcpRefusal(req.McpServers) }).Get(&refused)
		if refused == "" {
			s.takeMcpServers(req.McpServers)
		}
	}}
}

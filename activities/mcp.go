package activities

// The operator's switch for MCP servers a client passes with a session (ACP session/new's
// mcpServers): an http or sse server is a URL the agent connects to, a stdio server is a
// program the worker would start. A client must never choose a program the worker runs, so
// stdio servers run only when their command is one the operator listed (contract §10).

import (
	"fmt"
	"slices"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

// MCP modes (worker -mcp).
const (
	// MCPNone refuses every MCP server a client passes (the default).
	MCPNone = "none"
	// MCPHTTP lets http and sse servers through and refuses stdio ones.
	MCPHTTP = "http"
	// MCPListed lets http and sse servers through, and stdio servers whose command is in
	// the operator's list (exactly: no arguments are matched, they are the client's).
	MCPListed = "listed"
)

// MCPPolicy is what a worker allows of the MCP servers clients pass.
type MCPPolicy struct {
	Mode string
	// Commands are the stdio server commands MCPListed allows.
	Commands []string
}

// ParseMCPMode checks a -mcp value.
func ParseMCPMode(mode string) (string, error) {
	switch mode {
	case "", MCPNone:
		return MCPNone, nil
	case MCPHTTP, MCPListed:
		return mode, nil
	}
	return "", fmt.Errorf("mcp mode %q: want none, http or listed", mode)
}

// Check refuses, with a message that names the first server refused and why, the servers
// this policy does not allow; it allows none when the mode is unset.
func (m MCPPolicy) Check(servers []acp.McpServer) error {
	for _, s := range servers {
		switch {
		case s.Http != nil || s.Sse != nil:
			if m.Mode != MCPHTTP && m.Mode != MCPListed {
				return signals.Reject(signals.RejectInvalidRequest, "MCP server %q refused: this worker takes no MCP servers from clients (worker -mcp http or listed)", mcpName(s))
			}
		case s.Stdio != nil:
			if m.Mode != MCPListed || !slices.Contains(m.Commands, s.Stdio.Command) {
				return signals.Reject(signals.RejectInvalidRequest, "MCP server %q refused: its command %q is not one this worker's operator listed (worker -mcp listed -mcp.commands %s)",
					mcpName(s), clip(s.Stdio.Command, 128), strings.Join(m.Commands, ","))
			}
		default:
			return signals.Reject(signals.RejectInvalidRequest, "MCP server refused: unknown transport")
		}
	}
	return nil
}

func mcpName(s acp.McpServer) string {
	switch {
	case s.Http != nil:
		return clip(s.Http.Name, 64)
	case s.Sse != nil:
		return clip(s.Sse.Name, 64)
	case s.Stdio != nil:
		return clip(s.Stdio.Name, 64)
	}
	return ""
}

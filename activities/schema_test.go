package activities

// What the runner sends an agent validates against the ACP schema the agents' SDKs are
// generated from (acpschema). _session/steering is an extension the schema does not
// define; the agents that serve it take session/prompt's params (claude-agent-acp), so its
// params are held to PromptRequest.

import (
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/testagent/acpschema"
)

func TestWhatTheRunnerSendsValidatesAgainstTheACPSchema(t *testing.T) {
	s, err := acpschema.Load()
	require.NoError(t, err)
	prompt, err := promptBlocks(signals.TurnInput{Text: "hello", Content: []byte(`[{"type":"resource_link","uri":"file:///w/a.go","name":"a.go"}]`)})
	require.NoError(t, err)
	for _, m := range []struct {
		def string
		v   any
	}{
		{"InitializeRequest", acp.InitializeRequest{
			ProtocolVersion: acp.ProtocolVersionNumber, ClientCapabilities: clientCapabilities,
			ClientInfo: &acp.Implementation{Name: "tacp", Version: "0.1.0"},
		}},
		{"NewSessionRequest", acp.NewSessionRequest{Cwd: "/w", McpServers: []acp.McpServer{}}},
		{"LoadSessionRequest", acp.LoadSessionRequest{SessionId: "a1", Cwd: "/w", McpServers: []acp.McpServer{}}},
		{"PromptRequest", acp.PromptRequest{SessionId: "a1", Prompt: prompt}},
		{"CancelNotification", acp.CancelNotification{SessionId: "a1"}},
		{"PromptRequest", steeringParams("a1", "go left")}, // _session/steering
		{"RequestPermissionResponse", permissionResponse(signals.OutcomeSelected, "allow")},
		{"RequestPermissionResponse", permissionResponse(signals.OutcomeCancelled, "")},
	} {
		require.NoError(t, s.ValidateValue(m.def, m.v), "%s %+v", m.def, m.v)
	}
	// The schema itself says what initialize offers.
	require.NoError(t, s.ValidateValue("ClientCapabilities", clientCapabilities))
}

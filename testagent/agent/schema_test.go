package agent

// The testagent speaks the real agents' wire: every message it writes in a session that
// exercises its directives validates against the ACP schema the agents' SDKs are generated
// from (acpschema: acp-go-sdk's schema/schema.unstable.json, usage_update included), and its
// steering answers are the outcomes claude-agent-acp gives.

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/testagent/acpschema"
)

// jsonrpc is any JSON-RPC message.
type jsonrpc struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// validateWire checks every line the agent of h wrote, and returns the session/update kinds
// it saw.
func validateWire(t *testing.T, s *acpschema.Schema, h *harness) []string {
	t.Helper()
	asked := map[string]string{} // request id → method, from what the client sent
	for _, line := range h.sent.lines() {
		var m jsonrpc
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		if m.Method != "" && len(m.ID) > 0 {
			asked[string(m.ID)] = m.Method
		}
	}
	var kinds []string
	for _, line := range h.wire.lines() {
		var m jsonrpc
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		switch {
		case m.Method != "": // a request or a notification of the agent's
			def := s.ParamsDef(m.Method)
			require.NotEmpty(t, def, "the agent sent %s, which the schema does not define", m.Method)
			require.NoError(t, s.Validate(def, m.Params), "%s params: %s", m.Method, line)
			if m.Method == acp.ClientMethodSessionUpdate {
				var n struct {
					Update struct {
						Kind string `json:"sessionUpdate"`
					} `json:"update"`
				}
				require.NoError(t, json.Unmarshal(m.Params, &n))
				kinds = append(kinds, n.Update.Kind)
			}
		case len(m.Error) > 0:
			require.NoError(t, s.Validate("Error", m.Error), line)
		default: // the answer to one of the client's requests
			method := asked[string(m.ID)]
			require.NotEmpty(t, method, "an answer to no request: %s", line)
			if def := s.ResultDef(method); def != "" {
				require.NoError(t, s.Validate(def, m.Result), "%s result: %s", method, line)
				continue
			}
			require.Equal(t, signals.SteeringMethod, method, "an extension answer: %s", line)
			var r struct {
				Outcome string `json:"outcome"`
			}
			require.NoError(t, json.Unmarshal(m.Result, &r))
			require.Contains(t, []string{"injected", "startedNewTurn", "promptRequired"}, r.Outcome, "claude-agent-acp's outcomes")
		}
	}
	return kinds
}

func TestTheTestagentsWireValidatesAgainstTheACPSchema(t *testing.T) {
	s, err := acpschema.Load()
	require.NoError(t, err)
	dir := t.TempDir()
	opts := Options{Steering: true, Commands: true, TranscriptDir: dir}
	h := start(t, opts)
	h.mustPrompt(t, "hello there", acp.StopReasonEndTurn)
	h.mustPrompt(t, "/chunks 3 every 1ms", acp.StopReasonEndTurn)
	h.mustPrompt(t, "/permission edit main.go", acp.StopReasonEndTurn)
	h.mustPrompt(t, "/usage", acp.StopReasonEndTurn)
	h.mustPrompt(t, "/read notes.txt", acp.StopReasonEndTurn)

	// A steer injected into a running turn, then the turn cancelled.
	res := make(chan acp.PromptResponse, 1)
	go func() { r, _ := h.prompt(t, "/sleep 30s"); res <- r }()
	h.client.waitFor(t, ".")
	_, err = h.conn.CallExtension(context.Background(), signals.SteeringMethod, map[string]any{"sessionId": h.sid, "prompt": []acp.ContentBlock{acp.TextBlock("go left")}})
	require.NoError(t, err)
	h.client.waitFor(t, "steered: go left")
	require.NoError(t, h.conn.Cancel(context.Background(), acp.CancelNotification{SessionId: h.sid}))
	require.Equal(t, acp.StopReasonCancelled, (<-res).StopReason)
	_, err = h.conn.CallExtension(context.Background(), signals.SteeringMethod, map[string]any{
		"sessionId": h.sid, "prompt": []acp.ContentBlock{acp.TextBlock("late")},
		"_meta": map[string]any{"steering": map[string]any{"idleBehavior": "promptRequired"}},
	})
	require.NoError(t, err)
	_, err = h.prompt(t, "/fail")
	require.Error(t, err)

	kinds := validateWire(t, s, h)
	for _, k := range []string{"agent_message_chunk", "tool_call", "tool_call_update", "usage_update", "available_commands_update"} {
		require.True(t, slices.Contains(kinds, k), "the session exercised %s (saw %v)", k, kinds)
	}

	// session/load replays the transcript: what it writes validates too.
	h2 := startNoSession(t, opts)
	_, err = h2.conn.LoadSession(context.Background(), acp.LoadSessionRequest{SessionId: h.sid, Cwd: "/", McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the commands follow the load's answer
		ups := h2.wire.updates(t)
		return len(ups) > 0 && ups[len(ups)-1]["sessionUpdate"] == "available_commands_update"
	}, 5*time.Second, time.Millisecond)
	kinds = validateWire(t, s, h2)
	require.Contains(t, kinds, "user_message_chunk", "the replay carries the user's prompts")
}

package workflows

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
)

// mcpAdmission admits every session and refuses stdio MCP servers.
type mcpAdmission struct{}

func (mcpAdmission) Admit(signals.SessionConfig) error { return nil }
func (mcpAdmission) Offer() []signals.ProfileInfo      { return nil }
func (mcpAdmission) DefaultProfile() string            { return "" }
func (mcpAdmission) CheckMCP(raw json.RawMessage) error {
	if strings.Contains(string(raw), `"command"`) {
		return signals.Reject(signals.RejectInvalidRequest, "stdio MCP servers refused")
	}
	return nil
}

// set_mcp_servers replaces the session's MCP servers after the worker's MCP policy: the
// next turn carries them; the same servers change nothing; a refusal, an observer's and a
// malformed list change nothing; nothing is journaled.
func TestSession_SetMcpServers(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(quiet{})
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(NewSessionWorkflow(mcpAdmission{}), workflow.RegisterOptions{Name: signals.SessionWorkflowType})
	registerRunTurn(env)
	h := &harness{t: t, env: env}
	var mu sync.Mutex
	var inputs []signals.TurnInput
	seenTurn = func(in signals.TurnInput) {
		mu.Lock()
		inputs = append(inputs, in)
		mu.Unlock()
	}
	defer func() { seenTurn = nil }()

	docs := json.RawMessage(`[{"type":"http","name":"docs","url":"http://127.0.0.1:1/mcp","headers":[]}]`)
	set := func(raw json.RawMessage, viewer string, check func(signals.SetMcpServersResult, error)) {
		h.update(signals.UpdateSetMcpServers, signals.SetMcpServersRequest{McpServers: raw, ViewerID: viewer}, func(res any, err error) {
			var r signals.SetMcpServersResult
			if err == nil {
				r = res.(signals.SetMcpServersResult)
			}
			check(r, err)
		})
	}
	var before []signals.Event
	h.step(func() {
		h.update(signals.UpdateAttach, signals.AttachRequest{ViewerID: "o1", Role: signals.RoleObserver, LeaseSeconds: 60}, func(_ any, err error) { require.NoError(t, err) })
	})
	h.step(func() {
		before = h.events()
		set(docs, "", func(r signals.SetMcpServersResult, err error) {
			require.NoError(t, err)
			require.True(t, r.Changed)
		})
		set(docs, "", func(r signals.SetMcpServersResult, err error) {
			require.NoError(t, err)
			require.False(t, r.Changed, "the servers it has")
		})
		set(json.RawMessage(`[{"name":"sh","command":"/bin/sh","args":[],"env":[]}]`), "", func(_ signals.SetMcpServersResult, err error) {
			require.Equal(t, signals.RejectInvalidRequest, rejectionType(t, err))
		})
		set(json.RawMessage(`{"not":"a list"}`), "", func(_ signals.SetMcpServersResult, err error) {
			require.Equal(t, signals.RejectInvalidRequest, rejectionType(t, err))
		})
		set(json.RawMessage(`[]`), "o1", func(_ signals.SetMcpServersResult, err error) {
			require.Equal(t, signals.RejectForbidden, rejectionType(t, err))
		})
		h.env.SignalWorkflow(signals.UpdateSetMcpServers, signals.SetMcpServersRequest{McpServers: json.RawMessage(`[{"name":"sh","command":"/bin/sh","args":[],"env":[]}]`)})
	})
	h.step(func() {
		require.Equal(t, before, h.events(), "nothing journaled")
		h.prompt("one", "m1", func(signals.PromptResult, error) {})
	})
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
		// The signal twin, and none: the next turn carries none.
		h.env.SignalWorkflow(signals.UpdateSetMcpServers, signals.SetMcpServersRequest{McpServers: json.RawMessage(`[]`)})
	})
	h.step(func() { h.prompt("two", "m2", func(signals.PromptResult, error) {}) })
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 2, Attempt: 1, StopReason: "end_turn"})
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, inputs, 2)
	require.JSONEq(t, string(docs), string(inputs[0].McpServers), "a refused signal changed nothing")
	require.Empty(t, inputs[1].McpServers)
}

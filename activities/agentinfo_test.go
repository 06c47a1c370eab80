package activities

import (
	"encoding/json"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"
)

func codexLikeInit() acp.InitializeResponse {
	var methods []acp.AuthMethod
	_ = json.Unmarshal([]byte(`[
		{"id":"chatgpt","name":"Login with ChatGPT"},
		{"id":"openai-api-key","name":"OpenAI API key","type":"env_var","vars":[{"name":"OPENAI_API_KEY"}]}
	]`), &methods)
	return acp.InitializeResponse{
		AgentCapabilities: acp.AgentCapabilities{
			PromptCapabilities: acp.PromptCapabilities{Image: true, EmbeddedContext: true},
			McpCapabilities:    acp.McpCapabilities{Http: true, Sse: true},
		},
		AuthMethods: methods,
	}
}

// What a worker learns of its agents reaches clients: capabilities (the MCP transports
// narrowed by the worker's policy) and, until the worker can authenticate the agent by
// itself, its auth methods with a hint of what the operator must set.
func TestProfiles_LearnedCapabilitiesAndAuth(t *testing.T) {
	ps, err := NewProfiles([]Profile{{Name: DefaultProfile, Command: "agent"}}, "")
	require.NoError(t, err)
	tr := &Trust{Profiles: ps, MCP: MCPPolicy{Mode: MCPNone}}
	require.Empty(t, tr.Offer()[0].PromptCapabilities, "nothing learned before the agent started")

	ps.Learn(DefaultProfile, codexLikeInit(), []string{"PATH=/bin"})
	info := tr.Offer()[0]
	require.JSONEq(t, `{"image":true,"embeddedContext":true}`, string(info.PromptCapabilities))
	require.JSONEq(t, `{}`, string(info.McpCapabilities), "this worker takes no MCP servers")
	require.Len(t, info.AuthMethods, 2, "the worker cannot authenticate the agent by itself")
	require.Equal(t, "", ps.workerAuth(DefaultProfile))
	require.Equal(t, "the worker's operator must set OPENAI_API_KEY in the agent profile's env or env_files on the worker, or log the agent in on the worker as the user the worker runs as (Login with ChatGPT)",
		AuthHint(codexLikeInit().AuthMethods))

	tr.MCP.Mode = MCPHTTP
	ps.Learn(DefaultProfile, codexLikeInit(), []string{"OPENAI_API_KEY=sk-test"})
	info = tr.Offer()[0]
	require.JSONEq(t, `{"http":true,"sse":true}`, string(info.McpCapabilities))
	require.Empty(t, info.AuthMethods, "the key the worker holds completes the env-var method")
	require.Equal(t, "openai-api-key", ps.workerAuth(DefaultProfile))

	ps.Learn(DefaultProfile, codexLikeInit(), nil)
	ps.Opened(DefaultProfile)
	require.Empty(t, tr.Offer()[0].AuthMethods, "an agent that opened a session here is authenticated")
}

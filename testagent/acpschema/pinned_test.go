package acpschema

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestThePinnedV1SchemaJudgesWhatAnAgentSends(t *testing.T) {
	s, err := LoadV1()
	require.NoError(t, err)
	require.Equal(t, "CreateElicitationRequest", s.ParamsDef("elicitation/create"))
	require.Equal(t, "ListSessionsResponse", s.ResultDef("session/list"))
	tests := []struct {
		name, def, doc string
		ok             bool
	}{
		{"a message chunk", "SessionNotification", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}`, true},
		{"a question tied to its session", "CreateElicitationRequest", `{"sessionId":"s","mode":"form","message":"Which branch?","requestedSchema":{"type":"object","properties":{"answer":{"type":"string"}}}}`, true},
		{"a question tied to nothing", "CreateElicitationRequest", `{"mode":"form","message":"Which branch?","requestedSchema":{"type":"object","properties":{}}}`, false},
		{"a listed session with its cwd", "ListSessionsResponse", `{"sessions":[{"sessionId":"s","cwd":"/work/p"}]}`, true},
		{"a listed session without a cwd", "ListSessionsResponse", `{"sessions":[{"sessionId":"s"}]}`, false},
		{"an unknown stop reason", "PromptResponse", `{"stopReason":"done"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Validate(tt.def, []byte(tt.doc))
			if tt.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
		})
	}
}

func TestAConversationChecksResponsesByTheRequestTheyAnswer(t *testing.T) {
	s, err := LoadV1()
	require.NoError(t, err)
	c := &Conversation{Schema: s, Checked: FromAgent}
	c.Observe(FromClient, []byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}}`))
	c.Observe(FromAgent, []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`))
	c.Observe(FromAgent, []byte(`{"jsonrpc":"2.0","method":"_tacp/anything","params":{}}`))
	require.Empty(t, c.Violations())
	c.Observe(FromAgent, []byte(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"done"}}`))
	require.Len(t, c.Violations(), 1)
	require.Equal(t, "session/prompt result", c.Violations()[0].Method)
	require.Equal(t, map[string]int{"session/update": 1, "session/prompt result": 1}, c.CheckedCounts())
}

package acpschema

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidateAgainstTheACPSchema(t *testing.T) {
	s, err := Load()
	require.NoError(t, err)
	require.Equal(t, "v0.13.0", s.Version)
	require.Equal(t, "SessionNotification", s.ParamsDef("session/update"))
	require.Equal(t, "PromptResponse", s.ResultDef("session/prompt"))
	require.Equal(t, "RequestPermissionRequest", s.ParamsDef("session/request_permission"))
	require.Empty(t, s.ParamsDef("_session/steering"), "an extension: not in the schema")

	tests := []struct {
		name, def, doc string
		ok             bool
	}{
		{"a message chunk", "SessionNotification", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}`, true},
		{"usage_update", "SessionNotification", `{"sessionId":"s","update":{"sessionUpdate":"usage_update","used":30,"size":200000,"cost":{"amount":0.01,"currency":"USD"}}}`, true},
		{"usage_update without size", "SessionNotification", `{"sessionId":"s","update":{"sessionUpdate":"usage_update","used":30}}`, false},
		{"an unknown kind", "SessionNotification", `{"sessionId":"s","update":{"sessionUpdate":"tacp_custom_kind"}}`, false},
		{"a chunk whose text is a number", "SessionNotification", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":1}}}`, false},
		{"negative tokens", "PromptResponse", `{"stopReason":"end_turn","usage":{"inputTokens":-1,"outputTokens":0,"totalTokens":0}}`, false},
		{"an unknown stop reason", "PromptResponse", `{"stopReason":"done"}`, false},
		{"a prompt of content blocks", "PromptRequest", `{"sessionId":"s","prompt":[{"type":"text","text":"go left"}]}`, true},
		{"a prompt as a string", "PromptRequest", `{"sessionId":"s","prompt":"go left"}`, false},
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

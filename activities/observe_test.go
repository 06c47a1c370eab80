package activities

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTurnObserverNamesToolCallsFromTheirUpdates(t *testing.T) {
	o := newTurnObserver()
	for _, u := range []string{
		`{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Edit a.go","_meta":{"claudeCode":{"toolName":"Edit"}}}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t2","title":"ls"}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"t2","_meta":{"toolName":"Bash"}}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","toolCallId":"t3","_meta":{"toolName":"NotATool"}}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"tool_call","_meta":{"toolName":"NoID"}}}`,
		`not json toolName`,
	} {
		o.observe(json.RawMessage(u))
	}
	require.Equal(t, "Edit", o.toolName("t1"))
	require.Equal(t, "Bash", o.toolName("t2"), "a tool_call_update may name it too")
	require.Empty(t, o.toolName("t3"), "only tool calls are named")
	require.Empty(t, o.toolName("unknown"))
	var none *turnObserver
	require.Empty(t, none.toolName("t1"))
}

func TestTurnObserverForgetsTheOldestPastItsBound(t *testing.T) {
	o := newTurnObserver()
	for i := range maxToolNames + 1 {
		o.noteTool(fmt.Sprint(i), "T")
	}
	require.Empty(t, o.toolName("0"))
	require.Equal(t, "T", o.toolName(fmt.Sprint(maxToolNames)))
	require.LessOrEqual(t, len(o.tools), maxToolNames)
}

package activities

// Tests of steer injection through the agent's _session/steering extension, against the
// testagent speaking claude-agent-acp's wire (content blocks, idleBehavior).

import (
	"context"
	"slices"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

func TestInjectSendsTheSteerAsContentBlocks(t *testing.T) {
	a := startTestAgent(t, "-steering")
	require.True(t, steeringSupported(a.proc.caps))
	answered := make(chan acp.PromptResponse, 1)
	go func() { answered <- a.prompt(t, "/sleep 30s") }()
	require.Eventually(t, func() bool { return slices.Contains(messageTexts(decodeUpdates(t, a.tap.snapshot())), ".") }, 10*time.Second, 5*time.Millisecond)

	r := &Runner{}
	r.defaults()
	how, err := r.inject(context.Background(), a.proc, a.sid, "go left")
	require.NoError(t, err, "an agent that takes content blocks, as claude-agent-acp does, accepts the steer")
	require.Equal(t, signals.HowInjected, how)
	require.Eventually(t, func() bool {
		return slices.Contains(messageTexts(decodeUpdates(t, a.tap.snapshot())), "steered: go left")
	}, 10*time.Second, 5*time.Millisecond)

	require.NoError(t, a.proc.conn.Cancel(context.Background(), acp.CancelNotification{SessionId: a.sid}))
	require.Equal(t, acp.StopReasonCancelled, (<-answered).StopReason)
}

// A steer that reaches an agent whose turn has just ended must not start a turn of its own
// there (claude-agent-acp's default): the runner asks for "promptRequired" and falls back to
// interrupt-and-continue, which carries the text inside the tacp turn.
func TestInjectIntoAnIdleAgentIsRefusedNotStartedAsATurn(t *testing.T) {
	a := startTestAgent(t, "-steering")
	r := &Runner{}
	r.defaults()
	_, err := r.inject(context.Background(), a.proc, a.sid, "too late")
	require.ErrorContains(t, err, signals.SteerPromptRequired)
	require.NotContains(t, messageTexts(decodeUpdates(t, a.tap.snapshot())), "steered: too late")
}

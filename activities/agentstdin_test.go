package activities

import (
	"bytes"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type nopCloser struct{ bytes.Buffer }

func (*nopCloser) Close() error { return nil }

// The agent's stdin tells its turn when the session/prompt request is on the pipe: after
// the write, once, and for nothing else the client writes, not even a message whose text
// names the method (JSON escapes its quotes).
func TestAgentStdinSaysWhenThePromptIsOnThePipe(t *testing.T) {
	var buf nopCloser
	w := &agentStdin{WriteCloser: &buf}
	var calls atomic.Int32
	w.onPrompt(func() {
		require.Contains(t, buf.String(), `"session/prompt"`, "called after the write, not before")
		calls.Add(1)
	})
	text, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 3, "result": map[string]string{"content": `{"method":"session/prompt"}`}})
	require.NoError(t, err)
	for _, line := range []string{
		string(text),
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"session/set_mode","params":{"sessionId":"s","modeId":"plan"}}`,
	} {
		_, err := w.Write([]byte(line + "\n"))
		require.NoError(t, err)
	}
	require.Zero(t, calls.Load(), "no prompt went out yet")
	prompt := `{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}` + "\n"
	_, err = w.Write([]byte(prompt))
	require.NoError(t, err)
	require.Equal(t, int32(1), calls.Load())
	_, err = w.Write([]byte(prompt))
	require.NoError(t, err)
	require.Equal(t, int32(1), calls.Load(), "once")

	w.onPrompt(func() { calls.Add(1) })
	w.onPrompt(nil)
	_, err = w.Write([]byte(prompt))
	require.NoError(t, err)
	require.Equal(t, int32(1), calls.Load(), "forgotten: a turn that ended before its prompt went out")
}

// An attempt's heartbeats say the prompt went out (PromptSent, with the agent session it
// went to), so an attempt after a lost worker does not send it again.
func TestAnAttemptsBeatSaysThePromptWentOut(t *testing.T) {
	rig := newTurnRig(t, "")
	res := rig.mustRun(turnInput("s1", 1, rig.agent(), "/sleep 1500ms"))
	require.Eventually(t, func() bool {
		rig.beatsMu.Lock()
		defer rig.beatsMu.Unlock()
		for _, b := range rig.beats {
			if b.PromptSent && b.AgentSessionID == res.AgentSessionID {
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "a beat with PromptSent for %s: %+v", res.AgentSessionID, rig.beats)
}

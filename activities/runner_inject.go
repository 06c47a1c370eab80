package activities

// Steering by injection: a steer delivered through the agent's _session/steering.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

// steeringSupported reports whether the agent advertised _meta.steering.supported.
func steeringSupported(caps acp.InitializeResponse) bool {
	st, _ := caps.Meta["steering"].(map[string]any)
	ok, _ := st["supported"].(bool)
	return ok
}

// steeringParams are the params of _session/steering as the agents that serve it take them
// (claude-agent-acp): the prompt as content blocks, like session/prompt's, and idleBehavior
// "promptRequired", so that an agent whose turn has already ended answers that instead of
// starting a detached turn of its own: the steer then goes in by interrupt-and-continue,
// inside the tacp turn.
func steeringParams(sid acp.SessionId, text string) map[string]any {
	return map[string]any{
		"sessionId": sid,
		"prompt":    []acp.ContentBlock{acp.TextBlock(text)},
		"_meta":     map[string]any{"steering": map[string]any{"idleBehavior": signals.SteeringIdlePromptRequired}},
	}
}

// inject delivers a steer through _session/steering; any answer but "injected" (or
// "startedNewTurn", from an agent that ignores idleBehavior) is an error, so the caller
// falls back to interrupt-and-continue.
func (r *Runner) inject(ctx context.Context, proc *agentProc, sid acp.SessionId, text string) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	raw, err := proc.conn.CallExtension(ctx, signals.SteeringMethod, steeringParams(sid, text))
	if err != nil {
		return "", err
	}
	var resp struct {
		Outcome string `json:"outcome"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return "", fmt.Errorf("decode %s answer: %w", signals.SteeringMethod, err)
	}
	switch resp.Outcome {
	case signals.SteerInjected, signals.SteerStartedNewTurn:
		return signals.HowInjected, nil
	default:
		return "", fmt.Errorf("%s answered %q", signals.SteeringMethod, resp.Outcome)
	}
}

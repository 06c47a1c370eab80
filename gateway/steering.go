package gateway

// The steering extensions a client calls beside ACP's methods: _session/steering, which
// steers the running turn or starts one, and _tacp/session.steer, tacp's compare-and-swap
// steer with contract §3's outcomes.

import (
	"context"
	"encoding/json"
	"fmt"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
	"github.com/tacp-dev/tacp/tacpclient"
)

// HandleExtensionMethod serves the steering extensions.
func (c *conn) HandleExtensionMethod(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case signals.SteeringMethod:
		return c.steering(ctx, params)
	case signals.TacpSteerMethod:
		return c.tacpSteer(ctx, params)
	}
	return nil, acp.NewMethodNotFound(method)
}

// steering serves _session/steering {sessionId, prompt}: the text steers the running turn
// by tacpclient.SteerLive's rule ("injected"), or, when no turn runs, is sent as a prompt
// ("startedNewTurn"), as the agents that serve the extension do.
func (c *conn) steering(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		SessionID string          `json:"sessionId"`
		Prompt    json.RawMessage `json:"prompt"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, invalidParams("%v", err)
	}
	text, err := steeringText(p.Prompt)
	if err != nil {
		return nil, invalidParams("%v", err)
	}
	if c.observer() {
		return nil, forbidden("steer")
	}
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	if err := c.mayAct(cctx, p.SessionID, "steer"); err != nil {
		return nil, err
	}
	a, err := c.attached(cctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	_, err = c.client().SteerLive(cctx, p.SessionID, text, tacpclient.SteerLiveOptions{ViewerID: c.viewer})
	rej, _ := rejection.As(err)
	switch {
	case err == nil:
		return map[string]string{"outcome": signals.SteerInjected}, nil
	case rej != nil && rej.Type == signals.RejectNoLiveTurn:
		msgID := signals.NewID()
		a.markMine(msgID)
		if _, err := c.client().Prompt(cctx, signals.SessionConfig{SessionID: p.SessionID}, signals.PromptRequest{Text: text, ClientMessageID: msgID, ViewerID: c.viewer, By: c.answeredBy()}); err != nil {
			return map[string]string{"outcome": signals.SteerFailed, "error": err.Error()}, nil
		}
		return map[string]string{"outcome": signals.SteerStartedNewTurn}, nil
	default:
		return map[string]string{"outcome": signals.SteerFailed, "error": err.Error()}, nil
	}
}

// steeringText accepts the prompt of _session/steering as a string or as content blocks.
func steeringText(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var blocks []acp.ContentBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", fmt.Errorf("prompt: want a string or text content blocks")
	}
	text, content, err := promptText(blocks, acp.PromptCapabilities{})
	if err != nil || content != nil {
		return "", fmt.Errorf("prompt: only text steers a turn")
	}
	return text, nil
}

// tacpSteerResult answers _tacp/session.steer with contract §3's vocabulary: outcome is
// "accepted" or "duplicate" (with ref and nextExpectedTurnId), or the rejection type
// (stale_turn, no_live_turn, client_msg_id_reuse, no_steer_channel, invalid_request, ...)
// with message and details.
type tacpSteerResult struct {
	Outcome            string            `json:"outcome"`
	Ref                *signals.SteerRef `json:"ref,omitempty"`
	NextExpectedTurnID string            `json:"nextExpectedTurnId,omitempty"`
	Message            string            `json:"message,omitempty"`
	Details            any               `json:"details,omitempty"`
}

func (c *conn) tacpSteer(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		SessionID      string `json:"sessionId"`
		Text           string `json:"text"`
		ExpectedTurnID string `json:"expectedTurnId"`
		ClientMsgID    string `json:"clientMsgId"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, invalidParams("%v", err)
	}
	if c.observer() {
		return nil, forbidden("steer")
	}
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	if err := c.mayAct(cctx, p.SessionID, "steer"); err != nil {
		return nil, err
	}
	res, err := c.client().Steer(cctx, p.SessionID, signals.SteerRequest{Text: p.Text, ExpectedTurnID: p.ExpectedTurnID, ClientMsgID: p.ClientMsgID, ViewerID: c.viewer, By: c.answeredBy()})
	if err == nil {
		return tacpSteerResult{Outcome: res.Outcome, Ref: &res.Ref, NextExpectedTurnID: res.NextExpectedTurnID}, nil
	}
	rej, ok := rejection.As(err)
	if !ok || rej.Type == signals.RejectUnknownSession {
		return nil, rpcErr(err)
	}
	return tacpSteerResult{Outcome: rej.Type, Message: rej.Message, Details: rej.Details}, nil
}

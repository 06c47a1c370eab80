package agent

// The _session/steering extension (Options.Steering): HandleExtensionMethod validates its
// params and answers as claude-agent-acp does, injecting the text into the running turn or,
// with none running, answering it outside any turn or asking for a prompt.

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

// HandleExtensionMethod serves _session/steering when steering is enabled, with the params
// and answers of claude-agent-acp: prompt is a non-empty array of content blocks (a string is
// refused with -32602, as that agent refuses it); while a prompt runs the text is injected
// into it ("injected"); with no turn running, "promptRequired" when the request's
// _meta.steering.idleBehavior asks for it, else the text starts a turn of its own
// ("startedNewTurn": here one "steered: <text>" update outside any prompt).
func (a *testAgent) HandleExtensionMethod(_ context.Context, method string, params json.RawMessage) (any, error) {
	if !a.opts.Steering || method != signals.SteeringMethod {
		return nil, acp.NewMethodNotFound(method)
	}
	req, err := parseSteer(params)
	if err != nil {
		return nil, err
	}
	s, err := a.lookup(req.SessionID)
	if err != nil {
		return nil, err
	}
	injected, err := a.steer(s, req.text, req.idle != signals.SteeringIdlePromptRequired)
	switch {
	case err != nil:
		return nil, err
	case injected:
		return map[string]string{"outcome": signals.SteerInjected}, nil
	case req.idle == signals.SteeringIdlePromptRequired:
		return map[string]string{"outcome": signals.SteerPromptRequired, "reason": "noRunningTurn"}, nil
	default:
		return map[string]string{"outcome": signals.SteerStartedNewTurn}, nil
	}
}

type steerRequest struct {
	SessionID acp.SessionId
	text      string
	idle      string
}

// invalidSteer is claude-agent-acp's refusal of bad steering params.
func invalidSteer(why string) error {
	return &acp.RequestError{Code: -32602, Message: "Invalid params: " + why}
}

// parseSteer validates _session/steering params the way claude-agent-acp does.
func parseSteer(params json.RawMessage) (steerRequest, error) {
	var p struct {
		SessionID json.RawMessage `json:"sessionId"`
		Prompt    json.RawMessage `json:"prompt"`
		Meta      struct {
			Steering struct {
				IdleBehavior *string `json:"idleBehavior"`
			} `json:"steering"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return steerRequest{}, invalidSteer("steer params must be an object")
	}
	var req steerRequest
	if json.Unmarshal(p.SessionID, &req.SessionID) != nil || req.SessionID == "" {
		return steerRequest{}, invalidSteer("steer params require a non-empty sessionId")
	}
	var raw []json.RawMessage
	if json.Unmarshal(p.Prompt, &raw) != nil || len(raw) == 0 {
		return steerRequest{}, invalidSteer("steer params require a non-empty prompt array")
	}
	var blocks []acp.ContentBlock
	if err := json.Unmarshal(p.Prompt, &blocks); err != nil {
		return steerRequest{}, invalidSteer("steer prompt: " + err.Error())
	}
	if b := p.Meta.Steering.IdleBehavior; b != nil {
		if *b != signals.SteeringIdlePromptRequired {
			return steerRequest{}, invalidSteer("unsupported steering idleBehavior")
		}
		req.idle = *b
	}
	var texts []string
	for _, b := range blocks {
		if b.Text != nil {
			texts = append(texts, b.Text.Text)
		}
	}
	req.text = strings.Join(texts, "\n")
	return req, nil
}

// steer injects text into the running turn of s, reporting whether one ran; with none
// running, startIdle answers the text outside any turn. Holding s.mu keeps the turn from
// answering before the injected chunk is out.
func (a *testAgent) steer(s *session, text string, startIdle bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	running := s.turn != nil && s.turn.Err() == nil
	if !running && !startIdle {
		return false, nil
	}
	return running, a.emitLocked(s, acp.UpdateAgentMessageText("steered: "+text))
}

package activities

// The elicitation bridge, the permission bridge's twin (permission.go): the agent's
// `elicitation/create` (ACP, unstable in acp-go-sdk v0.13.0: UnstableCreateElicitation)
// goes to the session workflow as an elicitation_requested signal, and the agent waits for
// the answer that Deliver brings back (or for the turn's end, which answers cancel: fail
// closed). tacp advertises form and url elicitation in initialize (clientCapabilities):
// claude-agent-acp offers Claude Code's AskUserQuestion tool only to a client that does,
// and forwards its MCP servers' elicitations only then.

import (
	"context"
	"encoding/json"
	"fmt"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

// elicitationCapabilities is what tacp advertises: forms and URLs, relayed to a person.
var elicitationCapabilities = &acp.ElicitationCapabilities{
	Form: &acp.ElicitationFormCapabilities{},
	Url:  &acp.ElicitationUrlCapabilities{},
}

// elicitationAnswer is the answer Deliver brings.
type elicitationAnswer struct {
	action  string
	content json.RawMessage
}

// elicitationResponse is the agent's answer to an elicitation.
func elicitationResponse(a elicitationAnswer) acp.UnstableCreateElicitationResponse {
	switch a.action {
	case signals.ActionAccept:
		var content map[string]any
		_ = json.Unmarshal(a.content, &content)
		return acp.UnstableCreateElicitationResponse{Accept: &acp.UnstableCreateElicitationAccept{Action: signals.ActionAccept, Content: content}}
	case signals.ActionDecline:
		return acp.UnstableCreateElicitationResponse{Decline: &acp.UnstableCreateElicitationDecline{Action: signals.ActionDecline}}
	}
	return acp.UnstableCreateElicitationResponse{Cancel: &acp.UnstableCreateElicitationCancel{Action: signals.ActionCancel}}
}

// UnstableCreateElicitation asks the workflow through the running turn. With no turn
// running it fails closed: cancel.
func (c *hostClient) UnstableCreateElicitation(ctx context.Context, req acp.UnstableCreateElicitationRequest) (acp.UnstableCreateElicitationResponse, error) {
	if lt := c.current(); lt != nil {
		return lt.requestElicitation(ctx, req)
	}
	c.log.Info("elicitation between turns: cancelled")
	return elicitationResponse(elicitationAnswer{action: signals.ActionCancel}), nil
}

// UnstableCompleteElicitation: the out-of-band flow of a url elicitation finished on the
// agent's side (the person signed in on the page). The session journals it and editors are
// told (elicitation/complete); between turns there is no turn to report it in.
func (c *hostClient) UnstableCompleteElicitation(ctx context.Context, n acp.UnstableCompleteElicitationNotification) error {
	lt := c.current()
	if lt == nil || lt.completeElicitation == nil {
		c.log.Info("elicitation/complete between turns: dropped", "elicitation", n.ElicitationId)
		return nil
	}
	return lt.completeElicitation(ctx, signals.ElicitationCompletedSignal{TurnID: lt.key.turn, Attempt: lt.attempt, ElicitationID: string(n.ElicitationId)})
}

// requestElicitation bridges one elicitation/create to the workflow and waits for its answer.
func (lt *liveTurn) requestElicitation(ctx context.Context, req acp.UnstableCreateElicitationRequest) (acp.UnstableCreateElicitationResponse, error) {
	sig := signals.ElicitationRequestedSignal{TurnID: lt.key.turn, Attempt: lt.attempt}
	switch {
	case req.Form != nil:
		schema, err := json.Marshal(req.Form.RequestedSchema)
		if err != nil {
			return acp.UnstableCreateElicitationResponse{}, err
		}
		sig.Mode, sig.Message, sig.Schema = signals.ElicitationForm, req.Form.Message, schema
	case req.Url != nil:
		sig.Mode, sig.Message, sig.URL, sig.ElicitationID = signals.ElicitationURL, req.Url.Message, req.Url.Url, string(req.Url.ElicitationId)
	default:
		return elicitationResponse(elicitationAnswer{action: signals.ActionCancel}), nil
	}
	ch := make(chan elicitationAnswer, 1)
	lt.mu.Lock()
	if lt.elicits == nil {
		lt.elicits = map[string]chan elicitationAnswer{}
	}
	lt.permSeq++ // one numbering for a turn attempt's requests of both kinds
	sig.RequestID = fmt.Sprintf("q%d.%d.%d", lt.key.turn, lt.attempt, lt.permSeq)
	lt.elicits[sig.RequestID] = ch
	lt.mu.Unlock()
	defer func() {
		lt.mu.Lock()
		delete(lt.elicits, sig.RequestID)
		lt.mu.Unlock()
	}()
	if lt.beforePermission != nil {
		answered := lt.beforePermission() // journaled after the tool call it belongs to
		defer answered()
	}
	if err := lt.askElicitation(ctx, sig); err != nil {
		return acp.UnstableCreateElicitationResponse{}, err
	}
	select {
	case a := <-ch:
		return elicitationResponse(a), nil
	case <-lt.cancel:
	case <-lt.done:
	case <-ctx.Done():
	}
	return elicitationResponse(elicitationAnswer{action: signals.ActionCancel}), nil
}

// deliverElicitation hands an elicitation's answer to the agent waiting for it.
func (lt *liveTurn) deliverElicitation(d signals.Delivery) bool {
	lt.mu.Lock()
	ch := lt.elicits[d.RequestID]
	delete(lt.elicits, d.RequestID)
	lt.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- elicitationAnswer{action: d.Action, content: d.Content}
	return true
}

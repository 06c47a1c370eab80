package gateway

// Questions to a person through the ACP face (contract §11 "A person's request"): an
// elicitation the agent asked is relayed to every attached controller whose client
// advertised elicitation (form, or url for a url question) in its initialize, as ACP
// elicitation/create; the first valid answer wins, and the others' copies are withdrawn
// ($/cancel_request) when the session resolves the question. The answer names who gave it:
// the client's clientInfo.

import (
	"context"
	"encoding/json"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

// peer is what an ACP client said of itself in initialize.
type peer struct {
	form, url bool
	// name is the client's clientInfo ("Zed 0.200.1"), "" when it gave none.
	name string
}

func peerOf(req acp.InitializeRequest) peer {
	var p peer
	if e := req.ClientCapabilities.Elicitation; e != nil {
		p.form, p.url = e.Form != nil, e.Url != nil
	}
	if i := req.ClientInfo; i != nil {
		p.name = i.Name
		if i.Version != "" {
			p.name += " " + i.Version
		}
		p.name = clientName(p.name)
	}
	return p
}

// maxClientName bounds, in bytes, the client's name in what the journal records of who
// acted, so that person, client and viewer together stay within signals.MaxByBytes.
const maxClientName = 64

// clientName is the name a client gave itself, fit for the journal: one line, its first
// maxClientName bytes (whole characters).
func clientName(name string) string {
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return -1
		}
		return r
	}, name)
	if len(name) > maxClientName {
		cut := maxClientName
		for !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = name[:cut] + "…"
	}
	return strings.TrimSpace(name)
}

// answeredBy names this connection's person for the journal (by, answered_by): the person
// the connection was authenticated as, with its client and viewer ("deck:alice (acp:Zed
// 0.200, viewer …)"); without one, the client and its viewer.
func (c *conn) answeredBy() string {
	c.mu.Lock()
	name := c.peer.name
	c.mu.Unlock()
	if name == "" {
		name = "an ACP client"
	}
	if c.person != "" {
		return c.person + " (acp:" + name + ", viewer " + c.viewer + ")"
	}
	return "acp:" + name + " (viewer " + c.viewer + ")"
}

// elicitationEvent keeps the open questions and relays or withdraws them.
func (a *attachment) elicitationEvent(ev signals.Event) {
	if a.openElicits == nil {
		a.openElicits = map[string]signals.ElicitationRequestedData{}
	}
	switch ev.Kind {
	case signals.EventElicitationRequested:
		var d signals.ElicitationRequestedData
		if json.Unmarshal(ev.Data, &d) != nil {
			return
		}
		a.openElicits[d.RequestID] = d
		a.mu.Lock()
		live := a.live
		a.mu.Unlock()
		if live {
			a.relayElicitation(d)
		}
	case signals.EventElicitationResolved:
		var r signals.ElicitationResolution
		if json.Unmarshal(ev.Data, &r) != nil {
			return
		}
		delete(a.openElicits, r.RequestID)
		a.mu.Lock()
		if cancel := a.relaying[r.RequestID]; cancel != nil {
			cancel() // answered elsewhere first (or expired): withdrawn here
			delete(a.relaying, r.RequestID)
		}
		a.mu.Unlock()
	case signals.EventElicitationCompleted:
		// The agent's elicitation/complete, relayed live to a client that takes url
		// elicitations (a replay does not repeat it: it was told then, or never asked).
		var d signals.ElicitationCompletedData
		a.mu.Lock()
		live := a.live
		a.mu.Unlock()
		a.c.mu.Lock()
		url := a.c.peer.url
		a.c.mu.Unlock()
		if json.Unmarshal(ev.Data, &d) != nil || !live || !url || a.c.observer() || a.watchOnly {
			return
		}
		// The client knows the question by the elicitationId its elicitation/create carried:
		// the session's request id, not the agent's own elicitation id.
		if err := a.c.w.notify(acp.ClientMethodElicitationComplete, acp.UnstableCompleteElicitationNotification{ElicitationId: acp.UnstableElicitationId(d.RequestID)}); err != nil {
			a.c.g.o.Logger.Debug("elicitation/complete not written", "session", a.id, "err", err)
		}
	}
}

// relayElicitation asks the client the question and sends its answer to the session.
func (a *attachment) relayElicitation(d signals.ElicitationRequestedData) {
	a.c.mu.Lock()
	p := a.c.peer
	a.c.mu.Unlock()
	if a.c.observer() || a.watchOnly || (d.Mode == signals.ElicitationForm && !p.form) || (d.Mode == signals.ElicitationURL && !p.url) {
		return
	}
	a.mu.Lock()
	if _, ok := a.relaying[d.RequestID]; ok {
		a.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(a.ctx)) // as relay: not a.ctx
	a.relaying[d.RequestID] = cancel
	a.mu.Unlock()
	req := createElicitation(a.id, d)
	go func() {
		defer cancel()
		raw, err := a.c.w.call(ctx, acp.ClientMethodElicitationCreate, req)
		if err != nil || ctx.Err() != nil {
			return // withdrawn, or the client is gone
		}
		var resp acp.UnstableCreateElicitationResponse
		if err := json.Unmarshal(raw, &resp); err != nil {
			a.c.g.o.Logger.Warn("answer to a question unreadable", "session", a.id, "request", d.RequestID, "err", err)
			return
		}
		ans := signals.ElicitationRespondRequest{RequestID: d.RequestID, Action: signals.ActionCancel, ViewerID: a.c.viewer, AnsweredBy: a.c.answeredBy()}
		switch {
		case resp.Accept != nil:
			ans.Action = signals.ActionAccept
			if resp.Accept.Content != nil {
				ans.Content, _ = json.Marshal(resp.Accept.Content)
			} else {
				ans.Content = json.RawMessage(`{}`)
			}
		case resp.Decline != nil:
			ans.Action = signals.ActionDecline
		}
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer ccancel()
		if _, err := a.c.client().ElicitationRespond(cctx, a.id, ans); err != nil {
			a.c.g.o.Logger.Warn("answer to a question refused", "session", a.id, "request", d.RequestID, "err", err)
		}
	}()
}

// elicitationCreate is the params of elicitation/create as the ACP schema has them: a
// question tied to a session (sessionId, and toolCallId when a tool call asked it), in form
// mode (requestedSchema) or url mode (elicitationId, url). acp-go-sdk v0.13.0's
// UnstableCreateElicitationRequest lacks the session scope, so the gateway sends its own.
type elicitationCreate struct {
	SessionID       string                         `json:"sessionId"`
	ToolCallID      string                         `json:"toolCallId,omitempty"`
	Mode            string                         `json:"mode"`
	Message         string                         `json:"message"`
	RequestedSchema *acp.UnstableElicitationSchema `json:"requestedSchema,omitempty"`
	ElicitationID   string                         `json:"elicitationId,omitempty"`
	URL             string                         `json:"url,omitempty"`
	Meta            map[string]any                 `json:"_meta,omitempty"`
}

// createElicitation returns the elicitation/create that asks question d of session id. A
// url question's elicitationId is the session's request id, which elicitation/complete
// names again when the agent completes it.
func createElicitation(id string, d signals.ElicitationRequestedData) elicitationCreate {
	req := elicitationCreate{SessionID: id, ToolCallID: d.ToolCallID, Mode: d.Mode, Message: d.Message,
		Meta: signals.ACPMeta{RequestID: d.RequestID, Deadline: &d.Deadline}.Map()}
	if d.Mode == signals.ElicitationURL {
		req.ElicitationID, req.URL = d.RequestID, d.URL
		return req
	}
	req.Mode = signals.ElicitationForm
	var schema acp.UnstableElicitationSchema
	_ = json.Unmarshal(d.Schema, &schema)
	req.RequestedSchema = &schema
	return req
}

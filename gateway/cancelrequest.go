package gateway

// $/cancel_request on a session/prompt (JSON-RPC's cancellation, which ACP adopts) cancels
// that prompt's turn, as session/cancel cancels the session's running one. The ACP SDK
// answers it by cancelling the handler's context, which tells the gateway nothing it can
// act on: the SDK cancels a prompt's context for a session/cancel or a second prompt too,
// and neither may abandon the prompt's update. So the input filter (wire.go) reads the
// JSON-RPC id of every session/prompt, hands it to the handler in the request's _meta, and
// routes a $/cancel_request naming it here; the handler, once it knows its turn, cancels
// that turn and no other (a later turn of the session is never hit by a late cancel).

import (
	"encoding/json"
	"sync"
)

// rpcIDMeta is the _meta key under which the input filter hands a session/prompt its
// JSON-RPC id. A client's own value under it is overwritten.
const rpcIDMeta = "tacp.dev/rpcId"

// promptCancels is what one connection knows of its prompts in flight, by JSON-RPC id.
type promptCancels struct {
	mu sync.Mutex
	// byID holds the prompts the filter has passed on and whose handler has not returned:
	// cancelled once a $/cancel_request named it; cancel set once the handler knows its turn.
	byID map[string]*promptCancel
}

type promptCancel struct {
	cancelled bool
	cancel    func()
}

// maxPromptsInFlight bounds byID: a client that sends prompts without end (their handlers
// queue behind the session's running turn) gets no cancellation past it, not more memory.
const maxPromptsInFlight = 1024

// seen records a session/prompt with JSON-RPC id on its way to the SDK.
func (p *promptCancels) seen(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byID == nil {
		p.byID = map[string]*promptCancel{}
	}
	if _, ok := p.byID[id]; !ok && len(p.byID) < maxPromptsInFlight {
		p.byID[id] = &promptCancel{}
	}
}

// request takes a $/cancel_request naming id: the prompt's turn is cancelled now when its
// handler knows it, or as soon as it does.
func (p *promptCancels) request(id string) {
	p.mu.Lock()
	e := p.byID[id]
	var cancel func()
	if e != nil && !e.cancelled {
		e.cancelled, cancel = true, e.cancel
	}
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// bind gives id's entry the function that cancels its turn, calling it at once when a
// $/cancel_request came first.
func (p *promptCancels) bind(id string, cancel func()) {
	p.mu.Lock()
	e := p.byID[id]
	if e == nil {
		p.mu.Unlock()
		return
	}
	e.cancel = cancel
	now := e.cancelled
	p.mu.Unlock()
	if now {
		cancel()
	}
}

// drop forgets id: its handler has returned.
func (p *promptCancels) drop(id string) {
	p.mu.Lock()
	delete(p.byID, id)
	p.mu.Unlock()
}

// rpcIDOf is the JSON-RPC id the input filter put in a prompt's _meta ("" when none).
func rpcIDOf(meta map[string]any) string {
	id, _ := meta[rpcIDMeta].(string)
	return id
}

// withRPCID returns the session/prompt line with its JSON-RPC id (its JSON text) in
// params._meta, or the line unchanged when it is not an object of that shape (the SDK
// answers it as it would have).
func withRPCID(line []byte, id json.RawMessage) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return line
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(m["params"], &params) != nil || params == nil {
		return line
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := params["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return line
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[rpcIDMeta], _ = json.Marshal(string(id))
	params["_meta"], _ = json.Marshal(meta)
	m["params"], _ = json.Marshal(params)
	out, err := json.Marshal(m)
	if err != nil {
		return line
	}
	return out
}

// cancelRequestID is the requestId of a $/cancel_request's params, as JSON text.
func cancelRequestID(params json.RawMessage) string {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.RequestID) == 0 {
		return ""
	}
	return compactID(p.RequestID)
}

// compactID is a JSON-RPC id as one key: its compact JSON text (7 and "7" differ, as the
// spec has them).
func compactID(id json.RawMessage) string {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return string(id)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

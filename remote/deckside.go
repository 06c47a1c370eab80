package remote

// The deck's side of the relay: its answers given back to the editor's ids, its
// session/updates deduplicated by seq and stripped of the echo of the editor's own prompt,
// and its requests bound to the editor's copy when asked again after a reconnect.

import (
	"encoding/json"
	"slices"

	"github.com/tacp-dev/tacp/signals"
)

func (s *shim) fromRemote(l *link, b []byte) {
	var m msg
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		s.log.Warn("the deck sent what is not JSON-RPC", "bytes", len(b))
		return
	}
	switch {
	case m.has("method") && m.has("id"):
		s.remoteRequest(l, m)
	case m.has("method"):
		s.remoteNotification(l, m, b)
	default:
		s.remoteAnswer(m)
	}
}

func (s *shim) remoteAnswer(m msg) {
	var rid int64
	if json.Unmarshal(m["id"], &rid) != nil {
		return
	}
	s.mu.Lock()
	if ch, ok := s.internal[rid]; ok {
		delete(s.internal, rid)
		s.mu.Unlock()
		ch <- m
		return
	}
	c := s.calls[rid]
	if c == nil {
		s.mu.Unlock()
		return
	}
	delete(s.calls, rid)
	delete(s.byEditor, string(c.editorID))
	if !m.has("error") {
		switch c.method {
		case "initialize":
			s.initParams = c.params // a new socket is initialized the same way
		case "session/new":
			var r struct {
				SessionID string `json:"sessionId"`
			}
			_ = json.Unmarshal(m["result"], &r)
			s.advance(r.SessionID, signals.ACPMetaOfJSON(m["result"]).Seq)
		case "session/load", "session/resume":
			s.advance(c.session, signals.ACPMetaOfJSON(m["result"]).Seq)
		}
	}
	s.mu.Unlock()
	s.toEditor(m.with("id", c.editorID).bytes())
}

// advance records that the editor's view of session id has reached seq.
func (s *shim) advance(id string, seq int64) {
	if id == "" {
		return
	}
	if cur, ok := s.sessions[id]; !ok || seq > cur {
		s.sessions[id] = seq
	}
}

func (s *shim) remoteNotification(l *link, m msg, raw []byte) {
	switch m.method() {
	case "session/update":
		keep, withdraw := s.keepUpdate(l, m["params"])
		if keep {
			s.toEditor(raw)
		}
		if withdraw != 0 {
			s.withdraw(withdraw)
		}
		return
	case "$/cancel_request":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		_ = json.Unmarshal(m["params"], &p)
		s.mu.Lock()
		var eid int64
		for id, a := range s.asks {
			if a.link == l && string(a.remoteID) == string(p.RequestID) {
				eid = id
				delete(s.asks, id)
				s.forgetPerm(a.requestID)
			}
		}
		s.mu.Unlock()
		if eid != 0 {
			s.withdraw(eid)
		}
		return
	}
	s.toEditor(raw)
}

// withdraw cancels the editor's copy of one of the deck's requests.
func (s *shim) withdraw(editorID int64) {
	s.toEditor(msg{"jsonrpc": json.RawMessage(`"2.0"`), "method": json.RawMessage(`"$/cancel_request"`)}.with("params", map[string]any{"requestId": editorID}).bytes())
}

// keepUpdate decides whether a session/update goes to the editor: not when its seq was
// forwarded already (a replay after a reconnect overlaps nothing, but a second load
// might), not when it echoes the editor's own prompt. A resolution seen here names the
// editor's copy of a request that no live socket holds any more, to withdraw.
func (s *shim) keepUpdate(l *link, params json.RawMessage) (keep bool, withdraw int64) {
	var p struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			Kind string          `json:"sessionUpdate"`
			Meta json.RawMessage `json:"_meta"`
		} `json:"update"`
	}
	_ = json.Unmarshal(params, &p)
	meta := signals.ACPMetaOfJSON(params)
	var upd signals.ACPMeta
	if len(p.Update.Meta) > 0 {
		upd = signals.ACPMetaOfJSON(json.RawMessage(`{"_meta":` + string(p.Update.Meta) + `}`))
	}
	s.mu.Lock()
	if meta.Seq > 0 {
		if cur, ok := s.sessions[p.SessionID]; ok && meta.Seq <= cur {
			s.mu.Unlock()
			return false, 0
		}
		s.sessions[p.SessionID] = meta.Seq
	}
	if p.Update.Kind == "user_message_chunk" && s.own[meta.ClientMessageID] {
		s.mu.Unlock()
		return false, 0
	}
	if r := upd.PermissionResolved; r != nil {
		if a := s.perms[r.RequestID]; a != nil {
			if a.answer == nil && a.link != l {
				withdraw = a.editorID
				delete(s.asks, a.editorID)
			}
			s.forgetPerm(r.RequestID)
		}
	}
	s.mu.Unlock()
	return true, withdraw
}

func (s *shim) forgetPerm(requestID string) {
	if requestID == "" {
		return
	}
	delete(s.perms, requestID)
	if i := slices.Index(s.permOrder, requestID); i >= 0 {
		s.permOrder = slices.Delete(s.permOrder, i, i+1)
	}
}

// remoteRequest relays a request of the deck's to the editor, or binds it to the editor's
// copy when it is a permission request asked again after a reconnect.
func (s *shim) remoteRequest(l *link, m msg) {
	rq := signals.ACPMetaOfJSON(m["params"]).RequestID
	s.mu.Lock()
	if a := s.perms[rq]; rq != "" && a != nil {
		a.link, a.remoteID = l, m["id"]
		answer, key := a.answer, a.answerKey
		s.mu.Unlock()
		if answer != nil {
			l.send(answerTo(m["id"], key, answer)) // the editor answered while the socket was down
		}
		return
	}
	s.nextAsk++
	a := &ask{editorID: s.nextAsk, link: l, remoteID: m["id"], requestID: rq}
	s.asks[a.editorID] = a
	if rq != "" {
		s.perms[rq] = a
		s.permOrder = append(s.permOrder, rq)
		if len(s.permOrder) > permsKept {
			delete(s.perms, s.permOrder[0])
			s.permOrder = s.permOrder[1:]
		}
	}
	s.mu.Unlock()
	s.toEditor(m.with("id", a.editorID).bytes())
}

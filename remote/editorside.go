package remote

// The editor's side of the relay: its lines read from stdio, its requests numbered toward
// the deck (a prompt given a messageId so it can be sent again), its notifications held
// while the socket is down, and its answers routed to the socket that holds the request.

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/tacp-dev/tacp/internal/wsline"
)

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func sessionOf(params json.RawMessage) string {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(params, &p)
	return p.SessionID
}

// readEditor reads the editor's messages until its end closes.
func (s *shim) readEditor(in io.Reader) error {
	return readLines(in, func(line []byte) { s.fromEditor(line) })
}

func (s *shim) fromEditor(line []byte) {
	var m msg
	if err := json.Unmarshal(line, &m); err != nil || m == nil {
		s.forwardNotification(line) // the gateway answers what is not JSON-RPC
		return
	}
	switch {
	case m.has("method") && m.has("id"):
		s.editorRequest(m)
	case m.has("method"):
		if m.method() == "$/cancel_request" {
			m = s.translateCancel(m)
			if m == nil {
				return
			}
		}
		s.forwardNotification(m.bytes())
	default:
		s.editorAnswer(m)
	}
}

func (s *shim) editorRequest(m msg) {
	defer s.askedOnce.Do(func() { close(s.asked) })
	method := m.method()
	params := m["params"]
	s.mu.Lock()
	if s.gone != "" {
		why := s.gone
		s.mu.Unlock()
		s.errorTo(m["id"], -32603, "tacp remote: "+why)
		return
	}
	if method == "session/prompt" {
		var p map[string]json.RawMessage
		if json.Unmarshal(params, &p) == nil {
			var id string
			_ = json.Unmarshal(p["messageId"], &id)
			if id == "" {
				id = newUUID() // the prompt must be idempotent to be sent again
				p["messageId"], _ = json.Marshal(id)
				params, _ = json.Marshal(p)
				m = m.with("params", params)
			}
			s.rememberOwn(id)
		}
	}
	s.nextID++
	rid := s.nextID
	c := &call{editorID: m["id"], method: method, params: params, session: sessionOf(params), wire: m.with("id", rid).bytes()}
	s.calls[rid] = c
	s.byEditor[string(m["id"])] = rid
	l := s.link
	live := l != nil && l.ready
	if live {
		c.sent = l
	}
	s.mu.Unlock()
	if live {
		l.send(c.wire)
	}
}

func (s *shim) rememberOwn(id string) {
	if s.own[id] {
		return
	}
	s.own[id] = true
	s.ownOrder = append(s.ownOrder, id)
	if len(s.ownOrder) > ownKept {
		delete(s.own, s.ownOrder[0])
		s.ownOrder = s.ownOrder[1:]
	}
}

// translateCancel rewrites the editor's $/cancel_request to the id its request has toward
// the deck (nil: nothing of the deck's to cancel).
func (s *shim) translateCancel(m msg) msg {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	_ = json.Unmarshal(m["params"], &p)
	s.mu.Lock()
	rid, ok := s.byEditor[string(p.RequestID)]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	return m.with("params", map[string]any{"requestId": rid})
}

// forwardNotification sends b to the deck now, or once a socket is up.
func (s *shim) forwardNotification(b []byte) {
	s.mu.Lock()
	l := s.link
	if l == nil || !l.ready {
		s.held = append(s.held, b)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	l.send(b)
}

// editorAnswer routes the editor's answer to one of the deck's requests to the socket
// that holds that request now. A permission answer is kept until the session resolves the
// request, for the case that the socket it went out on drops first and the request is
// asked again.
func (s *shim) editorAnswer(m msg) {
	var eid int64
	if json.Unmarshal(m["id"], &eid) != nil {
		return
	}
	s.mu.Lock()
	a := s.asks[eid]
	if a == nil {
		s.mu.Unlock()
		return
	}
	delete(s.asks, eid)
	if m.has("error") {
		a.answer, a.answerKey = m["error"], "error"
	} else {
		a.answer, a.answerKey = m["result"], "result"
	}
	l := a.link
	live := l != nil && l == s.link
	remoteID := a.remoteID
	s.mu.Unlock()
	if live {
		l.send(answerTo(remoteID, a.answerKey, a.answer))
	}
}

func answerTo(id json.RawMessage, key string, v json.RawMessage) []byte {
	return msg{"jsonrpc": json.RawMessage(`"2.0"`), "id": id, key: v}.bytes()
}

// readLines calls fn with every line of in until it ends (nil at EOF). A line longer than
// wsline.MaxMessage is dropped: the deck would refuse it.
func readLines(in io.Reader, fn func([]byte)) error {
	r := bufio.NewReaderSize(in, 64<<10)
	var line []byte
	tooLong := false
	for {
		chunk, isPrefix, err := r.ReadLine()
		if tooLong || len(line)+len(chunk) > wsline.MaxMessage {
			tooLong, line = true, line[:0]
		} else {
			line = append(line, chunk...)
		}
		if isPrefix && err == nil {
			continue
		}
		if t := bytes.TrimSpace(line); len(t) > 0 && !tooLong {
			fn(append([]byte(nil), t...))
		}
		line, tooLong = line[:0], false
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

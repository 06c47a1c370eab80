package remote

// Reconnection: the loop that dials the deck again with backoff, the resumption that brings
// a new socket to where the editor stands (see the package comment), and the end for good
// when the deck refuses the token or the URL.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// connect keeps a socket to the deck up until ctx ends.
func (s *shim) connect(ctx context.Context) error {
	backoff := s.o.MinBackoff
	for ctx.Err() == nil {
		l, err := s.dial(ctx)
		if errors.Is(err, ErrUnauthorized) {
			s.failAll("the deck refused the token")
			return err
		}
		if errors.Is(err, ErrNotACP) {
			s.failAll(err.Error())
			return err
		}
		if err == nil {
			read := make(chan struct{})
			go func() { s.read(l); close(read) }()
			err = s.resume(l)
			if err == nil {
				backoff = s.o.MinBackoff
				s.log.Info("connected to the deck", "url", s.o.URL)
			} else {
				l.cancel()
			}
			<-read
			s.down(l)
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				s.log.Warn("connection to the deck lost; reconnecting", "url", s.o.URL)
				continue // at once: the first dial after a drop is not a failure yet
			}
		}
		s.log.Warn("cannot reach the deck; retrying", "url", s.o.URL, "in", backoff, "err", err)
		jitter := time.Duration(float64(backoff) * (0.8 + 0.4*mrand.Float64()))
		t := time.NewTimer(jitter)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, s.o.MaxBackoff)
	}
	return nil
}

// resume brings a new socket to where the editor stands (see the package comment), then
// opens it to the editor's messages.
func (s *shim) resume(l *link) error {
	s.mu.Lock()
	s.link = l
	init := s.initParams
	sessions := make(map[string]int64, len(s.sessions))
	for id, seq := range s.sessions {
		sessions[id] = seq
	}
	s.mu.Unlock()
	if init != nil {
		if _, err := s.callInternal(l, "initialize", init); err != nil {
			return err
		}
	}
	for id, seq := range sessions {
		params := map[string]any{"sessionId": id, "cwd": "/", "mcpServers": []any{}, "_meta": signals.ACPMeta{AfterSeq: &seq}.Map()}
		m, err := s.callInternal(l, "session/load", params)
		if err != nil {
			return err
		}
		if m.has("error") {
			s.log.Warn("a session could not be resumed", "session", id, "error", string(m["error"]))
			continue
		}
		s.mu.Lock()
		s.advance(id, signals.ACPMetaOfJSON(m["result"]).Seq)
		s.mu.Unlock()
	}

	s.mu.Lock()
	if s.link != l || l.ctx.Err() != nil {
		s.mu.Unlock()
		return errors.New("socket lost while resuming")
	}
	ids := make([]int64, 0, len(s.calls))
	for id := range s.calls {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var lost []*call
	for _, id := range ids {
		c := s.calls[id]
		if c.sent != nil && !idempotent[c.method] {
			lost = append(lost, c)
			delete(s.calls, id)
			delete(s.byEditor, string(c.editorID))
			continue
		}
		c.sent = l
		l.send(c.wire)
	}
	for _, b := range s.held {
		l.send(b)
	}
	s.held = nil
	l.ready = true
	s.mu.Unlock()
	for _, c := range lost {
		s.log.Warn("a request was lost with the socket", "method", c.method)
		s.errorTo(c.editorID, -32603, "tacp remote: the connection to the deck was lost during "+c.method+"; send it again")
	}
	return nil
}

// callInternal sends one request of the shim's own on l and waits for its answer.
func (s *shim) callInternal(l *link, method string, params any) (msg, error) {
	ch := make(chan msg, 1)
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.internal[id] = ch
	s.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	l.send(b)
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, errors.New("socket lost while resuming")
		}
		if method == "initialize" && m.has("error") {
			return nil, fmt.Errorf("initialize refused: %s", m["error"])
		}
		return m, nil
	case <-t.C:
		return nil, fmt.Errorf("%s: no answer in 30 s", method)
	case <-l.ctx.Done():
		return nil, errors.New("socket lost while resuming")
	}
}

// failAll answers every request the editor waits for with an error, and every later one.
func (s *shim) failAll(why string) {
	s.mu.Lock()
	s.gone = why
	calls := s.calls
	s.calls = map[int64]*call{}
	s.byEditor = map[string]int64{}
	s.mu.Unlock()
	for _, c := range calls {
		s.errorTo(c.editorID, -32603, "tacp remote: "+why)
	}
}

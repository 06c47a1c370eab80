package remote

// The WebSocket link to the deck: one socket and its outgoing queue, the dial with its
// token, the pings that catch a socket that died silently, the read loop, and its close.

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/tacp-dev/tacp/internal/wsline"
)

// link is one WebSocket to the deck and the queue of what goes out on it.
type link struct {
	c      *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc
	ready  bool // past the resumption: the editor's messages go out on it (guarded by shim.mu)

	qmu  sync.Mutex
	q    [][]byte
	wake chan struct{}
}

// send queues b for the socket; it never blocks, so no lock is held across the network.
func (l *link) send(b []byte) {
	l.qmu.Lock()
	l.q = append(l.q, b)
	l.qmu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// write sends the queue in order until the socket ends.
func (l *link) write() {
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.wake:
		}
		l.qmu.Lock()
		q := l.q
		l.q = nil
		l.qmu.Unlock()
		for _, b := range q {
			if err := l.c.Write(l.ctx, websocket.MessageText, b); err != nil {
				l.cancel()
				return
			}
		}
	}
}

func (s *shim) dial(ctx context.Context) (*link, error) {
	dctx, cancel := context.WithTimeout(ctx, s.o.DialTimeout)
	defer cancel()
	hdr := http.Header{}
	if s.o.Token != "" {
		hdr.Set("Authorization", "Bearer "+s.o.Token)
	}
	c, resp, err := websocket.Dial(dctx, s.o.URL, &websocket.DialOptions{HTTPHeader: hdr, Subprotocols: []string{"acp"}})
	if err != nil {
		if resp != nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
			return nil, fmt.Errorf("%w (HTTP %d from %s)", ErrUnauthorized, resp.StatusCode, s.o.URL)
		}
		if resp != nil && notACP(resp.StatusCode) {
			return nil, fmt.Errorf("%w: %s answers HTTP %d, not a WebSocket upgrade (a deck serves its ACP endpoint at /acp)", ErrNotACP, s.o.URL, resp.StatusCode)
		}
		return nil, err
	}
	c.SetReadLimit(wsline.MaxMessage)
	lctx, lcancel := context.WithCancel(ctx)
	l := &link{c: c, ctx: lctx, cancel: lcancel, wake: make(chan struct{}, 1)}
	go l.write()
	go s.keepAlive(l)
	return l, nil
}

// notACP reports whether an answer to the upgrade says the URL is the wrong one: anything
// but a server that is away or busy (5xx, 408, 429), which is tried again.
func notACP(code int) bool {
	switch {
	case code >= 500, code == http.StatusRequestTimeout, code == http.StatusTooManyRequests:
		return false
	}
	return code != http.StatusSwitchingProtocols
}

func (s *shim) keepAlive(l *link) {
	t := time.NewTicker(s.o.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(l.ctx, s.o.PingTimeout)
		err := l.c.Ping(pctx)
		cancel()
		if err != nil {
			s.log.Warn("the deck does not answer pings; dropping the socket", "err", err)
			l.cancel()
			return
		}
	}
}

// read hands the deck's messages to fromRemote until the socket ends.
func (s *shim) read(l *link) {
	defer l.cancel()
	for {
		_, b, err := l.c.Read(l.ctx)
		if err != nil {
			s.log.Debug("socket read ended", "err", err)
			_ = l.c.CloseNow()
			return
		}
		s.fromRemote(l, b)
	}
}

// down forgets l as the live socket; the requests it carried wait for the next one.
func (s *shim) down(l *link) {
	l.cancel()
	_ = l.c.CloseNow()
	s.mu.Lock()
	if s.link == l {
		s.link = nil
	}
	for id, ch := range s.internal {
		close(ch)
		delete(s.internal, id)
	}
	s.mu.Unlock()
}

// shutdown closes the live socket politely: the deck detaches at once.
func (s *shim) shutdown() {
	s.mu.Lock()
	l := s.link
	s.link = nil
	s.mu.Unlock()
	if l != nil {
		_ = l.c.Close(websocket.StatusNormalClosure, "the editor hung up")
		l.cancel()
	}
}

// Package wsline carries newline-delimited JSON-RPC over a WebSocket, one message per text
// frame, so that code written for a stdio pair (the gateway, an acp-go-sdk connection)
// speaks over a socket unchanged: each frame read comes out as one line, and each line
// written goes out as one frame.
package wsline

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// MaxMessage bounds one frame either way. The gateway refuses incoming messages past 8 MiB
// (a prompt of signals.MaxTextBytes with JSON escaping); agent updates are journaled up to
// 256 KiB.
const MaxMessage = 16 << 20

// Stream is one WebSocket seen as a line stream. Read and Write may be called from
// different goroutines; Writes are serialized.
type Stream struct {
	c   *websocket.Conn
	ctx context.Context

	rbuf []byte // the rest of the frame being read, with its newline
	rerr error  // the error that ended reading: every later Read returns it

	wmu  sync.Mutex
	wbuf []byte // a line written in pieces, not yet whole
}

// New returns c as a Stream that lives as long as ctx, and sets c's read limit to
// MaxMessage.
func New(ctx context.Context, c *websocket.Conn) *Stream {
	c.SetReadLimit(MaxMessage)
	return &Stream{c: c, ctx: ctx}
}

// Read returns the next frame's bytes and a newline. A frame's own line breaks (a
// pretty-printed message) become spaces: they can only stand between JSON tokens, and the
// reader must see one line per message. A close by the peer with a normal status reads as
// io.EOF.
func (s *Stream) Read(p []byte) (int, error) {
	for len(s.rbuf) == 0 {
		if s.rerr != nil {
			return 0, s.rerr
		}
		_, msg, err := s.c.Read(s.ctx)
		if err != nil {
			switch websocket.CloseStatus(err) {
			case websocket.StatusNormalClosure, websocket.StatusGoingAway:
				err = io.EOF
			}
			s.rerr = err
			return 0, err
		}
		msg = bytes.TrimSpace(msg)
		if len(msg) == 0 {
			continue
		}
		for i, b := range msg {
			if b == '\n' || b == '\r' {
				msg[i] = ' '
			}
		}
		s.rbuf = append(msg, '\n')
	}
	n := copy(p, s.rbuf)
	s.rbuf = s.rbuf[n:]
	return n, nil
}

// Write sends every whole line in what has been written as one text frame, and keeps a
// partial line for the next Write.
func (s *Stream) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.wbuf = append(s.wbuf, p...)
	for {
		i := bytes.IndexByte(s.wbuf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := bytes.TrimSpace(s.wbuf[:i])
		if len(line) > 0 {
			if err := s.c.Write(s.ctx, websocket.MessageText, line); err != nil {
				s.wbuf = s.wbuf[:0]
				return 0, err
			}
		}
		s.wbuf = s.wbuf[i+1:]
		if len(s.wbuf) == 0 {
			s.wbuf = nil // do not keep a large message's buffer
		}
	}
}

// KeepAlive pings the peer every interval until ctx ends, and closes the socket when a pong
// does not come back within timeout: a peer that vanished without a word (a laptop that
// slept, a network that changed) ends the stream instead of holding it open. Someone must
// be reading the stream for the pongs to arrive.
func (s *Stream) KeepAlive(ctx context.Context, interval, timeout time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := s.c.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				_ = s.c.CloseNow()
			}
			return
		}
	}
}

// Close closes the socket with code and reason (a peer that does not answer the close
// handshake is cut after the library's 5 s).
func (s *Stream) Close(code websocket.StatusCode, reason string) error {
	err := s.c.Close(code, reason)
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

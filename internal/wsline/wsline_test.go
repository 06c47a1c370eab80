package wsline

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// pair returns the two ends of a real WebSocket as Streams.
func pair(t *testing.T) (server, client *Stream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	got := make(chan *Stream, 1)
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		got <- New(ctx, c)
		<-done
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	// The dial's context bounds the handshake only: the socket outlives it.
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	c, _, err := websocket.Dial(dctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	dcancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return <-got, New(ctx, c)
}

func TestEachLineIsOneFrameAndEachFrameOneLine(t *testing.T) {
	server, client := pair(t)
	// Written in pieces, two messages in one Write, an empty line: two frames.
	for _, p := range []string{`{"a":`, "1}\n{\"b\":2}\n", "\n"} {
		if _, err := client.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	// A pretty-printed frame is still one line.
	if err := client.c.Write(context.Background(), websocket.MessageText, []byte("{\n  \"c\": 3\r\n}")); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(server)
	for _, want := range []string{`{"a":1}`, `{"b":2}`, `{   "c": 3  }`} {
		if !lines.Scan() {
			t.Fatalf("no line for %s: %v", want, lines.Err())
		}
		if lines.Text() != want {
			t.Fatalf("got %q, want %q", lines.Text(), want)
		}
	}
	// A normal close reads as the end of the stream.
	go func() { _ = client.Close(websocket.StatusNormalClosure, "") }()
	if lines.Scan() {
		t.Fatalf("a line after the close: %q", lines.Text())
	}
	if lines.Err() != nil {
		t.Fatalf("a normal close is io.EOF, got %v", lines.Err())
	}
	_, err := server.Read(make([]byte, 1))
	if err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
}

func TestKeepAliveClosesASocketWhosePeerStoppedAnswering(t *testing.T) {
	server, client := pair(t)
	// The client never reads, so it never answers a ping.
	_ = client
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { server.KeepAlive(ctx, 10*time.Millisecond, 50*time.Millisecond); close(done) }()
	go func() { _, _ = io.Copy(io.Discard, server) }() // pongs are read by a reader
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("KeepAlive did not give up on a peer that never answers")
	}
	if err := server.c.Ping(context.Background()); err == nil {
		t.Fatal("the socket is still open")
	}
}

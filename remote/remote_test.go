package remote

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// fakeDeck is a WebSocket server the test speaks JSON-RPC through by hand, one socket at a
// time, as the deck's gateway would.
type fakeDeck struct {
	t      *testing.T
	srv    *httptest.Server
	conns  chan *fakeConn
	refuse atomic.Int32 // an HTTP status to refuse the upgrade with (0: accept)
	tokens chan string
}

type fakeConn struct {
	t   *testing.T
	c   *websocket.Conn
	ctx context.Context
}

func newFakeDeck(t *testing.T) *fakeDeck {
	t.Helper()
	d := &fakeDeck{t: t, conns: make(chan *fakeConn, 4), tokens: make(chan string, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // a shim dialing in a loop must not block the server's Close
		case d.tokens <- r.Header.Get("Authorization"):
		default:
		}
		if code := d.refuse.Load(); code != 0 {
			http.Error(w, "refused", int(code))
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		fc := &fakeConn{t: t, c: c, ctx: ctx}
		d.conns <- fc
		<-ctx.Done()
	}))
	t.Cleanup(func() { cancel(); d.srv.CloseClientConnections(); d.srv.Close() })
	return d
}

func (d *fakeDeck) url() string { return "ws" + strings.TrimPrefix(d.srv.URL, "http") + "/acp" }

// accept waits for the shim's next socket.
func (d *fakeDeck) accept() *fakeConn {
	d.t.Helper()
	select {
	case c := <-d.conns:
		return c
	case <-time.After(20 * time.Second):
		d.t.Fatal("the shim did not connect")
		return nil
	}
}

// recv reads the next message the shim sends the deck.
func (f *fakeConn) recv() msg {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, 20*time.Second)
	defer cancel()
	_, b, err := f.c.Read(ctx)
	require.NoError(f.t, err)
	var m msg
	require.NoError(f.t, json.Unmarshal(b, &m), string(b))
	return m
}

func (f *fakeConn) send(s string) {
	f.t.Helper()
	require.NoError(f.t, f.c.Write(f.ctx, websocket.MessageText, []byte(s)))
}

// answer answers request m with result.
func (f *fakeConn) answer(m msg, result string) {
	f.send(`{"jsonrpc":"2.0","id":` + string(m["id"]) + `,"result":` + result + `}`)
}

// editor is the editor's end of the shim's stdio.
type editor struct {
	t     *testing.T
	in    *io.PipeWriter
	lines chan msg
	done  chan error
}

func startShim(t *testing.T, url string) *editor {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	e := &editor{t: t, in: inW, lines: make(chan msg, 100), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			var m msg
			require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
			e.lines <- m
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		e.done <- Run(ctx, inR, outW, Options{URL: url, Token: "tok", MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond})
		_ = outW.Close()
	}()
	t.Cleanup(func() { _ = inW.Close(); cancel() })
	return e
}

func (e *editor) send(s string) {
	e.t.Helper()
	_, err := io.WriteString(e.in, s+"\n")
	require.NoError(e.t, err)
}

func (e *editor) recv() msg {
	e.t.Helper()
	select {
	case m := <-e.lines:
		return m
	case <-time.After(20 * time.Second):
		e.t.Fatal("the editor got nothing")
		return nil
	}
}

// none checks that nothing more reaches the editor for a moment.
func (e *editor) none() {
	e.t.Helper()
	select {
	case m := <-e.lines:
		e.t.Fatalf("the editor got %s", m.bytes())
	case <-time.After(100 * time.Millisecond):
	}
}

func update(seq int, text string) string {
	return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}},"_meta":{"tacp":{"seq":` + itoa(seq) + `}}}}`
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func chunkText(t *testing.T, m msg) string {
	t.Helper()
	var p struct {
		Update struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"update"`
	}
	require.NoError(t, json.Unmarshal(m["params"], &p))
	return p.Update.Content.Text
}

func TestShimRelaysMessagesUnderItsOwnIDs(t *testing.T) {
	d := newFakeDeck(t)
	e := startShim(t, d.url())
	c := d.accept()
	require.Equal(t, "Bearer tok", <-d.tokens)
	e.send(`{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":1}}`)
	m := c.recv()
	require.Equal(t, "initialize", m.method())
	require.JSONEq(t, `{"protocolVersion":1}`, string(m["params"]))
	c.answer(m, `{"protocolVersion":1}`)
	got := e.recv()
	require.JSONEq(t, `"a"`, string(got["id"]), "the editor's id comes back")
	require.JSONEq(t, `{"protocolVersion":1}`, string(got["result"]))

	// An update passes byte for byte, unknown kinds included.
	raw := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tacp_custom","x":[1]}}}`
	c.send(raw)
	require.JSONEq(t, raw, string(e.recv().bytes()))

	// The editor cancels its own request by its id; the deck gets the shim's.
	e.send(`{"jsonrpc":"2.0","id":9,"method":"session/list","params":{}}`)
	list := c.recv()
	e.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":9}}`)
	cancel := c.recv()
	require.JSONEq(t, `{"requestId":`+string(list["id"])+`}`, string(cancel["params"]))

	// Hanging up ends Run cleanly.
	require.NoError(t, e.in.Close())
	select {
	case err := <-e.done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not end with the editor")
	}
}

func TestShimResumesBySeqAndSendsTheRunningPromptAgain(t *testing.T) {
	d := newFakeDeck(t)
	e := startShim(t, d.url())
	c := d.accept()
	e.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientInfo":{"name":"ed"}}}`)
	c.answer(c.recv(), `{"protocolVersion":1}`)
	e.recv()
	e.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	c.answer(c.recv(), `{"sessionId":"s1","_meta":{"tacp":{"seq":1}}}`)
	e.recv()
	e.send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}`)
	prompt := c.recv()
	var p struct {
		MessageID string `json:"messageId"`
	}
	require.NoError(t, json.Unmarshal(prompt["params"], &p))
	require.Len(t, p.MessageID, 36, "the shim gives the prompt a messageId (a UUID)")
	c.send(update(2, "one"))
	c.send(update(3, "two"))
	require.Equal(t, "one", chunkText(t, e.recv()))
	require.Equal(t, "two", chunkText(t, e.recv()))
	// A session/new in flight when the socket drops cannot be sent twice.
	e.send(`{"jsonrpc":"2.0","id":4,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	require.Equal(t, "session/new", c.recv().method())

	_ = c.c.CloseNow() // the socket drops mid-turn
	c = d.accept()
	init := c.recv()
	require.Equal(t, "initialize", init.method())
	require.JSONEq(t, `{"protocolVersion":1,"clientInfo":{"name":"ed"}}`, string(init["params"]), "the editor's own initialize")
	c.answer(init, `{"protocolVersion":1}`)
	load := c.recv()
	require.Equal(t, "session/load", load.method())
	require.JSONEq(t, `{"sessionId":"s1","cwd":"/","mcpServers":[],"_meta":{"tacp":{"after_seq":3}}}`, string(load["params"]))
	// The replay: an overlap is dropped, the own prompt's echo too, the rest passes.
	c.send(update(3, "two"))
	c.send(update(4, "three"))
	c.send(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"hi"}},"_meta":{"tacp":{"seq":5,"client_message_id":"` + p.MessageID + `"}}}}`)
	c.answer(load, `{"_meta":{"tacp":{"seq":5}}}`)
	// Then what was in flight: the prompt again, the same messageId; session/new fails.
	again := c.recv()
	require.Equal(t, "session/prompt", again.method())
	require.JSONEq(t, string(prompt["params"]), string(again["params"]))
	require.Equal(t, "three", chunkText(t, e.recv()))
	lost := e.recv()
	require.JSONEq(t, `4`, string(lost["id"]))
	require.Contains(t, string(lost["error"]), "session/new")
	c.send(update(6, "four"))
	c.answer(again, `{"stopReason":"end_turn"}`)
	require.Equal(t, "four", chunkText(t, e.recv()))
	answer := e.recv()
	require.JSONEq(t, `3`, string(answer["id"]))
	require.JSONEq(t, `{"stopReason":"end_turn"}`, string(answer["result"]))
	e.none()
}

func TestShimBindsAPermissionRequestAskedAgainToTheEditorsCopy(t *testing.T) {
	d := newFakeDeck(t)
	e := startShim(t, d.url())
	c := d.accept()
	ask := `{"jsonrpc":"2.0","id":ID,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t1"},"options":[],"_meta":{"tacp":{"request_id":"r1"}}}}`
	c.send(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"t1"},"_meta":{"tacp":{"seq":4}}}}`)
	e.recv()
	c.send(strings.Replace(ask, "ID", "7", 1))
	asked := e.recv()
	require.Equal(t, "session/request_permission", asked.method())

	_ = c.c.CloseNow()
	c = d.accept()
	load := c.recv() // no initialize from this editor: the load comes first
	require.Equal(t, "session/load", load.method())
	c.answer(load, `{"_meta":{"tacp":{"seq":4}}}`)
	c.send(strings.Replace(ask, "ID", "3", 1)) // asked again on the new socket
	e.none()                                   // the editor is not asked twice
	e.send(`{"jsonrpc":"2.0","id":` + string(asked["id"]) + `,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`)
	got := c.recv()
	require.JSONEq(t, `3`, string(got["id"]), "the answer goes to the request that is open now")
	require.JSONEq(t, `{"outcome":{"outcome":"selected","optionId":"allow"}}`, string(got["result"]))

	// Answered while the socket is down: the request asked again gets the answer at once.
	c.send(strings.Replace(strings.Replace(ask, "ID", "8", 1), "r1", "r2", 1))
	asked = e.recv()
	_ = c.c.CloseNow()
	e.send(`{"jsonrpc":"2.0","id":` + string(asked["id"]) + `,"result":{"outcome":{"outcome":"cancelled"}}}`)
	c = d.accept()
	load = c.recv()
	c.answer(load, `{"_meta":{"tacp":{"seq":4}}}`)
	c.send(strings.Replace(strings.Replace(ask, "ID", "5", 1), "r1", "r2", 1))
	got = c.recv()
	require.JSONEq(t, `5`, string(got["id"]))
	require.JSONEq(t, `{"outcome":{"outcome":"cancelled"}}`, string(got["result"]))

	// Resolved elsewhere while the socket was down: the editor's copy is withdrawn.
	c.send(strings.Replace(strings.Replace(ask, "ID", "9", 1), "r1", "r3", 1))
	asked = e.recv()
	_ = c.c.CloseNow()
	c = d.accept()
	require.Equal(t, "session/load", c.recv().method(), "the editor loads the session again")
	c.send(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"t1","_meta":{"tacp":{"permission_resolved":{"request_id":"r3","outcome":"selected","decided_by":"user"}}}},"_meta":{"tacp":{"seq":5}}}}`)
	require.Equal(t, "session/update", e.recv().method())
	withdrawn := e.recv()
	require.Equal(t, "$/cancel_request", withdrawn.method())
	require.JSONEq(t, `{"requestId":`+string(asked["id"])+`}`, string(withdrawn["params"]))
}

func TestShimStopsWhenTheDeckRefusesTheToken(t *testing.T) {
	d := newFakeDeck(t)
	d.refuse.Store(http.StatusUnauthorized)
	e := startShim(t, d.url())
	select {
	case err := <-e.done:
		require.True(t, errors.Is(err, ErrUnauthorized), "%v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("Run kept trying a refused token")
	}
	// A deck that is away is tried again, with backoff.
	d.refuse.Store(http.StatusBadGateway)
	e = startShim(t, d.url())
	for range 3 {
		<-d.tokens
	}
	d.refuse.Store(0)
	d.accept()
	select {
	case err := <-e.done:
		t.Fatalf("Run gave up on a deck that was away: %v", err)
	default:
	}
}

func TestEndpointURLIsTheDecksACPEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"http://deck:8080":          "ws://deck:8080/acp",
		"http://deck:8080/":         "ws://deck:8080/acp",
		"https://deck.example":      "wss://deck.example/acp",
		"ws://deck:8080/acp":        "ws://deck:8080/acp",
		"wss://proxy/team/acp":      "wss://proxy/team/acp",
		" http://127.0.0.1:9/?x=1 ": "ws://127.0.0.1:9/acp?x=1",
	} {
		got, err := EndpointURL(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"deck:8080", "ftp://deck/acp", "http://", "http://[::1"} {
		_, err := EndpointURL(bad)
		require.Error(t, err, bad)
	}
}

func TestShimStopsWhenTheURLIsNotTheDecksACPEndpoint(t *testing.T) {
	for _, code := range []int{http.StatusOK, http.StatusNotFound} {
		d := newFakeDeck(t)
		d.refuse.Store(int32(code))
		e := startShim(t, d.url())
		e.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
		select {
		case err := <-e.done:
			require.True(t, errors.Is(err, ErrNotACP), "HTTP %d: %v", code, err)
			require.Contains(t, err.Error(), "/acp")
		case <-time.After(20 * time.Second):
			t.Fatalf("HTTP %d: Run kept dialing a URL that is not an ACP endpoint", code)
		}
		answer := e.recv()
		require.Equal(t, "1", string(answer["id"]))
		require.Contains(t, string(answer["error"]), "not a WebSocket upgrade")
	}
}

// Package remote is the editor's side of remote ACP: `starter acp --remote URL --token T`
// speaks ACP on stdio as the agent of an editor that starts a local command (Zed,
// JetBrains, acpx) and relays every message to a remote tacp's /acp (the deck's ACP face,
// package deck) over one WebSocket, one JSON-RPC message per text frame. The laptop needs
// no Temporal credentials, only the deck's URL and a token.
//
// When the socket drops (a laptop that sleeps, a network that changes, a deck that
// restarts) the shim dials again with backoff and resumes where the editor stands:
//
//  1. it sends initialize again, with the editor's own params;
//  2. it loads every session the editor had with _meta.tacp.after_seq set to the journal
//     seq of the last session/update it forwarded (every update the gateway sends carries
//     _meta.tacp.seq), so the gateway replays exactly what the editor missed;
//  3. it sends again the editor's requests whose answers were lost with the socket. A
//     session/prompt is idempotent by its messageId (the shim gives one to a prompt that
//     has none), so the prompt that was running answers when its turn ends; requests that
//     are not idempotent (session/new) are answered with an error instead;
//  4. it sends what the editor said while the socket was down (a session/cancel).
//
// Updates are deduplicated by seq, so the editor never sees one twice, and the echo of its
// own prompt (a user_message_chunk naming the prompt's client_message_id) is dropped. A
// permission request the editor is still answering stays open: the gateway asks it again
// on the new socket (same _meta.tacp.request_id) and the shim binds the editor's answer to
// that one instead of asking twice.
package remote

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/tacp-dev/tacp/internal/wsline"
	"github.com/tacp-dev/tacp/signals"
)

// Options configure Run.
type Options struct {
	// URL is the deck's ACP endpoint: ws://host:port/acp or wss://… (http and https are
	// read as ws and wss).
	URL string
	// Token is a deck token, sent as "Authorization: Bearer". An observer token makes an
	// observer connection.
	Token string
	// MinBackoff and MaxBackoff bound the wait between dials after a failure (defaults
	// 100 ms and 5 s; each failure doubles it, with ±20% jitter).
	MinBackoff, MaxBackoff time.Duration
	// PingInterval and PingTimeout: the shim pings the deck this often and drops a socket
	// whose pong does not come back in time (defaults 15 s and 10 s), so a socket that died
	// silently (a laptop that slept) is replaced.
	PingInterval, PingTimeout time.Duration
	// DialTimeout bounds one dial and its handshake (default 10 s).
	DialTimeout time.Duration
	// Logger gets diagnostics (never prompt text). Default: discard.
	Logger *slog.Logger
}

// ErrUnauthorized is returned by Run when the deck refuses the token (401 or 403 at the
// upgrade): dialing again would not help.
var ErrUnauthorized = errors.New("remote: the deck refused the token")

// ErrNotACP is returned by Run when the URL answers HTTP but not as a WebSocket (a page, a
// 404, a redirect): it is not the deck's /acp, and dialing again would not help. A deck
// that is away or overloaded (no answer, 5xx, 429) is tried again instead.
var ErrNotACP = errors.New("remote: the URL is not a deck's ACP endpoint")

// Run relays the ACP connection on in and out (the editor's end) to o.URL until in ends or
// ctx does, reconnecting as often as it must. It returns nil when the editor hangs up and
// ErrUnauthorized (wrapped) when the deck refuses the token.
func Run(ctx context.Context, in io.Reader, out io.Writer, o Options) error {
	if o.URL == "" {
		return errors.New("remote: a URL is required")
	}
	u, err := EndpointURL(o.URL)
	if err != nil {
		return err
	}
	o.URL = u
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(5*time.Second, o.MinBackoff)
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 15 * time.Second
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = 10 * time.Second
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s := newShim(o, out)
	go func() {
		err := s.readEditor(in)
		cancel(err) // the editor hung up (nil cause: a clean end)
	}()
	err = s.connect(ctx)
	s.shutdown()
	if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrNotACP) {
		// The editor started this process and writes initialize at once: it is answered
		// with the reason (failAll), not left to find a closed pipe.
		select {
		case <-s.asked:
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
		return err
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// EndpointURL is the WebSocket URL of a deck's ACP endpoint as a person may write it: http
// and https become ws and wss, and a URL with no path (the deck's own address, as its
// sign-in page shows it) gets /acp. Any other path is kept: a deck behind a proxy may serve
// /acp elsewhere.
func EndpointURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("remote: URL %q: %v", raw, err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	case "ws", "wss":
	default:
		return "", fmt.Errorf("remote: URL %q: want ws://, wss://, http:// or https://", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("remote: URL %q names no host", raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/acp"
	}
	return u.String(), nil
}

// msg is a JSON-RPC message with its fields kept raw.
type msg map[string]json.RawMessage

func (m msg) has(k string) bool { _, ok := m[k]; return ok }

func (m msg) method() string {
	var s string
	_ = json.Unmarshal(m["method"], &s)
	return s
}

func (m msg) bytes() []byte {
	b, _ := json.Marshal(map[string]json.RawMessage(m))
	return b
}

// with returns a copy of m with key set to v.
func (m msg) with(key string, v any) msg {
	out := make(msg, len(m)+1)
	for k, x := range m {
		out[k] = x
	}
	b, _ := json.Marshal(v)
	out[key] = b
	return out
}

// call is an editor request on its way to the deck, kept until its answer is forwarded.
type call struct {
	editorID json.RawMessage
	method   string
	params   json.RawMessage
	session  string
	wire     []byte // the request as the deck gets it (the shim's id)
	sent     *link  // the socket it went out on (nil: not yet)
}

// ask is a request of the deck's on its way to the editor (a permission request).
type ask struct {
	editorID  int64
	link      *link
	remoteID  json.RawMessage
	requestID string          // _meta.tacp.request_id: the same request across sockets
	answer    json.RawMessage // the editor's answer (its result or error member), once given
	answerKey string          // "result" or "error"
}

// Resent after a reconnect: requests whose repetition changes nothing.
var idempotent = map[string]bool{
	"initialize": true, "authenticate": true, "session/load": true, "session/resume": true,
	"session/list": true, "session/prompt": true, // by its messageId
}

// ownKept bounds the messageIds of the editor's own prompts the shim remembers.
const ownKept = 4096

// permsKept bounds the permission requests remembered across sockets.
const permsKept = 1024

type shim struct {
	o   Options
	log *slog.Logger

	wmu sync.Mutex // one whole line at a time on the editor's end
	out io.Writer

	mu         sync.Mutex
	link       *link // the live socket; nil while down
	nextID     int64 // request ids toward the deck (unique across sockets)
	calls      map[int64]*call
	byEditor   map[string]int64 // editor request id → the shim's id, for $/cancel_request
	internal   map[int64]chan msg
	nextAsk    int64
	asks       map[int64]*ask  // by the id the editor sees
	perms      map[string]*ask // by request_id, until the session resolves it
	permOrder  []string
	sessions   map[string]int64 // session → seq of the last update forwarded (or its view's start)
	own        map[string]bool  // messageIds of the editor's prompts
	ownOrder   []string
	initParams json.RawMessage
	held       [][]byte // editor notifications that wait for a socket
	// gone is why the deck cannot be reached for good (a refused token, a URL that is not
	// its ACP endpoint): every request of the editor is answered with it at once.
	gone string
	// asked is closed at the editor's first request: Run, ending for good, waits for it so
	// the editor's initialize is answered with the reason rather than by a hang-up.
	asked     chan struct{}
	askedOnce sync.Once
}

func newShim(o Options, out io.Writer) *shim {
	return &shim{
		o: o, log: o.Logger, out: out,
		calls: map[int64]*call{}, byEditor: map[string]int64{}, internal: map[int64]chan msg{},
		asks: map[int64]*ask{}, perms: map[string]*ask{}, sessions: map[string]int64{}, own: map[string]bool{},
		asked: make(chan struct{}),
	}
}

// toEditor writes one message to the editor.
func (s *shim) toEditor(b []byte) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, err := s.out.Write(append(b, '\n')); err != nil {
		s.log.Debug("write to the editor failed", "err", err)
	}
}

// errorTo answers the editor's request id with a JSON-RPC error.
func (s *shim) errorTo(id json.RawMessage, code int, message string) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": message}})
	s.toEditor(b)
}

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

// --- the editor's side ---

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

// --- the deck's side ---

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

// --- the socket ---

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

package e2e

// Remote ACP end to end: acp-go-sdk clients over a real WebSocket to the deck's /acp, on
// the suite's server, worker and testagent. A prompt streams and its permission request is
// answered over the socket; a socket cut mid-turn from either side resumes by journal seq
// with every event after it exactly once and in order, and an open permission request is
// asked again; observer tokens cannot act; a bad token is refused at the upgrade.

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/deck"
	"github.com/tacp-dev/tacp/gateway"
	"github.com/tacp-dev/tacp/internal/wsline"
	"github.com/tacp-dev/tacp/signals"
)

// acpDeck is a deck over the suite's sessions whose /acp sockets the test can cut from the
// server's side.
type acpDeck struct {
	*httptest.Server
	operator, observer string

	mu      sync.Mutex
	sockets []net.Conn // the upgraded connections, as the server holds them
}

func newACPDeck(t *testing.T) *acpDeck {
	t.Helper()
	d := &acpDeck{operator: "op-" + signals.NewID(), observer: "obs-" + signals.NewID()}
	gw := gateway.New(gateway.Options{Client: sc, Agent: gatewayAgent(), IgnoreClientCwd: true})
	h, err := deck.New(deck.Options{Client: sc, ControllerTokens: []string{d.operator}, ObserverTokens: []string{d.observer}, Gateway: gw})
	require.NoError(t, err)
	d.Server = httptest.NewUnstartedServer(h)
	d.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateHijacked {
			d.mu.Lock()
			d.sockets = append(d.sockets, c)
			d.mu.Unlock()
		}
	}
	d.Start()
	t.Cleanup(func() { d.cut(); d.Close() })
	return d
}

func (d *acpDeck) acpURL() string { return "ws" + strings.TrimPrefix(d.URL, "http") + "/acp" }

// cut closes every /acp socket from the server's side, without a close frame: what the
// client sees when the deck's host drops off the network or the process dies.
func (d *acpDeck) cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.sockets {
		_ = c.Close()
	}
	d.sockets = nil
}

// remotePeer is an ACP client on one WebSocket to /acp.
type remotePeer struct {
	*acpPeer
	ws *websocket.Conn
}

// dialACP connects an ACP client to url with token and initializes it.
func dialACP(t *testing.T, url, token string) *remotePeer {
	t.Helper()
	return dialACPAs(t, url, token, nil)
}

// dialACPAs is dialACP for a client that names itself info in initialize.
func dialACPAs(t *testing.T, url, token string, info *acp.Implementation) *remotePeer {
	t.Helper()
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+token)
	ws, _, err := websocket.Dial(ctxFor(t, 30*time.Second), url, &websocket.DialOptions{HTTPHeader: hdr})
	require.NoError(t, err)
	life, cancel := context.WithCancel(context.Background())
	st := wsline.New(life, ws)
	p := &remotePeer{acpPeer: &acpPeer{t: t}, ws: ws}
	p.conn = acp.NewClientSideConnection(p.acpPeer, st, st)
	t.Cleanup(func() { _ = ws.CloseNow(); cancel() })
	_, err = p.conn.Initialize(ctxFor(t, 30*time.Second), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber, ClientInfo: info})
	require.NoError(t, err)
	return p
}

// seqs returns _meta.tacp.seq of every update the client got, in order.
func (p *acpPeer) seqs() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int64, 0, len(p.updates))
	for _, n := range p.updates {
		m, err := signals.ACPMetaOf(n.Meta)
		require.NoError(p.t, err)
		out = append(out, m.Seq)
	}
	return out
}

func (p *acpPeer) lastSeq() int64 {
	s := p.seqs()
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1]
}

// promptID sends a prompt with the client's messageId, so that sending it again is
// idempotent.
func (p *acpPeer) promptID(id, msgID, text string) (acp.PromptResponse, error) {
	return p.conn.Prompt(ctxFor(p.t, 90*time.Second), acp.PromptRequest{SessionId: acp.SessionId(id), MessageId: &msgID, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
}

// loadAfter loads session id resuming after seq, and returns the answer's _meta.tacp.
func (p *acpPeer) loadAfter(id string, seq int64) signals.ACPMeta {
	p.t.Helper()
	res, err := p.conn.LoadSession(ctxFor(p.t, 30*time.Second), acp.LoadSessionRequest{
		SessionId: acp.SessionId(id), Cwd: "/elsewhere", McpServers: []acp.McpServer{},
		Meta: signals.ACPMeta{AfterSeq: &seq}.Map(),
	})
	require.NoError(p.t, err)
	m, err := signals.ACPMetaOf(res.Meta)
	require.NoError(p.t, err)
	return m
}

func allowOnce(r acp.RequestPermissionRequest) acp.RequestPermissionResponse {
	for _, o := range r.Options {
		if o.Kind == acp.PermissionOptionKindAllowOnce {
			return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(o.OptionId)}
		}
	}
	return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}
}

// updateSeqs returns the seq of every journal event of session id that the gateway shows as
// a session/update to a client that did not send the prompts (agent updates, resolutions,
// the prompts of turns after from), in order.
func updateSeqs(evs []signals.Event, after int64) []int64 {
	var out []int64
	for _, ev := range evs {
		if ev.Seq <= after {
			continue
		}
		switch ev.Kind {
		case signals.EventAgentUpdate, signals.EventPermissionResolved:
			out = append(out, ev.Seq)
		}
	}
	return out
}

func TestRemoteACPPromptStreamsAndAPermissionIsAnswered(t *testing.T) {
	t.Parallel()
	d := newACPDeck(t)
	p := dialACP(t, d.acpURL(), d.operator)
	res, err := p.conn.NewSession(ctxFor(t, 30*time.Second), acp.NewSessionRequest{Cwd: "/a/laptop/path", McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	id := string(res.SessionId)
	m, err := signals.ACPMetaOf(res.Meta)
	require.NoError(t, err)
	require.EqualValues(t, 1, m.Seq, "a new session's view starts after session.started")
	st, err := sc.Status(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	require.Equal(t, gatewayAgent(), st.Agent, "the deck's gateway chose the agent")

	p.mu.Lock()
	p.answer = allowOnce
	p.mu.Unlock()
	r, err := p.prompt(id, "/permission edit")
	require.NoError(t, err)
	require.Equal(t, acp.StopReasonEndTurn, r.StopReason)
	require.Equal(t, 1, p.askedCount())
	evs := allEvents(t, id)
	require.Equal(t, agentTexts(t, evs, 1), p.texts(false))
	require.Contains(t, p.texts(false), "permission: selected allow")
	// Every update carries the seq of its journal event: all of them, in order.
	require.Equal(t, updateSeqs(evs, 0), p.seqs())
	for _, ev := range evs {
		if ev.Kind == signals.EventPermissionResolved {
			var res signals.PermissionResolution
			require.NoError(t, json.Unmarshal(ev.Data, &res))
			require.Equal(t, signals.DecidedByUser, res.DecidedBy)
		}
	}
	checkInvariants(t, evs)

	// A stream: a second turn's chunks arrive in order while it runs.
	r, err = p.prompt(id, "/chunks 20 every 20ms")
	require.NoError(t, err)
	require.Equal(t, acp.StopReasonEndTurn, r.StopReason)
	evs = allEvents(t, id)
	require.Equal(t, append(agentTexts(t, evs, 1), agentTexts(t, evs, 2)...), p.texts(false))
	require.Equal(t, updateSeqs(evs, 0), p.seqs())
}

func TestRemoteACPResumesBySeqAfterTheSocketDrops(t *testing.T) {
	t.Parallel()
	for _, side := range []string{"server", "client"} {
		t.Run(side, func(t *testing.T) {
			t.Parallel()
			d := newACPDeck(t)
			a := dialACP(t, d.acpURL(), d.operator)
			res, err := a.conn.NewSession(ctxFor(t, 30*time.Second), acp.NewSessionRequest{Cwd: "/", McpServers: []acp.McpServer{}})
			require.NoError(t, err)
			id := string(res.SessionId)
			msgID := signals.NewID()
			const chunks = 40
			first := make(chan error, 1)
			go func() {
				_, err := a.promptID(id, msgID, "/chunks 40 every 50ms")
				first <- err
			}()
			require.Eventually(t, func() bool { return len(a.texts(false)) >= 5 }, 60*time.Second, 5*time.Millisecond)
			if side == "server" {
				d.cut()
			} else {
				_ = a.ws.CloseNow()
			}
			require.Error(t, <-first, "the prompt's answer was lost with the socket")
			seen := a.lastSeq()
			// The turn streams on while nobody is connected: these are the events to catch up.
			require.Eventually(t, func() bool { return len(updateSeqs(allEvents(t, id), seen)) >= 5 }, 60*time.Second, 10*time.Millisecond)

			b := dialACP(t, d.acpURL(), d.operator)
			at := b.loadAfter(id, seen)
			require.False(t, at.Gap)
			require.GreaterOrEqual(t, at.Seq, seen)
			// The same prompt again (its messageId) is the same turn: it answers when that
			// turn ends.
			r, err := b.promptID(id, msgID, "/chunks 40 every 50ms")
			require.NoError(t, err)
			require.Equal(t, acp.StopReasonEndTurn, r.StopReason)
			require.Equal(t, msgID, *r.UserMessageId)

			evs := allEvents(t, id)
			require.Len(t, agentTexts(t, evs, 1), chunks, "the prompt ran once")
			for _, s := range a.seqs() {
				require.LessOrEqual(t, s, seen)
			}
			// Exactly the events after seen, once each, in order; with what a saw, the whole turn.
			require.Equal(t, updateSeqs(evs, seen), b.seqs())
			require.Equal(t, agentTexts(t, evs, 1), append(a.texts(false), b.texts(false)...))
			require.Empty(t, b.texts(true), "no prompt after the resumption point to show")
			checkInvariants(t, evs)
		})
	}
}

func TestRemoteACPOpenPermissionIsAskedAgainAfterAReconnect(t *testing.T) {
	t.Parallel()
	d := newACPDeck(t)
	a := dialACP(t, d.acpURL(), d.operator) // leaves the request waiting
	res, err := a.conn.NewSession(ctxFor(t, 30*time.Second), acp.NewSessionRequest{Cwd: "/", McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	id := string(res.SessionId)
	msgID := signals.NewID()
	go func() { _, _ = a.promptID(id, msgID, "/permission edit") }()
	require.Eventually(t, func() bool { return a.askedCount() == 1 }, 60*time.Second, 10*time.Millisecond)
	// The SDK hands a notification and a request to their handlers concurrently: the seq a
	// resumes from is taken once a holds every update the journal has before the request.
	before := lastUpdateBeforeAsk(t, id)
	require.Eventually(t, func() bool { return a.lastSeq() >= before }, 60*time.Second, 10*time.Millisecond)
	seen := a.lastSeq()
	d.cut()

	b := dialACP(t, d.acpURL(), d.operator)
	b.mu.Lock()
	b.answer = allowOnce
	b.mu.Unlock()
	b.loadAfter(id, seen)
	r, err := b.promptID(id, msgID, "/permission edit")
	require.NoError(t, err)
	require.Equal(t, acp.StopReasonEndTurn, r.StopReason)
	require.Equal(t, 1, b.askedCount(), "the open request was asked again on the new socket")
	b.mu.Lock()
	require.Equal(t, a.asked[0].Meta, b.asked[0].Meta, "the same request (_meta.tacp.request_id)")
	b.mu.Unlock()
	evs := allEvents(t, id)
	require.Contains(t, agentTexts(t, evs, 1), "permission: selected allow")
	require.Equal(t, updateSeqs(evs, seen), b.seqs())
}

// lastUpdateBeforeAsk is the seq of session id's last agent update before its first
// permission request.
func lastUpdateBeforeAsk(t *testing.T, id string) int64 {
	t.Helper()
	var last int64
	for _, ev := range allEvents(t, id) {
		if ev.Kind == signals.EventPermissionRequested {
			return last
		}
		if ev.Kind == signals.EventAgentUpdate {
			last = ev.Seq
		}
	}
	t.Fatalf("session %s journaled no permission request", id)
	return 0
}

func TestRemoteACPObserverTokenCannotPrompt(t *testing.T) {
	t.Parallel()
	d := newACPDeck(t)
	op := dialACP(t, d.acpURL(), d.operator)
	res, err := op.conn.NewSession(ctxFor(t, 30*time.Second), acp.NewSessionRequest{Cwd: "/", McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	id := string(res.SessionId)

	obs := dialACP(t, d.acpURL(), d.observer)
	require.NoError(t, obs.load(id))
	before := len(allEvents(t, id))
	_, err = obs.prompt(id, "not allowed")
	requireRPCError(t, err, -32003)
	_, err = obs.conn.NewSession(ctxFor(t, 10*time.Second), acp.NewSessionRequest{Cwd: "/", McpServers: []acp.McpServer{}})
	requireRPCError(t, err, -32003)
	_, err = obs.conn.CallExtension(ctxFor(t, 10*time.Second), "_tacp/session.steer", map[string]any{"sessionId": id, "text": "x", "expectedTurnId": "1"})
	requireRPCError(t, err, -32003)
	require.Len(t, allEvents(t, id), before, "nothing reached the journal")

	// It still watches.
	_, err = op.prompt(id, "/chunks 3")
	require.NoError(t, err)
	want := agentTexts(t, allEvents(t, id), 1)
	require.Eventually(t, func() bool { return len(obs.texts(false)) == len(want) }, 30*time.Second, 10*time.Millisecond)
	require.Equal(t, want, obs.texts(false))
}

func TestRemoteACPBadTokenIsRefusedBeforeAnyACPMessage(t *testing.T) {
	t.Parallel()
	d := newACPDeck(t)
	for _, tok := range []string{"", "wrong-" + signals.NewID()} {
		hdr := http.Header{}
		if tok != "" {
			hdr.Set("Authorization", "Bearer "+tok)
		}
		ws, resp, err := websocket.Dial(ctxFor(t, 10*time.Second), d.acpURL(), &websocket.DialOptions{HTTPHeader: hdr})
		require.Error(t, err)
		require.Nil(t, ws)
		require.NotNil(t, resp)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		require.Empty(t, resp.Header.Get("Upgrade"), "no upgrade: not one ACP message can pass")
		body, _ := io.ReadAll(resp.Body)
		require.Contains(t, string(body), `"unauthorized"`)
	}
	// A page of another site cannot ride a browser's credentials onto the socket.
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+d.operator)
	hdr.Set("Origin", "https://elsewhere.invalid")
	_, resp, err := websocket.Dial(ctxFor(t, 10*time.Second), d.acpURL(), &websocket.DialOptions{HTTPHeader: hdr})
	require.Error(t, err)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

// Twenty observer sockets of one deck on one session are one viewer: one attach in the
// session's history, not twenty (each is an update: a billable action and history events),
// and every socket still watches. The last to leave detaches.
func TestRemoteACPManySocketsOfOneDeckAreOneViewer(t *testing.T) {
	t.Parallel()
	d := newACPDeck(t)
	op := dialACP(t, d.acpURL(), d.operator)
	res, err := op.conn.NewSession(ctxFor(t, 30*time.Second), acp.NewSessionRequest{Cwd: "/", McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	id := string(res.SessionId)
	var observers []*remotePeer
	for range 20 {
		o := dialACP(t, d.acpURL(), d.observer)
		require.NoError(t, o.load(id))
		observers = append(observers, o)
	}
	require.Equal(t, 1, updatesInHistory(t, id, "observer"), "one attach for the deck's observers")
	_, err = op.prompt(id, "/chunks 3")
	require.NoError(t, err)
	want := agentTexts(t, allEvents(t, id), 1)
	for _, o := range observers {
		require.Eventually(t, func() bool { return len(o.texts(false)) == len(want) }, 30*time.Second, 10*time.Millisecond)
	}
	for _, o := range observers {
		_ = o.ws.Close(websocket.StatusNormalClosure, "")
	}
	require.Eventually(t, func() bool {
		st, err := sc.Status(ctxFor(t, 10*time.Second), id)
		require.NoError(t, err)
		for _, v := range st.Viewers {
			if v.Role == signals.RoleObserver {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "the last observer socket out detached the deck's observer")
}

// A client that calls itself "deck:alice" on bob's token is journaled as bob, with the name
// it gave only as the client's: prompt.accepted's by and the permission's answered_by.
func TestRemoteACPJournalsThePersonOfTheTokenNotTheClientsWord(t *testing.T) {
	t.Parallel()
	secret := "bob-" + signals.NewID()
	gw := gateway.New(gateway.Options{Client: sc, Agent: gatewayAgent(), IgnoreClientCwd: true})
	h, err := deck.New(deck.Options{Client: sc, ControllerTokens: []string{"bob=" + secret}, Gateway: gw})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })

	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+secret)
	ws, _, err := websocket.Dial(ctxFor(t, 30*time.Second), "ws"+strings.TrimPrefix(srv.URL, "http")+"/acp", &websocket.DialOptions{HTTPHeader: hdr})
	require.NoError(t, err)
	life, cancel := context.WithCancel(context.Background())
	st := wsline.New(life, ws)
	p := &acpPeer{t: t, answer: allowOnce}
	p.conn = acp.NewClientSideConnection(p, st, st)
	t.Cleanup(func() { _ = ws.CloseNow(); cancel() })
	_, err = p.conn.Initialize(ctxFor(t, 30*time.Second), acp.InitializeRequest{
		ProtocolVersion: acp.ProtocolVersionNumber, ClientInfo: &acp.Implementation{Name: "deck:alice", Version: "1.0"},
	})
	require.NoError(t, err)
	res, err := p.conn.NewSession(ctxFor(t, 30*time.Second), acp.NewSessionRequest{Cwd: "/a/laptop/path", McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	id := string(res.SessionId)
	r, err := p.prompt(id, "/permission edit")
	require.NoError(t, err)
	require.Equal(t, acp.StopReasonEndTurn, r.StopReason)

	var by []string
	for _, ev := range allEvents(t, id) {
		var d struct {
			By         string `json:"by"`
			AnsweredBy string `json:"answered_by"`
		}
		switch ev.Kind {
		case signals.EventPromptAccepted, signals.EventPermissionResolved:
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			by = append(by, d.By+d.AnsweredBy)
		}
	}
	require.Len(t, by, 2)
	for _, b := range by {
		require.True(t, strings.HasPrefix(b, "deck:bob (acp:deck:alice 1.0, viewer acp-"), b)
	}
}

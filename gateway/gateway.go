// Package gateway is tacp's ACP face (contract §8): an ACP agent over stdio that an editor
// (Zed, acpx, any ACP client) starts as its agent, and that maps every ACP call onto a
// durable tacp session through tacpclient.Client.
//
// The ACP session id is the tacp session id. session/new starts a session workflow,
// session/load replays its journal as session/update notifications and then goes live,
// session/resume goes live without the replay, session/list reads visibility. A
// session/prompt sends the prompt update and answers when that turn's terminal event is in
// the journal, with its stop reason; a second prompt while one runs queues behind it.
// session/cancel cancels the live turn. The agent's permission requests are relayed to every
// attached controller and the first valid answer wins; _session/steering and
// _tacp/session.steer steer the running turn. A client that goes away detaches (the
// session's grace window starts); it never cancels anything.
//
// Everything a client sees comes from the journal, so a client that closes mid-turn and
// loads the session again sees the whole turn, and any number of clients can watch. Every
// session/update carries the seq of its journal event in _meta.tacp.seq, and session/load
// or session/resume with _meta.tacp.after_seq replays exactly the events after it
// (signals.ACPMeta): a client that reconnects resumes where it stopped.
//
// Serve speaks over a stdio pair (`starter acp`); ServeConn over any line stream, one
// connection at a time with its own role — the deck serves it on a WebSocket at /acp.
package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

// Options configures a Gateway.
type Options struct {
	// Client reaches the sessions.
	Client *tacpclient.Client
	// Session, when set, is the id session/new uses (creating the session or attaching to
	// it if it runs), so that an editor that only knows session/new still gets one durable
	// session. Empty: every session/new starts a new session "acp-<random>".
	Session string
	// Observe attaches every session as an observer: the client sees everything and can
	// neither prompt, steer, cancel nor answer permission requests.
	Observe bool
	// Agent and Workspace configure sessions that session/new creates (empty: the
	// worker's). An empty Workspace takes the client's cwd.
	Agent, Workspace string
	// IgnoreClientCwd keeps the client's cwd out of new sessions: remote clients (the deck's
	// /acp) name a directory of their own machine, not of the worker's, so an empty
	// Workspace leaves the worker's default.
	IgnoreClientCwd bool
	// PromptCapabilities, when set, override what initialize advertises of the content
	// blocks the agent behind the sessions takes besides text and resource links (by
	// default what the workers learned of it, capabilities.go), and what prompts may carry.
	PromptCapabilities *acp.PromptCapabilities
	// McpCapabilities, when set, override what initialize advertises of the MCP transports
	// (http, sse) the agent connects to (by default what the workers learned of it, narrowed
	// to what their MCP policy takes).
	McpCapabilities *acp.McpCapabilities
	// PollFast is the pause before a failed events query is tried again (doubling, up to
	// 5 s). Default 50 ms. Events are queried when the session's history grows, and at least
	// every Client.SafetyPoll.
	PollFast time.Duration
	// Lease is the viewer lease of an attached client, renewed while it is connected; a
	// client that vanishes without a detach (kill -9) counts as gone when it lapses.
	// Default 2 m.
	Lease time.Duration
	// FirstMessageTimeout bounds how long a connection may go without its first ACP
	// message (initialize, or any request a resuming client starts with): one that never
	// speaks ACP, a socket opened and left or one that sends only what is not JSON-RPC, is
	// closed after it. Default 30 s.
	FirstMessageTimeout time.Duration
	// Logger gets the gateway's diagnostics (never prompt text). Default: discard.
	Logger *slog.Logger
}

// ErrSilent is what ServeConn returns when its client sent no ACP message within
// Options.FirstMessageTimeout.
var ErrSilent = errors.New("gateway: the client sent no ACP message in time")

// Gateway serves ACP connections. One Gateway may serve many connections; they share one
// events poller per session.
type Gateway struct {
	o   Options
	hub *hub
	// id names the gateway's viewers: its connections are one viewer per role (leases.go).
	id     string
	leases leases
}

// New returns a Gateway with o's defaults filled in.
func New(o Options) *Gateway {
	if o.PollFast <= 0 {
		o.PollFast = 50 * time.Millisecond
	}
	if o.Lease <= 0 {
		o.Lease = 2 * time.Minute
	}
	if o.FirstMessageTimeout <= 0 {
		o.FirstMessageTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Gateway{o: o, hub: newHub(clientSource{o.Client}, o.PollFast, o.Logger), id: signals.NewID()[:12]}
}

// ConnOptions configure one connection of ServeConn.
type ConnOptions struct {
	// Observe attaches this connection's sessions as an observer (Options.Observe makes
	// every connection one): the deck's observer tokens.
	Observe bool
	// Person is who the connection acts for, as whoever accepted it authenticated them (the
	// deck's named token: "deck:alice"). The journal's by and answered_by name the person,
	// and the client only as the client: what a client says of itself in initialize is its
	// own word, never a person. Empty: the client's word is all there is.
	Person string
	// Identity is the person the connection's door authenticated, whose sessions it may
	// see and act on (signals.RoleFor; access.go), and the owner of the sessions it
	// creates. Nil: the connection stands for the deployment and has its role on every
	// session.
	Identity *signals.Identity
	// Sharing is the door's rule for a session that names none (signals.SharingPrivate, …).
	Sharing string
}

// Serve speaks ACP as the agent on one connection (in: what the client writes, out: what it
// reads) until the client closes its end or ctx ends. On return every session the
// connection attached is detached.
func (g *Gateway) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	return g.ServeConn(ctx, in, out, ConnOptions{})
}

// ServeConn is Serve with options for this one connection. in carries newline-delimited
// JSON-RPC messages and every Write to out is one whole message and its newline: a
// transport that frames messages (a WebSocket) maps them one to one.
func (g *Gateway) ServeConn(ctx context.Context, in io.Reader, out io.Writer, co ConnOptions) error {
	w := &lineWriter{w: out}
	pr, pw := io.Pipe()
	go filterInput(in, pw, w)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := newConn(ctx, g, w, g.o.Observe || co.Observe)
	c.person = co.Person
	c.ident, c.sharing = co.Identity, co.Sharing
	// What reaches the SDK has passed filterInput: a JSON-RPC message.
	sdkIn := &firstRead{r: pr}
	asc := acp.NewAgentSideConnection(c, w, sdkIn)
	asc.SetLogger(g.o.Logger)
	c.asc = asc
	var silent atomic.Bool
	t := time.AfterFunc(g.o.FirstMessageTimeout, func() {
		if !sdkIn.read.Load() {
			silent.Store(true)
			cancel()
		}
	})
	defer t.Stop()
	select {
	case <-asc.Done():
	case <-ctx.Done():
	}
	_ = pr.Close()
	c.close()
	if silent.Load() {
		g.o.Logger.Info("acp connection closed: no ACP message", "within", g.o.FirstMessageTimeout)
		return ErrSilent
	}
	return nil
}

// firstRead is a reader that notes when it first hands out bytes.
type firstRead struct {
	r    io.Reader
	read atomic.Bool
}

func (f *firstRead) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if n > 0 {
		f.read.Store(true)
	}
	return n, err
}

// Polls returns how many events queries the gateway has sent (for tests and benchmarks).
func (g *Gateway) Polls() int64 { return g.hub.pollCount() }

// Feeds returns how many sessions the gateway polls right now.
func (g *Gateway) Feeds() int { return g.hub.feedCount() }

// Package gateway is tacp's ACP face (DESIGN §8): an ACP agent over stdio that an editor
// (Zed, acpx, any ACP client) starts as its agent, and that maps every ACP call onto a
// durable tacp session through signals.Client.
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
// loads the session again sees the whole turn, and any number of clients can watch.
package gateway

import (
	"context"
	"io"
	"log/slog"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

// Options configures a Gateway.
type Options struct {
	// Client reaches the sessions.
	Client *signals.Client
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
	// PromptCapabilities are advertised in initialize: the content blocks the agent behind
	// the sessions takes besides text and resource links.
	PromptCapabilities acp.PromptCapabilities
	// PollFast is the pause before a failed events query is tried again (doubling, up to
	// 5 s). Default 50 ms. Events are queried when the session's history grows, and at least
	// every Client.SafetyPoll.
	PollFast time.Duration
	// Lease is the viewer lease of an attached client, renewed while it is connected; a
	// client that vanishes without a detach (kill -9) counts as gone when it lapses.
	// Default 2 m.
	Lease time.Duration
	// Logger gets the gateway's diagnostics (never prompt text). Default: discard.
	Logger *slog.Logger
}

// Gateway serves ACP connections. One Gateway may serve many connections; they share one
// events poller per session.
type Gateway struct {
	o   Options
	hub *hub
}

// New returns a Gateway with o's defaults filled in.
func New(o Options) *Gateway {
	if o.PollFast <= 0 {
		o.PollFast = 50 * time.Millisecond
	}
	if o.Lease <= 0 {
		o.Lease = 2 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Gateway{o: o, hub: newHub(clientSource{o.Client}, o.PollFast, o.Logger)}
}

// Serve speaks ACP as the agent on one connection (in: what the client writes, out: what it
// reads) until the client closes its end or ctx ends. On return every session the
// connection attached is detached.
func (g *Gateway) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	w := &lineWriter{w: out}
	pr, pw := io.Pipe()
	go filterInput(in, pw, w)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := newConn(ctx, g, w)
	asc := acp.NewAgentSideConnection(c, w, pr)
	asc.SetLogger(g.o.Logger)
	c.asc = asc
	select {
	case <-asc.Done():
	case <-ctx.Done():
	}
	_ = pr.Close()
	c.close()
	return nil
}

// Polls returns how many events queries the gateway has sent (for tests and benchmarks).
func (g *Gateway) Polls() int64 { return g.hub.pollCount() }

// Feeds returns how many sessions the gateway polls right now.
func (g *Gateway) Feeds() int { return g.hub.feedCount() }

package gateway

// conn is one ACP connection: the acp.Agent the SDK calls, and for every session the client
// attached, an attachment that turns the journal into what this client sees.

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
	"github.com/tacp-dev/tacp/tacpclient"
)

type conn struct {
	ctx    context.Context // the connection's life
	g      *Gateway
	w      *lineWriter
	asc    *acp.AgentSideConnection
	viewer string
	role   string
	person string // ConnOptions.Person

	mu       sync.Mutex
	sessions map[string]*attachment
	closed   bool
	// offer is what initialize advertised of the agent (capabilities.go): prompts may
	// carry the content blocks it names.
	offer agentOffer
	// peer is what the client said of itself in initialize (elicitation.go).
	peer peer
	// ident is the person a door authenticated (nil: the connection stands for the
	// deployment) and sharing the door's rule for sessions that name none (access.go).
	ident   *signals.Identity
	sharing string
}

func newConn(ctx context.Context, g *Gateway, w *lineWriter, observe bool) *conn {
	role := signals.RoleController
	if observe {
		role = signals.RoleObserver
	}
	return &conn{ctx: ctx, g: g, w: w, viewer: g.viewerFor(role), role: role, sessions: map[string]*attachment{}}
}

func (c *conn) observer() bool { return c.role == signals.RoleObserver }

func (c *conn) client() *tacpclient.Client { return c.g.o.Client }

// callCtx bounds one call to the session on behalf of a request. It does not end with the
// request: the SDK cancels a prompt's context when a second prompt or a session/cancel
// arrives, and neither must abandon an update half sent.
func (c *conn) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// --- acp.Agent ---

// ProtocolVersion is the ACP version tacp speaks to clients: 1, the stable protocol. A
// client that asks for a newer one (a draft 2) is answered 1, as the protocol has an agent
// answer the latest version it supports; one that cannot speak 1 closes the connection.
const ProtocolVersion = 1

func (c *conn) Initialize(ctx context.Context, req acp.InitializeRequest) (acp.InitializeResponse, error) {
	steering := map[string]any{"steering": map[string]any{"supported": true}}
	offer := c.learnOffer(ctx)
	c.mu.Lock()
	c.offer = offer
	c.peer = peerOf(req) // what it can be asked, and who answers (elicitation.go)
	c.mu.Unlock()
	auth := offer.auth
	if auth == nil {
		auth = []acp.AuthMethod{}
	}
	return acp.InitializeResponse{
		ProtocolVersion: ProtocolVersion,
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession:        true,
			PromptCapabilities: offer.prompt,
			SessionCapabilities: acp.SessionCapabilities{
				List:   &acp.SessionListCapabilities{},
				Resume: &acp.SessionResumeCapabilities{},
				Close:  &acp.SessionCloseCapabilities{},
				Fork:   &acp.SessionForkCapabilities{},
			},
			McpCapabilities: offer.mcp,
			Meta:            steering,
		},
		AgentInfo:   &acp.Implementation{Name: "tacp", Title: ptr("tacp (durable sessions on Temporal)"), Version: "1"},
		AuthMethods: auth,
		Meta:        steering,
	}, nil
}

// Authenticate is refused with what the worker's operator must set: tacp advertises only
// the auth methods the worker cannot complete by itself (an agent whose key the worker
// holds needs no client), and none a client completes reaches the agent on the worker.
func (c *conn) Authenticate(_ context.Context, p acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	c.mu.Lock()
	methods := c.offer.auth
	c.mu.Unlock()
	return acp.AuthenticateResponse{}, authenticateRefusal(methods, p.MethodId)
}

func (c *conn) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	if c.observer() {
		return acp.NewSessionResponse{}, forbidden("create sessions")
	}
	id := c.g.o.Session
	if id == "" {
		id = "acp-" + signals.NewID()
	}
	cfg := c.owned(signals.SessionConfig{SessionID: id, Agent: c.g.o.Agent, Workspace: c.g.o.Workspace, Policy: metaPolicy(p.Meta)})
	if cfg.Workspace == "" && !c.g.o.IgnoreClientCwd {
		cfg.Workspace = p.Cwd
	}
	if len(p.McpServers) > 0 {
		// Kept in the session's config (encrypted with its payloads when the codec is on);
		// the worker's MCP policy refuses what it does not allow, before anything is stored.
		raw, err := json.Marshal(p.McpServers)
		if err != nil {
			return acp.NewSessionResponse{}, invalidParams("mcpServers: %v", err)
		}
		cfg.McpServers = raw
	}
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	// A fixed --session may already have a journal: the client starts from its end.
	_, at, err := c.attachStarting(cctx, id, noReplay, &cfg)
	if err != nil {
		return acp.NewSessionResponse{}, err
	}
	modes, opts := c.sessionOffer(cctx, id)
	if modes == nil && opts == nil {
		// The session's agent has not run yet: the profile's offer in a new session, as
		// the worker learned it, so the editor's mode picker is not empty.
		c.mu.Lock()
		modes, opts = offerOf(c.offer.settings)
		c.mu.Unlock()
	}
	return acp.NewSessionResponse{SessionId: acp.SessionId(id), Meta: at.meta(), Modes: modes, ConfigOptions: opts}, nil
}

// UnstableForkSession answers session/fork: a new durable session whose agent starts from
// this one's conversation (tacpclient.Client.Fork; _meta.tacp.before_turn takes it before that
// turn), attached like session/new's. The origin's agent session is not forked on the
// agent: tacp carries the conversation from its journal, as it does to any new agent.
//
// The fork works in the client's cwd, as session/new does, whose files are the client's and
// stay as they are; _meta.tacp.own_workspace: true gives it a folder of its own on the
// worker instead, which its first turn fills with the files of the fork point from the
// workspace checkpoints: a rewind of conversation and files together.
func (c *conn) UnstableForkSession(ctx context.Context, p acp.UnstableForkSessionRequest) (acp.UnstableForkSessionResponse, error) {
	if c.observer() {
		return acp.UnstableForkSessionResponse{}, forbidden("fork sessions")
	}
	before, err := metaBeforeTurn(p.Meta)
	if err != nil {
		return acp.UnstableForkSessionResponse{}, err
	}
	own, err := metaOwnWorkspace(p.Meta)
	if err != nil {
		return acp.UnstableForkSessionResponse{}, err
	}
	req := signals.ForkRequest{BeforeTurn: before, Workspace: c.g.o.Workspace}
	if req.Workspace == "" && !c.g.o.IgnoreClientCwd && !own {
		req.Workspace = p.Cwd
	}
	if len(p.McpServers) > 0 {
		raw, err := json.Marshal(p.McpServers)
		if err != nil {
			return acp.UnstableForkSessionResponse{}, invalidParams("mcpServers: %v", err)
		}
		req.McpServers = raw
	}
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	if _, err := c.mayWatch(cctx, string(p.SessionId)); err != nil {
		return acp.UnstableForkSessionResponse{}, err
	}
	if c.ident != nil {
		req.Owner = c.ident.Name
	}
	cfg, err := c.client().Fork(cctx, string(p.SessionId), req)
	if err != nil {
		return acp.UnstableForkSessionResponse{}, rpcErr(err)
	}
	_, at, err := c.attachStarting(cctx, cfg.SessionID, noReplay, nil)
	if err != nil {
		return acp.UnstableForkSessionResponse{}, err
	}
	modes, opts := c.sessionOffer(cctx, cfg.SessionID)
	res := acp.UnstableForkSessionResponse{SessionId: acp.SessionId(cfg.SessionID), Meta: at.meta(), Modes: modes}
	if raw, err := json.Marshal(opts); err == nil && len(opts) > 0 {
		_ = json.Unmarshal(raw, &res.ConfigOptions) // the same options, as the unstable type names them
	}
	return res, nil
}

// metaBeforeTurn reads session/fork's _meta.tacp.before_turn (0 when absent).
func metaBeforeTurn(meta map[string]any) (int64, error) {
	t, _ := meta["tacp"].(map[string]any)
	v, ok := t["before_turn"]
	if !ok {
		return 0, nil
	}
	n, ok := v.(float64)
	if !ok || n < 0 || n != float64(int64(n)) {
		return 0, invalidParams("_meta.tacp.before_turn: want a turn number, got %v", v)
	}
	return int64(n), nil
}

// metaOwnWorkspace reads session/fork's _meta.tacp.own_workspace (false when absent).
func metaOwnWorkspace(meta map[string]any) (bool, error) {
	t, _ := meta["tacp"].(map[string]any)
	v, ok := t["own_workspace"]
	if !ok {
		return false, nil
	}
	own, ok := v.(bool)
	if !ok {
		return false, invalidParams("_meta.tacp.own_workspace: want true or false, got %v", v)
	}
	return own, nil
}

// metaPolicy is the permission level a client asks for a new session in
// session/new's _meta.tacp.policy ("" : the default). The worker validates it.
func metaPolicy(meta map[string]any) string {
	t, _ := meta["tacp"].(map[string]any)
	level, _ := t["policy"].(string)
	return level
}

// LoadSession replays the journal (after _meta.tacp.after_seq when the client names one),
// then goes live.
func (c *conn) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	after, err := writeAfter(p.Meta, 0)
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	role, err := c.mayWatch(cctx, string(p.SessionId))
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	if role == signals.RoleController {
		if err := c.setMcpServers(cctx, string(p.SessionId), p.McpServers); err != nil {
			return acp.LoadSessionResponse{}, err
		}
	}
	_, at, err := c.attach(cctx, string(p.SessionId), after)
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	modes, opts := c.sessionOffer(cctx, string(p.SessionId))
	return acp.LoadSessionResponse{Meta: at.meta(), Modes: modes, ConfigOptions: opts}, nil
}

// ResumeSession goes live without a replay, or after _meta.tacp.after_seq when the client
// names one.
func (c *conn) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	after, err := writeAfter(p.Meta, noReplay)
	if err != nil {
		return acp.ResumeSessionResponse{}, err
	}
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	role, err := c.mayWatch(cctx, string(p.SessionId))
	if err != nil {
		return acp.ResumeSessionResponse{}, err
	}
	if role == signals.RoleController {
		if err := c.setMcpServers(cctx, string(p.SessionId), p.McpServers); err != nil {
			return acp.ResumeSessionResponse{}, err
		}
	}
	_, at, err := c.attach(cctx, string(p.SessionId), after)
	if err != nil {
		return acp.ResumeSessionResponse{}, err
	}
	modes, opts := c.sessionOffer(cctx, string(p.SessionId))
	return acp.ResumeSessionResponse{Meta: at.meta(), Modes: modes, ConfigOptions: opts}, nil
}

// setMcpServers makes the MCP servers a controller's session/load or session/resume names
// the session's (an editor sends its project's every time, and expects them used, as
// session/new's): the worker's MCP policy refuses what it does not allow, and the load
// fails with its reason, changing nothing. An observer's, or a request that names none (mcpServers absent),
// changes nothing.
func (c *conn) setMcpServers(ctx context.Context, id string, servers []acp.McpServer) error {
	if c.observer() || servers == nil {
		return nil
	}
	raw, err := json.Marshal(servers)
	if err != nil {
		return invalidParams("mcpServers: %v", err)
	}
	_, err = c.client().SetMcpServers(ctx, id, signals.SetMcpServersRequest{McpServers: raw, ViewerID: c.viewer})
	// Only the policy's refusal fails the load: a closed or unknown session is attach's to
	// answer (a closed one still replays its journal).
	if rej, ok := rejection.As(err); ok && rej.Type == signals.RejectInvalidRequest {
		return rpcErr(err)
	}
	if err != nil {
		c.g.o.Logger.Debug("set_mcp_servers on load", "session", id, "error", err)
	}
	return nil
}

// writeAfter is the seq after which a load or resume writes the journal: _meta.tacp.after_seq
// when the client names one, otherwise def.
func writeAfter(meta map[string]any, def int64) (int64, error) {
	m, err := signals.ACPMetaOf(meta)
	if err != nil {
		return 0, invalidParams("%v", err)
	}
	if m.AfterSeq == nil {
		return def, nil
	}
	return *m.AfterSeq, nil
}

func (c *conn) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	rpcID := rpcIDOf(p.Meta)
	defer c.w.prompts.drop(rpcID)
	if c.observer() {
		return acp.PromptResponse{}, forbidden("prompt")
	}
	c.mu.Lock()
	caps := c.offer.prompt
	c.mu.Unlock()
	text, content, err := promptText(p.Prompt, caps)
	if err != nil {
		return acp.PromptResponse{}, invalidParams("%v", err)
	}
	id := string(p.SessionId)
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	if err := c.mayAct(cctx, id, "prompt"); err != nil {
		return acp.PromptResponse{}, err
	}
	a, err := c.attached(cctx, id)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	msgID := signals.NewID()
	if p.MessageId != nil && *p.MessageId != "" {
		msgID = *p.MessageId // the client's id makes a retried prompt idempotent
	}
	a.markMine(msgID)
	done := a.sub.hurry()
	defer done()
	res, err := c.client().Prompt(cctx, signals.SessionConfig{SessionID: id}, signals.PromptRequest{
		Text: text, Content: content, ClientMessageID: msgID, ViewerID: c.viewer, By: c.answeredBy(),
	})
	if err != nil {
		return acp.PromptResponse{}, rpcErr(err)
	}
	c.w.prompts.bind(rpcID, func() { go c.cancelTurn(id, res.TurnID) })
	select {
	case o := <-a.wait(res.TurnID):
		if o.err != nil {
			return acp.PromptResponse{}, o.err
		}
		// userMessageId (unstable in ACP v1) echoes the client's messageId: a client that sent
		// none gets none.
		var echo *string
		if p.MessageId != nil && *p.MessageId != "" {
			echo = &msgID
		}
		return acp.PromptResponse{StopReason: o.stop, UserMessageId: echo}, nil
	case <-c.ctx.Done():
		return acp.PromptResponse{}, errors.New("connection closed")
	}
}

func (c *conn) Cancel(ctx context.Context, p acp.CancelNotification) error {
	if c.observer() {
		c.g.o.Logger.Info("session/cancel from an observer ignored", "session", p.SessionId)
		return nil
	}
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	if err := c.mayAct(cctx, string(p.SessionId), "cancel"); err != nil {
		c.g.o.Logger.Info("session/cancel refused", "session", p.SessionId, "err", err)
		return nil
	}
	_, err := c.client().Cancel(cctx, string(p.SessionId), signals.CancelRequest{ViewerID: c.viewer, By: c.answeredBy()})
	if rej, ok := rejection.As(err); ok && rej.Type == signals.RejectNoLiveTurn {
		return nil // nothing runs: the cancel has nothing to do
	}
	return rpcErr(err)
}

// cancelTurn cancels turn of session id ($/cancel_request on its prompt). A turn that has
// not started yet (queued behind another) or has ended is not running: nothing is done.
func (c *conn) cancelTurn(id string, turn int64) {
	cctx, cancel := c.callCtx(c.ctx)
	defer cancel()
	_, err := c.client().Cancel(cctx, id, signals.CancelRequest{TurnID: turn, ViewerID: c.viewer, By: c.answeredBy()})
	if err != nil {
		c.g.o.Logger.Info("$/cancel_request: the prompt's turn was not cancelled", "session", id, "turn", turn, "error", err)
	}
}

// --- attachments ---

// attached returns the attachment of session id, attaching without replay if the client
// prompts a session it did not load (it knows the id from elsewhere).
func (c *conn) attached(ctx context.Context, id string) (*attachment, error) {
	c.mu.Lock()
	a := c.sessions[id]
	c.mu.Unlock()
	if a != nil {
		return a, nil
	}
	a, _, err := c.attach(ctx, id, noReplay)
	return a, err
}

// attach attaches the connection to session id as a viewer, reads the journal (writing the
// events after writeAfter to the client as session/update notifications), and goes live.
func (c *conn) attach(ctx context.Context, id string, writeAfter int64) (*attachment, caughtUp, error) {
	return c.attachStarting(ctx, id, writeAfter, nil)
}

// attachStarting is attach that first starts the session with cfg when cfg is set (the
// worker's refusal of cfg is the answer then).
func (c *conn) attachStarting(ctx context.Context, id string, writeAfter int64, cfg *signals.SessionConfig) (*attachment, caughtUp, error) {
	c.mu.Lock()
	if a := c.sessions[id]; a != nil || c.closed {
		c.mu.Unlock()
		if a == nil {
			return nil, caughtUp{}, errors.New("connection closed")
		}
		return a, caughtUp{}, nil // attached already; a second load does not replay twice
	}
	c.mu.Unlock()
	role := c.role // a session the connection creates is its person's
	if cfg == nil {
		var err error
		if role, err = c.mayWatch(ctx, id); err != nil {
			return nil, caughtUp{}, err
		}
	}
	c.mu.Lock()
	if a := c.sessions[id]; a != nil || c.closed {
		c.mu.Unlock()
		if a == nil {
			return nil, caughtUp{}, errors.New("connection closed")
		}
		return a, caughtUp{}, nil
	}
	a := newAttachment(c, id)
	a.watchOnly = role != signals.RoleController
	// A person who may only watch watches as an observer: their lease does not count for
	// the session's grace window, whatever their token's role.
	a.role = c.role
	if a.watchOnly {
		a.role = signals.RoleObserver
	}
	c.sessions[id] = a
	c.mu.Unlock()
	// forget undoes the registration; it reports whether the lease is still this
	// attachment's to release (close claims it otherwise).
	forget := func() (held bool) {
		c.mu.Lock()
		held, a.held = a.held, false
		delete(c.sessions, id)
		c.mu.Unlock()
		return held
	}

	lease := int(c.g.o.Lease / time.Second)
	req := signals.AttachRequest{ViewerID: c.g.viewerFor(a.role), Role: a.role, LeaseSeconds: lease}
	err := c.holdLease(ctx, id, a.role, func() error {
		var err error
		if cfg != nil {
			_, err = c.client().Start(ctx, *cfg, req)
		} else {
			_, err = c.client().Attach(ctx, id, req)
		}
		return err
	})
	if err != nil {
		forget()
		return nil, caughtUp{}, rpcErr(err)
	}
	c.mu.Lock()
	closed := c.closed
	a.held = !closed
	c.mu.Unlock()
	if closed { // closed while it attached: close saw no lease to release
		c.releaseLease(id, a.role, true)
		return nil, caughtUp{}, errors.New("connection closed")
	}

	at, err := a.catchUp(ctx, writeAfter)
	if err != nil {
		if forget() {
			c.releaseLease(id, a.role, true)
		}
		return nil, caughtUp{}, rpcErr(err)
	}
	a.goLive()
	return a, at, nil
}

// close detaches every session of the connection: their grace windows start.
func (c *conn) close() {
	c.mu.Lock()
	c.closed = true
	all := make([]*attachment, 0, len(c.sessions))
	held := map[*attachment]bool{}
	for _, a := range c.sessions {
		all = append(all, a)
		held[a], a.held = a.held, false // close releases what it finds held
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, a := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.stop()
			if held[a] {
				c.releaseLease(a.id, a.role, true)
			}
		}()
	}
	wg.Wait()
}

func ptr[T any](v T) *T { return &v }

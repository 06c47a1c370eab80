package activities

// The host: one per worker process. It keeps each session's agent process alive between
// turns (idle time-to-live, a cap on live agents evicting the least recently used idle
// one), journals what an agent says between turns, and registers the turns running here so
// that the Deliver activity, polled on this worker's own task queue, can carry the
// workflow's decisions (steer, cancel, permission answers) into them within milliseconds.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tacp-dev/tacp/signals"
)

// Host defaults, sized for real agents: claude-agent-acp holds ~280 MiB of RSS per live
// process (the test agent ~5 MiB), so 8 live agents are ~2.2 GiB, what a laptop or a small
// worker host spares; 64 were ~18 GiB. An agent idle 10 minutes is stopped: a person back
// later pays one agent start and session/load (seconds) instead of every idle session
// holding its agent for half an hour. Busy agents are never evicted: past the cap, a turn
// still gets its agent once no idle one is left to stop.
const (
	DefaultIdleTTL   = 10 * time.Minute
	DefaultMaxAgents = 8
)

// ErrTurnNotHere is the ApplicationError type of a delivery for a turn this host does not
// run (it ended, or it runs elsewhere after a failover).
const ErrTurnNotHere = "turn_not_here"

// Host hosts agent processes and running turns for one worker.
type Host struct {
	// Queue is this worker's own task queue, on which Deliver is polled.
	Queue     string
	IdleTTL   time.Duration
	MaxAgents int
	Client    client.Client
	Logger    *slog.Logger
	// FlushInterval and FlushBytes configure the batching of events between turns.
	FlushInterval time.Duration
	FlushBytes    int

	mu     sync.Mutex
	agents map[string]*hostedAgent // by tacp session id
	turns  map[turnKey]*liveTurn
	seq    int
	// starting counts agents between the cap check and their registration.
	starting int
	done     chan struct{}
	once     sync.Once
}

type turnKey struct {
	session string
	turn    int64
}

// hostedAgent is one session's agent process.
type hostedAgent struct {
	id         string // unique on this host: the between-turn batches' key
	sessionID  string
	key        string // argv and workspace: another agent or workspace means a new process
	proc       *agentProc
	client     *hostClient
	acpSession acp.SessionId
	// offer is what acpSession offers (settings.go), nil until it is opened.
	// It is set while the agent's updates are read (the tap reads it): atomic.
	offer atomic.Pointer[agentOffer]
	// mcpKey is the JSON of the MCP servers acpSession was opened with.
	mcpKey   []byte
	busy     bool
	lastUsed time.Time
	between  *batcher
}

// Start starts the idle reaper. Close stops it and every agent.
func (h *Host) Start() {
	h.init()
	go h.reap()
}

func (h *Host) init() {
	h.once.Do(func() {
		if h.IdleTTL <= 0 {
			h.IdleTTL = DefaultIdleTTL
		}
		if h.MaxAgents <= 0 {
			h.MaxAgents = DefaultMaxAgents
		}
		if h.Logger == nil {
			h.Logger = slog.New(slog.DiscardHandler)
		}
		if h.FlushInterval <= 0 {
			h.FlushInterval = DefaultFlushInterval
		}
		if h.FlushBytes <= 0 {
			h.FlushBytes = DefaultFlushBytes
		}
		h.agents = map[string]*hostedAgent{}
		h.turns = map[turnKey]*liveTurn{}
		h.done = make(chan struct{})
	})
}

// Close stops every agent process.
func (h *Host) Close() {
	h.init()
	h.mu.Lock()
	select {
	case <-h.done:
	default:
		close(h.done)
	}
	agents := h.agents
	h.agents = map[string]*hostedAgent{}
	h.mu.Unlock()
	for _, a := range agents {
		a.shutdown(2 * time.Second)
	}
}

// reap stops agents idle past IdleTTL.
func (h *Host) reap() {
	t := time.NewTicker(max(h.IdleTTL/4, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-h.done:
			return
		case <-t.C:
		}
		var stale []*hostedAgent
		h.mu.Lock()
		for id, a := range h.agents {
			if !a.busy && (time.Since(a.lastUsed) > h.IdleTTL || !a.proc.alive()) {
				stale = append(stale, a)
				delete(h.agents, id)
			}
		}
		h.mu.Unlock()
		for _, a := range stale {
			h.Logger.Info("stopping idle agent", "session", a.sessionID, "pid", a.proc.cmd.Process.Pid)
			a.shutdown(2 * time.Second)
		}
	}
}

// AgentPID returns the pid of a session's agent process on this host (0: none).
func (h *Host) AgentPID(sessionID string) int {
	h.init()
	h.mu.Lock()
	defer h.mu.Unlock()
	if a, ok := h.agents[sessionID]; ok && a.proc.alive() {
		return a.proc.cmd.Process.Pid
	}
	return 0
}

// acquire returns the session's agent, started and initialized, marked busy. A live idle
// agent of the same command and workspace is reused; anything else is replaced.
func (h *Host) acquire(ctx context.Context, sessionID string, argv, env []string, dir string, sandbox *Sandbox) (*hostedAgent, error) {
	h.init()
	key := fmt.Sprintf("%q in %s", argv, dir)
	h.mu.Lock()
	if a, ok := h.agents[sessionID]; ok {
		if !a.busy && a.key == key && a.proc.alive() {
			a.busy = true
			h.mu.Unlock()
			return a, nil
		}
		// A different agent, a dead process, or a zombie attempt still holding it.
		delete(h.agents, sessionID)
		go a.shutdown(2 * time.Second)
	}
	var evict *hostedAgent
	// Agents still starting count: turns that start together must not all pass the cap.
	if len(h.agents)+h.starting >= h.MaxAgents {
		evict = h.lruIdleLocked()
		if evict != nil {
			delete(h.agents, evict.sessionID)
		}
	}
	h.seq++
	id := h.Queue + "/" + strconv.Itoa(h.seq)
	h.starting++
	h.mu.Unlock()
	started := false
	defer func() {
		if !started {
			h.mu.Lock()
			h.starting--
			h.mu.Unlock()
		}
	}()
	if evict != nil {
		h.Logger.Info("evicting least recently used idle agent", "session", evict.sessionID)
		evict.shutdown(2 * time.Second)
	}

	log := h.Logger.With("session", sessionID)
	hc := &hostClient{log: log, sandbox: sandbox}
	proc, err := startAgent(argv, env, dir, hc, log)
	if err != nil {
		return nil, err
	}
	a := &hostedAgent{id: id, sessionID: sessionID, key: key, proc: proc, client: hc, busy: true}
	if err := proc.initialize(ctx); err != nil {
		select { // an agent that died says more by its exit than by the broken pipe
		case <-proc.exited:
			err = fmt.Errorf("%w before answering initialize", proc.exitErr())
		case <-time.After(100 * time.Millisecond):
			if ctx.Err() != nil {
				err = errors.New("agent did not answer initialize in time")
			}
		}
		proc.stop(0)
		return nil, err
	}
	// What the agent says between turns goes to the session as turn_events of turn 0.
	wfID := signals.SessionWorkflowID(sessionID)
	a.between = newBatcher(h.FlushInterval, h.FlushInterval, h.FlushBytes, func(ctx context.Context, batch int64, events []json.RawMessage) error {
		return signalWithRetry(ctx, h.Client, h.Logger, wfID, signals.SignalTurnEvents, signals.TurnEventsSignal{
			Host: id, Batch: batch, Events: events,
		})
	})
	go a.between.run(context.Background())
	proc.setTap(a.between.add)
	h.mu.Lock()
	h.agents[sessionID] = a
	h.starting--
	started = true
	h.mu.Unlock()
	return a, nil
}

func (h *Host) lruIdleLocked() *hostedAgent {
	var idle []*hostedAgent
	for _, a := range h.agents {
		if !a.busy {
			idle = append(idle, a)
		}
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].lastUsed.Before(idle[j].lastUsed) })
	if len(idle) == 0 {
		return nil
	}
	return idle[0]
}

// release returns the agent to the idle pool, or stops it when it cannot be trusted with
// another turn.
func (h *Host) release(a *hostedAgent, keep bool) {
	a.proc.setTap(a.between.add)
	a.client.setTurn(nil)
	h.mu.Lock()
	a.busy, a.lastUsed = false, time.Now()
	if !keep || !a.proc.alive() {
		if h.agents[a.sessionID] == a {
			delete(h.agents, a.sessionID)
		}
		keep = false
	}
	h.mu.Unlock()
	if !keep {
		go a.shutdown(2 * time.Second)
	}
}

func (a *hostedAgent) shutdown(grace time.Duration) {
	a.proc.stop(grace)
	_, _ = a.between.close()
}

// --- running turns and deliveries ---

// liveTurn is a turn running on this host: the channels the Deliver activity feeds.
type liveTurn struct {
	key     turnKey
	attempt int32
	steers  chan steerRequest
	cancel  chan struct{}
	once    sync.Once
	done    chan struct{}

	mu      sync.Mutex
	perms   map[string]chan acp.RequestPermissionResponse
	permSeq int
	// beforePermission flushes the turn's events, so a permission request is journaled
	// after the tool call it is about.
	beforePermission func()
	askPermission    func(ctx context.Context, sig signals.PermissionRequestedSignal) error
	// reach measures where a permission request's tool call reaches (ToolCallReach in the
	// turn's workspace); nil: outside, so the request is asked.
	reach func(toolCall json.RawMessage) string
	// watch names the turn's tool calls (from their tool_call updates).
	watch *turnObserver
	// applySettings sets a mode or config value chosen while the turn runs in its agent.
	applySettings func(ctx context.Context, c signals.SessionChoices) error
}

type steerRequest struct {
	text  string
	reply chan steerReply
}

type steerReply struct {
	how string
	err error
}

func (h *Host) register(sessionID string, turnID int64, attempt int32) *liveTurn {
	h.init()
	lt := &liveTurn{
		key: turnKey{sessionID, turnID}, attempt: attempt,
		steers: make(chan steerRequest), cancel: make(chan struct{}), done: make(chan struct{}),
		perms: map[string]chan acp.RequestPermissionResponse{},
	}
	h.mu.Lock()
	h.turns[lt.key] = lt
	h.mu.Unlock()
	return lt
}

func (h *Host) unregister(lt *liveTurn) {
	h.mu.Lock()
	if h.turns[lt.key] == lt {
		delete(h.turns, lt.key)
	}
	h.mu.Unlock()
	close(lt.done)
}

func (lt *liveTurn) requestCancel() { lt.once.Do(func() { close(lt.cancel) }) }

// Deliver carries one decision into a turn running on this host.
func (h *Host) Deliver(ctx context.Context, d signals.Delivery) (signals.DeliveryResult, error) {
	h.init()
	h.mu.Lock()
	lt := h.turns[turnKey{d.SessionID, d.TurnID}]
	h.mu.Unlock()
	if lt == nil || (d.Attempt != 0 && lt.attempt != d.Attempt) {
		return signals.DeliveryResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("turn %d of session %s is not running on this host", d.TurnID, d.SessionID), ErrTurnNotHere, nil)
	}
	switch d.Kind {
	case signals.DeliverCancel:
		lt.requestCancel()
		return signals.DeliveryResult{}, nil
	case signals.DeliverSteer:
		req := steerRequest{text: d.Text, reply: make(chan steerReply, 1)}
		select {
		case lt.steers <- req:
		case <-lt.done:
			return signals.DeliveryResult{}, errors.New("the turn ended before the steer reached it")
		case <-ctx.Done():
			return signals.DeliveryResult{}, ctx.Err()
		}
		select {
		case r := <-req.reply:
			return signals.DeliveryResult{How: r.how}, r.err
		case <-ctx.Done():
			return signals.DeliveryResult{}, ctx.Err()
		}
	case signals.DeliverPermission:
		lt.mu.Lock()
		ch := lt.perms[d.RequestID]
		delete(lt.perms, d.RequestID)
		lt.mu.Unlock()
		if ch == nil {
			return signals.DeliveryResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("permission request %s is not waiting on this host", d.RequestID), ErrTurnNotHere, nil)
		}
		ch <- permissionResponse(d.Outcome, d.OptionID)
		return signals.DeliveryResult{}, nil
	case signals.DeliverSettings:
		if d.Choices == nil || lt.applySettings == nil {
			return signals.DeliveryResult{}, nil
		}
		return signals.DeliveryResult{}, lt.applySettings(ctx, *d.Choices)
	}
	return signals.DeliveryResult{}, temporal.NewNonRetryableApplicationError("unknown delivery kind "+d.Kind, "invalid_request", nil)
}

// permissionResponse is the agent's answer: the chosen option (selected by a person, a
// policy or a rule, or the reject option an expired request fails closed with), else
// cancelled.
func permissionResponse(outcome, optionID string) acp.RequestPermissionResponse {
	if outcome != signals.OutcomeCancelled && optionID != "" {
		return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{
			Selected: &acp.RequestPermissionOutcomeSelected{OptionId: acp.PermissionOptionId(optionID)},
		}}
	}
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}
}

// requestPermission bridges the agent's session/request_permission to the workflow and
// waits for its answer (or the turn's end, which answers cancelled).
func (lt *liveTurn) requestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	toolCall, err := json.Marshal(p.ToolCall)
	if err != nil {
		return acp.RequestPermissionResponse{}, err
	}
	opts := make([]signals.PermissionOption, 0, len(p.Options))
	for _, o := range p.Options {
		opts = append(opts, signals.PermissionOption{OptionID: string(o.OptionId), Name: o.Name, Kind: string(o.Kind)})
	}
	ch := make(chan acp.RequestPermissionResponse, 1)
	lt.mu.Lock()
	lt.permSeq++
	id := fmt.Sprintf("p%d.%d.%d", lt.key.turn, lt.attempt, lt.permSeq)
	lt.perms[id] = ch
	lt.mu.Unlock()
	defer func() {
		lt.mu.Lock()
		delete(lt.perms, id)
		lt.mu.Unlock()
	}()
	lt.beforePermission()
	paths := signals.PathsOutside // no workspace to measure against: ask
	if lt.reach != nil {
		paths = lt.reach(toolCall)
	}
	if err := lt.askPermission(ctx, signals.PermissionRequestedSignal{
		TurnID: lt.key.turn, Attempt: lt.attempt, RequestID: id, ToolCall: toolCall, Options: opts, Paths: paths,
		ToolName: lt.watch.toolName(string(p.ToolCall.ToolCallId)),
	}); err != nil {
		return acp.RequestPermissionResponse{}, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-lt.cancel:
	case <-lt.done:
	case <-ctx.Done():
	}
	return permissionResponse(signals.OutcomeCancelled, ""), nil
}

// ReleaseAgent stops a session's idle agent on this host: the session's turn ran on another
// host (NewHost), so this agent would only hold memory until its idle TTL (no orphans). A
// busy agent is left alone: its turn ends it or keeps it.
func (h *Host) ReleaseAgent(_ context.Context, req signals.ReleaseAgentRequest) error {
	h.init()
	if req.NewHost == h.Queue {
		return nil
	}
	h.mu.Lock()
	a, ok := h.agents[req.SessionID]
	stop := ok && !a.busy
	if stop {
		delete(h.agents, req.SessionID)
	}
	h.mu.Unlock()
	if stop {
		h.Logger.Info("stopping the agent of a session that moved to another worker", "session", req.SessionID, "to", req.NewHost)
		go a.shutdown(2 * time.Second)
	}
	return nil
}

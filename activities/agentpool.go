package activities

// The agent pool: each session's agent process, kept alive between turns on the host that
// runs it (idle time-to-live, a cap on live agents that evicts the least recently used idle
// one, busy agents never evicted), handed to a turn by acquire and taken back by release.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

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
	// closed: the session closed while a turn held the agent; release stops it.
	closed  bool
	between *batcher
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
func (h *Host) acquire(ctx context.Context, sessionID string, argv, env []string, dir string, sandbox *Sandbox, noTypedFailures bool) (*hostedAgent, error) {
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
	hc := &hostClient{log: log, sandbox: sandbox, noTypedFailures: noTypedFailures, nice: h.AgentNice}
	proc, err := startAgent(argv, env, dir, hc, log)
	if err != nil {
		return nil, err
	}
	a := &hostedAgent{id: id, sessionID: sessionID, key: key, proc: proc, client: hc, busy: true}
	if err := proc.initialize(ctx); err != nil {
		select { // an agent that died says more by its exit than by the broken pipe
		case <-proc.exited:
			err = proc.withPrinted(fmt.Errorf("%w before answering initialize", proc.exitErr()))
		case <-time.After(100 * time.Millisecond):
			if ctx.Err() != nil {
				err = proc.withPrinted(errors.New("agent did not answer initialize in time"))
			}
		}
		proc.stop(0)
		return nil, err
	}
	h.journalBetweenTurns(a)
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
	a.proc.setTap(a.between.add) // what it says now is journaled between turns
	a.client.setTurn(nil)
	h.mu.Lock()
	a.busy, a.lastUsed = false, time.Now()
	closed := a.closed
	if !keep || closed || !a.proc.alive() {
		if h.agents[a.sessionID] == a {
			delete(h.agents, a.sessionID)
		}
		keep = false
	}
	h.mu.Unlock()
	if !keep {
		go func() {
			if closed {
				a.closeSession(context.Background())
			}
			a.shutdown(2 * time.Second)
		}()
	}
}

func (a *hostedAgent) shutdown(grace time.Duration) {
	a.proc.stop(grace)
	_, _ = a.between.close()
}

// ReleaseAgent stops a session's agent on this host. A session whose turn ran on another
// host (NewHost) has its idle agent stopped, which would only hold memory until its idle
// TTL (no orphans); a busy one is left alone: its turn ends it or keeps it. A closed
// session's agent is ended whatever it is doing: its agent session closed with
// session/close where the agent offers it (the agent's own clean-up: its subprocesses, its
// files), then its process stopped; a busy one is stopped when its turn lets it go.
func (h *Host) ReleaseAgent(ctx context.Context, req signals.ReleaseAgentRequest) error {
	h.init()
	if !req.Closed && req.NewHost == h.Queue {
		return nil
	}
	h.mu.Lock()
	a, ok := h.agents[req.SessionID]
	stop := ok && (!a.busy || req.Closed)
	if stop {
		delete(h.agents, req.SessionID)
		a.closed = req.Closed
	}
	busy := stop && a.busy
	h.mu.Unlock()
	switch {
	case !stop:
		return nil
	case busy:
		// Out of the pool: release stops it (it is no longer the session's agent).
		h.Logger.Info("the session closed: its agent stops when its turn ends", "session", req.SessionID)
		return nil
	case req.Closed:
		h.Logger.Info("stopping the agent of a closed session", "session", req.SessionID)
		a.closeSession(ctx)
		a.shutdown(2 * time.Second)
	default:
		h.Logger.Info("stopping the agent of a session that moved to another worker", "session", req.SessionID, "to", req.NewHost)
		go a.shutdown(2 * time.Second)
	}
	return nil
}

// closeSession ends the agent's session with session/close where the agent offers it,
// bounded by closeWait: an agent that does not answer is stopped all the same.
func (a *hostedAgent) closeSession(ctx context.Context) {
	if a.acpSession == "" || a.proc.caps.AgentCapabilities.SessionCapabilities.Close == nil || !a.proc.alive() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, closeWait)
	defer cancel()
	if _, err := a.proc.conn.CloseSession(ctx, acp.CloseSessionRequest{SessionId: a.acpSession}); err != nil {
		a.proc.log.Info("session/close failed: stopping the agent all the same", "error", err)
	}
}

// closeWait bounds an agent's answer to session/close.
const closeWait = 2 * time.Second

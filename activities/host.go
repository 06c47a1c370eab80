package activities

// The host: one per worker process. It owns the pieces a worker's turns share, each in a
// file of its own: the agent pool (agentpool.go: each session's agent process kept alive
// between turns), what an agent says between turns (betweenturns.go), the registry of the
// turns running here (liveturns.go), the attempts a session's next run may adopt
// (adopt.go), the Deliver activity that carries the workflow's
// decisions into them (delivery.go) and the bridge of the agent's permission requests to the
// workflow (permission.go). This file holds the Host type and its lifecycle.

import (
	"log/slog"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
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

// Host hosts agent processes and running turns for one worker.
type Host struct {
	// Queue is this worker's own task queue, on which Deliver is polled.
	Queue     string
	IdleTTL   time.Duration
	MaxAgents int
	// AgentNice is the CPU priority (nice, 0–19) the agents start with, and their tools
	// with them: above 0 the worker's heartbeats, signals and queries, and an embedded
	// server, go first when agents and their builds fill the machine's cores. 0: the
	// worker's own (the default: the machine may run more than tacp).
	AgentNice int
	Client    client.Client
	Logger    *slog.Logger
	// FlushInterval and FlushBytes configure the batching of events between turns.
	FlushInterval time.Duration
	FlushBytes    int

	mu     sync.Mutex
	agents map[string]*hostedAgent // by tacp session id
	turns  map[turnKey]*liveTurn
	// attempts are the turn attempts running here, and those that ended within their
	// AdoptWait (adopt.go).
	attempts map[attemptKey]*ownedAttempt
	seq      int
	// starting counts agents between the cap check and their registration.
	starting int
	done     chan struct{}
	once     sync.Once
}

type turnKey struct {
	session string
	turn    int64
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
		h.attempts = map[attemptKey]*ownedAttempt{}
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

package activities

// What a worker learns of its agents: the prompt and MCP capabilities and the auth methods
// each profile's agent answered in its last initialize on this worker, and whether it has
// opened an agent session here (then it is authenticated). ProfilesWorkflow passes them to
// clients (signals.ProfileInfo), so that `starter acp`'s initialize — which comes before any
// session — advertises what the agent behind it supports, not a flag.

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

// learned is what a worker knows of one profile's agent.
type learned struct {
	prompt acp.PromptCapabilities
	mcp    acp.McpCapabilities
	// auth are the agent's auth methods; onWorker the ids of those the worker completes by
	// itself (an env-var key the agent's environment holds).
	auth     []acp.AuthMethod
	onWorker []string
	// opened is set once the agent opened an agent session on this worker: it needs no
	// authentication from a client.
	opened bool
	// offer is the agent's offer in a new session under tacp's governance (its modes and
	// config options, the mode the policy puts it in), from the probe's session/new or a
	// new session's first turn; nil until one.
	offer *signals.AgentSettings
}

type learnedAgents struct {
	mu sync.Mutex
	by map[string]*learned
}

func (l *learnedAgents) get(name string) *learned {
	if l.by == nil {
		l.by = map[string]*learned{}
	}
	if l.by[name] == nil {
		l.by[name] = &learned{}
	}
	return l.by[name]
}

// Learn records what profile name's agent answered in initialize; env is the environment the
// worker started it with.
func (p *Profiles) Learn(name string, caps acp.InitializeResponse, env []string) {
	p.learned.mu.Lock()
	defer p.learned.mu.Unlock()
	a := p.learned.get(name)
	a.prompt, a.mcp, a.auth = caps.AgentCapabilities.PromptCapabilities, caps.AgentCapabilities.McpCapabilities, caps.AuthMethods
	a.onWorker = a.onWorker[:0]
	for _, m := range caps.AuthMethods {
		if m.EnvVar != nil && envHolds(env, m.EnvVar.Vars) {
			a.onWorker = append(a.onWorker, m.EnvVar.Id)
		}
	}
}

// Opened records that profile name's agent opened an agent session on this worker.
func (p *Profiles) Opened(name string) {
	p.learned.mu.Lock()
	defer p.learned.mu.Unlock()
	p.learned.get(name).opened = true
}

// Offered records profile name's offer in a new session (ProfileInfo.Settings).
func (p *Profiles) Offered(name string, offer *signals.AgentSettings) {
	if offer == nil {
		return
	}
	p.learned.mu.Lock()
	defer p.learned.mu.Unlock()
	o := *offer
	o.AvailableCommands = nil // a session's, sent when its agent runs
	p.learned.get(name).offer = &o
}

// offered is what Offered recorded of profile name (nil: nothing yet).
func (p *Profiles) offered(name string) *signals.AgentSettings {
	p.learned.mu.Lock()
	defer p.learned.mu.Unlock()
	if a := p.learned.by[name]; a != nil {
		return a.offer
	}
	return nil
}

// workerAuth is the id of an auth method of profile name's agent that the worker completes
// by itself ("" when none).
func (p *Profiles) workerAuth(name string) string {
	p.learned.mu.Lock()
	defer p.learned.mu.Unlock()
	if a := p.learned.by[name]; a != nil && len(a.onWorker) > 0 {
		return a.onWorker[0]
	}
	return ""
}

// known fills info with what the worker learned of its agent; mcp narrows the MCP
// transports to those the worker's policy takes.
func (p *Profiles) known(name string, mcp MCPPolicy) (prompt, mcpCaps json.RawMessage, auth []json.RawMessage) {
	p.learned.mu.Lock()
	defer p.learned.mu.Unlock()
	a := p.learned.by[name]
	if a == nil {
		return nil, nil, nil
	}
	prompt, _ = json.Marshal(a.prompt)
	allowed := mcp.Mode == MCPHTTP || mcp.Mode == MCPListed
	mcpCaps, _ = json.Marshal(acp.McpCapabilities{Http: a.mcp.Http && allowed, Sse: a.mcp.Sse && allowed})
	if a.opened || len(a.onWorker) > 0 {
		return prompt, mcpCaps, nil // authenticated on the worker: nothing for a client to do
	}
	for _, m := range a.auth {
		if b, err := json.Marshal(m); err == nil {
			auth = append(auth, b)
		}
	}
	return prompt, mcpCaps, auth
}

// envHolds reports whether env sets every required variable of vars to a non-empty value.
func envHolds(env []string, vars []acp.AuthEnvVar) bool {
	set := map[string]bool{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && v != "" {
			set[k] = true
		}
	}
	for _, v := range vars {
		if !v.Optional && !set[v.Name] {
			return false
		}
	}
	return len(vars) > 0
}

// authRequired reports whether err is the agent's ACP auth_required error.
func authRequired(err error) bool {
	var re *acp.RequestError
	return errors.As(err, &re) && re.Code == -32000
}

// AuthHint says what a worker's operator must do so that an agent offering methods needs
// no client to authenticate: set an env-var method's variables in the agent profile's env
// or env_files, or log the agent in on the worker.
func AuthHint(methods []acp.AuthMethod) string {
	var vars, others []string
	for _, m := range methods {
		switch {
		case m.EnvVar != nil:
			for _, v := range m.EnvVar.Vars {
				if !v.Optional {
					vars = append(vars, v.Name)
				}
			}
		case m.Agent != nil:
			others = append(others, m.Agent.Name)
		case m.Terminal != nil:
			others = append(others, m.Terminal.Name)
		}
	}
	var parts []string
	if len(vars) > 0 {
		parts = append(parts, "set "+strings.Join(vars, ", ")+" in the agent profile's env or env_files on the worker")
	}
	if len(others) > 0 {
		parts = append(parts, "log the agent in on the worker as the user the worker runs as ("+strings.Join(others, ", ")+")")
	}
	if len(parts) == 0 {
		return "the worker's operator must authenticate the agent on the worker"
	}
	return "the worker's operator must " + strings.Join(parts, ", or ")
}

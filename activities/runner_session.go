package activities

// Opening a turn's agent session: session/load or session/new (authenticating when it must),
// the session's choices, and the carry-over of the conversation when the agent lost it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

// open opens the agent session of the turn (openSession) and applies the session's choices
// to it: the turn_started signal and the prompt to send follow from how it opened.
func (t *turnRun) open(setupCtx context.Context, ag *hostedAgent, s turnSetup) (acp.SessionId, signals.TurnStartedSignal, []acp.ContentBlock, error) {
	r, proc, before := t.r, ag.proc, t.before
	// A retry after a lost worker loads the agent session the lost attempt had and learns
	// whether the prompt had reached it (progressBefore).
	if t.in.AgentSessionID == "" {
		t.in.AgentSessionID = before.AgentSessionID
	}
	// What the agent says while its session opens belongs to this turn (claude-agent-acp
	// sends its commands right after session/new); only a session/load's replay of history,
	// which the session has journaled already, is left out (openSession).
	proc.setTap(func(raw json.RawMessage) {
		t.watch.observe(raw)
		if o := ag.offer.Load(); o != nil {
			o.observe(raw)
			if o.answersOwnChange(raw) {
				return
			}
		}
		t.b.add(raw)
	})
	r.Trust.Profiles.Learn(s.profile.Name, proc.caps, s.env)
	sid, lost, err := r.openSession(setupCtx, ag, t.in, s.dir, s.mcpServers, r.Trust.Profiles.workerAuth(s.profile.Name))
	if err != nil {
		return "", signals.TurnStartedSignal{}, nil, r.agentErr(proc, err, t.res)
	}
	r.Trust.Profiles.Opened(s.profile.Name)
	t.res.AgentSessionID = string(sid)
	offered, err := r.applyChoices(setupCtx, ag, sid, t.in, s.profile, t.log)
	if err != nil {
		return "", signals.TurnStartedSignal{}, nil, t.fail(err)
	}
	started := signals.TurnStartedSignal{TurnID: t.in.TurnID, Attempt: t.attempt, HostQueue: r.Host.Queue, AgentSessionID: t.res.AgentSessionID, Settings: offered,
		Sandbox: s.profile.SandboxInfo().Describe()}
	prompt := s.prompt
	switch {
	case lost != "":
		started.ContextLost, prompt = t.contextLost(setupCtx, lost, sid, prompt)
	case t.in.ForkOf != nil && t.in.AgentSessionID == "":
		// A fork's first agent session: it starts from the origin's conversation, and the
		// journal says so (agent.context_lost's reason names the fork: its agent holds no
		// memory of its own, only what tacp carried).
		lost = fmt.Sprintf("a fork of session %s: its agent starts from that session's conversation", t.in.ForkOf.SessionID)
		started.ContextLost, prompt = t.contextLost(setupCtx, lost, sid, prompt)
	case before.PromptSent && before.AgentSessionID == string(sid):
		// The agent session holds the prompt already (the lost attempt sent it, and the agent
		// keeps what it was told): sending it again would show the model the prompt twice.
		// The lost attempt's partial answer is dropped by viewers (turn.restarted, resumed).
		t.log.Info("the agent session holds the prompt already: asking it to continue instead of sending it again")
		prompt = []acp.ContentBlock{acp.TextBlock(ResumeText)}
		started.Resumed = true
	}
	return sid, started, prompt, nil
}

// contextLost journals that the agent could not load the session's agent session (never
// forget silently), and seeds the new agent session with the conversation.
func (t *turnRun) contextLost(ctx context.Context, lost string, sid acp.SessionId, prompt []acp.ContentBlock) (*signals.AgentContextLostData, []acp.ContentBlock) {
	cl := &signals.AgentContextLostData{Reason: lost, Attempt: t.attempt, Host: t.r.Host.Queue, LostSessionID: t.in.AgentSessionID, NewSessionID: string(sid)}
	if !t.r.NoCarryContext {
		seed, serr := t.r.transcript(ctx, t.in)
		if serr != nil {
			t.log.Warn("transcript query failed: the new agent session starts without the conversation", "error", serr)
		} else if seed.Text != "" {
			prompt = append([]acp.ContentBlock{acp.TextBlock(seed.Text)}, prompt...)
			cl.Carried, cl.CarriedTruncated = len(seed.Text), seed.Truncated
		}
	}
	t.log.Warn("agent context lost: started a new agent session", "reason", lost, "carried_bytes", cl.Carried)
	return cl, prompt
}

// ResumeText is the prompt of an attempt whose agent session already holds the turn's prompt
// (the lost attempt sent it): the agent is asked to go on, not told the prompt twice.
const ResumeText = "[tacp: the worker running this turn was lost while you were answering the previous message. " +
	"Your partial answer may not have reached the user. Continue answering that message; do not repeat work that is already done.]"

// openSession picks the agent session for the turn: the one the live agent already holds
// when it is the session's, else session/load of the one kept in workflow state when the
// agent can load sessions, else a new one.
//
// An agent that answers session/new with auth_required is authenticated with authID, an
// auth method the worker completes by itself (an env-var key the agent's environment
// holds), and asked again; with none the error says what the operator must set.
//
// lost is set (the reason) when the session had an agent session that this agent could not
// load, so the new one does not know the conversation.
func (r *Runner) openSession(ctx context.Context, ag *hostedAgent, in signals.RunTurnInput, dir string, mcpServers []acp.McpServer, authID string) (sid acp.SessionId, lost string, err error) {
	proc := ag.proc
	key, _ := json.Marshal(mcpServers)
	if ag.acpSession != "" && (in.AgentSessionID == "" || in.AgentSessionID == string(ag.acpSession)) {
		// The session's MCP servers changed (set_mcp_servers): an agent that loads sessions
		// loads its own again with them; one that cannot keeps its conversation, and gets
		// them in its next process.
		if bytes.Equal(ag.mcpKey, key) || !proc.caps.AgentCapabilities.LoadSession {
			return ag.acpSession, "", nil
		}
		in.AgentSessionID = string(ag.acpSession)
	} else if in.AgentSessionID != "" && !proc.caps.AgentCapabilities.LoadSession {
		lost = "the agent cannot load sessions (no loadSession capability)"
	}
	ag.mcpKey = key
	if in.AgentSessionID != "" && proc.caps.AgentCapabilities.LoadSession {
		// The replay is the conversation the session has journaled already (a lost attempt's
		// partial output was superseded by turn.restarted): it is counted in the worker's log,
		// not journaled twice.
		var replayed atomic.Int64
		endReplay := proc.replayUntilAnswer(func(json.RawMessage) { replayed.Add(1) })
		loaded, err := proc.conn.LoadSession(ctx, acp.LoadSessionRequest{
			SessionId: acp.SessionId(in.AgentSessionID), Cwd: dir, McpServers: mcpServers,
		})
		endReplay()
		if err == nil {
			r.Logger.Info("session/load: the agent replayed the conversation", "session", in.SessionID, "updates", replayed.Load())
			ag.acpSession = acp.SessionId(in.AgentSessionID)
			ag.offer.Store(offerOf(loaded.Modes, loaded.ConfigOptions, loaded.Models))
			return ag.acpSession, "", nil
		}
		r.Logger.Warn("session/load failed: starting a new agent session", "session", in.SessionID, "error", err)
		lost = "session/load failed: " + loadErrText(err)
	}
	resp, err := proc.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: dir, McpServers: mcpServers})
	if authRequired(err) && authID != "" {
		if _, aerr := proc.conn.Authenticate(ctx, acp.AuthenticateRequest{MethodId: authID}); aerr != nil {
			return "", "", fmt.Errorf("authenticate %s: %w", authID, aerr)
		}
		resp, err = proc.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: dir, McpServers: mcpServers})
	}
	if authRequired(err) {
		return "", "", fmt.Errorf("session/new: the agent needs authentication the worker cannot complete: %s (%w)", AuthHint(proc.caps.AuthMethods), err)
	}
	if err != nil {
		return "", "", fmt.Errorf("session/new: %w", err)
	}
	ag.acpSession = resp.SessionId
	ag.offer.Store(offerOf(resp.Modes, resp.ConfigOptions, resp.Models))
	return resp.SessionId, lost, nil
}

// loadErrText is the agent's message for a failed session/load, without its data (which
// may echo paths of the agent's host).
func loadErrText(err error) string {
	var reqErr *acp.RequestError
	if errors.As(err, &reqErr) {
		return reqErr.Message
	}
	return err.Error()
}

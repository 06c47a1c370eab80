package session

// What the session shows of itself (contract §4 "Queries", §2 search attributes): its state,
// the Temporal UI's Current Details, the values of the search attributes, and the status
// query's answer. All of it reads the core's state and changes nothing.

import (
	"fmt"
	"path"
	"strings"

	"github.com/tacp-dev/tacp/signals"
)

func (s *Core) state() string {
	switch {
	case s.Turn == nil && s.Closing:
		return signals.StateClosed
	case s.Turn == nil:
		return signals.StateIdle
	case s.Turn.Cancel != cancelNone:
		return signals.StateCancelling
	case s.limitView() != nil:
		return signals.StateWaitingLimit
	case len(s.Permissions) > 0 || len(s.Elicitations) > 0:
		return signals.StateSuspended
	case s.GraceUntil != nil:
		return signals.StateGrace
	default:
		return signals.StateRunning
	}
}

// details is the session's Current Details in the Temporal UI (markdown): its state,
// what it waits for (the open requests with their titles and deadlines), the steer token,
// the queue, the last outcome.
func (s *Core) details() string {
	state, turn, _ := s.searchAttributes()
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** · turn %d", state, turn)
	if s.Title != "" && !s.build.Confidential {
		fmt.Fprintf(&b, " · %q", s.Title)
	}
	if s.Turn != nil && s.Turn.Cancel == cancelNone {
		fmt.Fprintf(&b, " · steer token `%s`", s.Steer.Token())
	}
	if s.Turn != nil && s.Turn.Cancel != cancelNone {
		fmt.Fprintf(&b, " · cancelling (%s)", s.Turn.CancelReason)
	}
	fmt.Fprintf(&b, " · %d queued", len(s.Queue.Items))
	if s.LastOutcome != "" {
		fmt.Fprintf(&b, " · last turn: %s", s.LastOutcome)
	}
	if s.Sandbox != "" {
		fmt.Fprintf(&b, " · sandbox: %s", s.Sandbox)
	}
	for _, p := range s.pendingPermissions() {
		title := p.Title
		if title == "" || s.build.Confidential {
			title = p.Kind
		}
		fmt.Fprintf(&b, "\n\nwaiting for approval of *%s* (`%s`, turn %d) until %s — `starter approve --session %s %s`",
			title, p.RequestID, p.TurnID, p.Deadline.UTC().Format("2006-01-02 15:04:05 UTC"), s.cfg.SessionID, p.RequestID)
	}
	b.WriteString(s.elicitationDetails())
	b.WriteString(s.limitDetails())
	if s.GraceUntil != nil {
		fmt.Fprintf(&b, "\n\nno viewer: the turn is cancelled at %s unless one attaches", s.GraceUntil.UTC().Format("15:04:05 UTC"))
	}
	// Who the session is, on every run: a run started by continue-as-new has no static
	// summary or details of its own (the SDK's continue-as-new carries none), so the
	// Current Details name the session, its agent profile and workspace.
	workspace := s.cfg.Workspace
	if workspace == "" {
		workspace = "its own folder"
	}
	fmt.Fprintf(&b, "\n\nsession `%s` · agent profile %s · workspace %s", s.cfg.SessionID, sessionAgent(s.cfg.Agent), workspace)
	fmt.Fprintf(&b, "\n\njournal seq %d · run %d", s.Journal.LastSeq, s.Run)
	return b.String()
}

// searchAttributes are what the TacpSessionState, TacpTurn and TacpAwaitingApproval search
// attributes show: the state, the live turn (or the last one queued), whether a permission
// request waits.
func (s *Core) searchAttributes() (state string, turn int64, awaiting bool) {
	turn = s.Queue.LastTurnID
	if s.Turn != nil {
		turn = s.Turn.TurnID
	}
	return s.state(), turn, len(s.Permissions) > 0 || len(s.Elicitations) > 0
}

// Status is the Status query's answer; the shell adds the run's history length and build.
// It holds nothing of the worker that answers (not its profiles, not its default profile's
// name): every worker answers a session the same (contract §4).
func (s *Core) Status() signals.Status {
	st := signals.Status{
		SessionID:           s.cfg.SessionID,
		State:               s.state(),
		SteerToken:          s.Steer.Token(),
		Viewers:             s.viewersView(),
		Queue:               s.Queue.Entries(),
		PendingPermissions:  s.pendingPermissions(),
		PendingElicitations: s.pendingElicitations(),
		Policy:              s.Policy.Level,
		Rules:               append([]string{}, s.Policy.Rules...),
		Usage:               usageView(s.Usage, s.UsageLatest),
		Journal:             s.Journal.Range(),
		Agent:               sessionAgent(s.cfg.Agent),
		Title:               s.Title,
		AgentSessionID:      s.AgentSessionID,
		AgentSettings:       s.Settings.View(),
		AgentHost:           s.AgentHost,
		Sandbox:             s.Sandbox,
		ContextLost:         s.ContextLost,
		WaitingLimit:        s.limitView(),
		Run:                 s.Run,
		Access:              s.cfg.Access,
	}
	if s.Turn != nil {
		st.TurnID = s.Turn.TurnID
		started := s.Turn.StartedAt
		st.TurnStartedAt = &started
		if d, ok := s.Turn.Clock.deadline(s.cfg.Deadline); ok {
			st.TurnDeadline = &d // nil while a permission waits: the clock is paused
		}
	}
	return st
}

// defaultAgent names the agent of a session that names none: the worker's default serves
// it (status.agent, session.started, the TacpAgent search attribute).
const defaultAgent = "default"

// sessionAgent is what serves the session, as status and session.started name it.
func sessionAgent(agent string) string {
	if strings.TrimSpace(agent) == "" {
		return defaultAgent
	}
	return agent
}

// agentName is the agent's program name, for the TacpAgent search attribute.
func agentName(cmd string) string {
	fields := strings.Fields(cmd)
	if len(fields) == 0 {
		return defaultAgent
	}
	return path.Base(fields[0])
}

package signals

// Forks (contract §3 "Forks"): a session started from another's conversation.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// ForkOrigin is what a fork was taken from: session SessionID's conversation before turn
// BeforeTurn (0: all of it, as it was when the fork's agent started).
type ForkOrigin struct {
	SessionID  string `json:"session_id"`
	BeforeTurn int64  `json:"before_turn,omitempty"`
}

// ForkTranscriptHeader opens the conversation a fork's agent starts from.
func ForkTranscriptHeader(f ForkOrigin) string {
	before := "all of it"
	if f.BeforeTurn > 0 {
		before = fmt.Sprintf("its turns before turn %d", f.BeforeTurn)
	}
	return fmt.Sprintf("[tacp: earlier context] This session is a fork of session %s: below is that session's "+
		"conversation (%s), from tacp's journal. Treat it as what was said before; the new prompt follows after it.", f.SessionID, before)
}

// ForkRequest is what a fork is taken with.
type ForkRequest struct {
	// SessionID is the fork's id ("": a new one); a session of that id must not exist.
	SessionID string
	// BeforeTurn takes the origin's conversation before this turn (0: all of it).
	BeforeTurn int64
	// Workspace is the fork's workspace ("": a folder of its own, as for any new session).
	// On workers with workspace checkpoints, the fork's first turn finds an empty workspace
	// filled with the origin's files as they were before BeforeTurn (workspace.restored
	// names the origin's checkpoint); a workspace with files keeps them.
	Workspace string
	// McpServers are the fork's (the origin's are its secret and are not copied).
	McpServers json.RawMessage
	// Owner is the fork's owner: the person who forks, not the origin's (whose shares and
	// sharing rule are not copied either: a fork starts under the door's rule).
	Owner string
}

// Fork starts a new session whose agent starts from session origin's conversation (before
// req.BeforeTurn), with the origin's agent profile and permission policy, and returns its
// config. The fork's session.started names the origin; its first turn's agent.context_lost
// says what was carried. An unknown origin, a turn past the origin's last, or an id already
// taken is refused and starts nothing.
func (c *Client) Fork(ctx context.Context, origin string, req ForkRequest) (SessionConfig, error) {
	st, err := c.Status(ctx, origin)
	if err != nil {
		return SessionConfig{}, err
	}
	if req.BeforeTurn < 0 {
		return SessionConfig{}, Reject(RejectInvalidRequest, "before_turn %d: want 0 (all of it) or a turn of session %s", req.BeforeTurn, origin)
	}
	if req.BeforeTurn > 0 {
		tr, err := c.Transcript(ctx, origin, TranscriptRequest{MaxBytes: 1})
		if err != nil {
			return SessionConfig{}, err
		}
		if req.BeforeTurn > int64(tr.Turns)+1 {
			return SessionConfig{}, Reject(RejectInvalidRequest, "before_turn %d: session %s has %d turns (want at most %d)", req.BeforeTurn, origin, tr.Turns, tr.Turns+1)
		}
	}
	id := req.SessionID
	if id == "" {
		id = "fork-" + NewID()
	}
	if _, err := c.Status(ctx, id); err == nil {
		return SessionConfig{}, Reject(RejectInvalidRequest, "session %s exists: a fork needs a new id", id)
	} else if r := (*Rejection)(nil); !errors.As(err, &r) || r.Type != RejectUnknownSession {
		return SessionConfig{}, err
	}
	agent := st.Agent
	if agent == "default" { // what status names a session that names no profile
		agent = ""
	}
	cfg := SessionConfig{SessionID: id, Agent: agent, Workspace: req.Workspace, Policy: st.Policy, McpServers: req.McpServers,
		ForkOf: &ForkOrigin{SessionID: origin, BeforeTurn: req.BeforeTurn}, Access: Access{Owner: req.Owner}}
	if _, err := c.Start(ctx, cfg, AttachRequest{}); err != nil {
		return SessionConfig{}, err
	}
	return cfg, nil
}

// Transcript queries a session's conversation as the transcript a new agent session is
// seeded with.
func (c *Client) Transcript(ctx context.Context, sessionID string, req TranscriptRequest) (TranscriptResult, error) {
	var res TranscriptResult
	return res, c.query(ctx, sessionID, QueryTranscript, &res, req)
}

// Rewind goes back to the end of session origin's turn toTurn as a new session: a fork before
// turn toTurn+1 (req.BeforeTurn is set here), so its agent remembers the conversation to that
// turn and, on workers with workspace checkpoints, its first turn starts with the files that
// turn left. The origin is untouched. A turn the origin has not had is refused and starts
// nothing.
func (c *Client) Rewind(ctx context.Context, origin string, toTurn int64, req ForkRequest) (SessionConfig, error) {
	if toTurn <= 0 {
		return SessionConfig{}, Reject(RejectInvalidRequest, "to_turn %d: want the turn of session %s whose end to go back to", toTurn, origin)
	}
	tr, err := c.Transcript(ctx, origin, TranscriptRequest{MaxBytes: 1})
	if err != nil {
		return SessionConfig{}, err
	}
	if toTurn > int64(tr.Turns) {
		return SessionConfig{}, Reject(RejectInvalidRequest, "to_turn %d: session %s has %d turns", toTurn, origin, tr.Turns)
	}
	req.BeforeTurn = toTurn + 1
	return c.Fork(ctx, origin, req)
}

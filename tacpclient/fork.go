package tacpclient

import (
	"context"
	"errors"

	"github.com/tacp-dev/tacp/signals"
)

// Fork starts a new session whose agent starts from session origin's conversation (before
// req.BeforeTurn), with the origin's agent profile and permission policy, and returns its
// config. The fork's session.started names the origin; its first turn's agent.context_lost
// says what was carried. An unknown origin, a turn past the origin's last, or an id already
// taken is refused and starts nothing.
func (c *Client) Fork(ctx context.Context, origin string, req signals.ForkRequest) (signals.SessionConfig, error) {
	st, err := c.Status(ctx, origin)
	if err != nil {
		return signals.SessionConfig{}, err
	}
	if req.BeforeTurn < 0 {
		return signals.SessionConfig{}, signals.Reject(signals.RejectInvalidRequest, "before_turn %d: want 0 (all of it) or a turn of session %s", req.BeforeTurn, origin)
	}
	if req.BeforeTurn > 0 {
		tr, err := c.Transcript(ctx, origin, signals.TranscriptRequest{MaxBytes: 1})
		if err != nil {
			return signals.SessionConfig{}, err
		}
		if req.BeforeTurn > int64(tr.Turns)+1 {
			return signals.SessionConfig{}, signals.Reject(signals.RejectInvalidRequest, "before_turn %d: session %s has %d turns (want at most %d)", req.BeforeTurn, origin, tr.Turns, tr.Turns+1)
		}
	}
	id := req.SessionID
	if id == "" {
		id = "fork-" + signals.NewID()
	}
	if _, err := c.Status(ctx, id); err == nil {
		return signals.SessionConfig{}, signals.Reject(signals.RejectInvalidRequest, "session %s exists: a fork needs a new id", id)
	} else if r := (*signals.Rejection)(nil); !errors.As(err, &r) || r.Type != signals.RejectUnknownSession {
		return signals.SessionConfig{}, err
	}
	agent := st.Agent
	if agent == "default" { // what status names a session that names no profile
		agent = ""
	}
	cfg := signals.SessionConfig{SessionID: id, Agent: agent, Workspace: req.Workspace, Policy: st.Policy, McpServers: req.McpServers,
		ForkOf: &signals.ForkOrigin{SessionID: origin, BeforeTurn: req.BeforeTurn}, Access: signals.Access{Owner: req.Owner}}
	if _, err := c.Start(ctx, cfg, signals.AttachRequest{}); err != nil {
		return signals.SessionConfig{}, err
	}
	return cfg, nil
}

// Transcript queries a session's conversation as the transcript a new agent session is
// seeded with.
func (c *Client) Transcript(ctx context.Context, sessionID string, req signals.TranscriptRequest) (signals.TranscriptResult, error) {
	var res signals.TranscriptResult
	return res, c.query(ctx, sessionID, signals.QueryTranscript, &res, req)
}

// Rewind goes back to the end of session origin's turn toTurn as a new session: a fork before
// turn toTurn+1 (req.BeforeTurn is set here), so its agent remembers the conversation to that
// turn and, on workers with workspace checkpoints, its first turn starts with the files that
// turn left. The origin is untouched. A turn the origin has not had is refused and starts
// nothing.
func (c *Client) Rewind(ctx context.Context, origin string, toTurn int64, req signals.ForkRequest) (signals.SessionConfig, error) {
	if toTurn <= 0 {
		return signals.SessionConfig{}, signals.Reject(signals.RejectInvalidRequest, "to_turn %d: want the turn of session %s whose end to go back to", toTurn, origin)
	}
	tr, err := c.Transcript(ctx, origin, signals.TranscriptRequest{MaxBytes: 1})
	if err != nil {
		return signals.SessionConfig{}, err
	}
	if toTurn > int64(tr.Turns) {
		return signals.SessionConfig{}, signals.Reject(signals.RejectInvalidRequest, "to_turn %d: session %s has %d turns", toTurn, origin, tr.Turns)
	}
	req.BeforeTurn = toTurn + 1
	return c.Fork(ctx, origin, req)
}

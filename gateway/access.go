package gateway

// Who may use which session on a connection. A connection that a door authenticated as a
// person (ConnOptions.Identity: the deck's named tokens) sees and acts on the sessions
// signals.RoleFor gives that person, under the door's sharing rule (ConnOptions.Sharing): a
// session not theirs to see answers as an unknown one would, and one they may only watch
// takes no prompt, steer, cancel, setting or answer from them. A connection without an
// identity (`starter acp` on the user's own machine, an unnamed token) stands for the
// deployment, as its role allows.

import (
	"context"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
	"github.com/tacp-dev/tacp/tacpclient"
)

// sessionRole returns the role the connection's person has on session id: the
// connection's own role when it has no identity, "" when the session is not theirs to see.
// An unknown session gives the connection's role: what follows answers it as unknown.
func (c *conn) sessionRole(ctx context.Context, id string) (string, error) {
	if c.ident == nil || c.ident.Name == "" {
		return c.role, nil
	}
	acc, err := c.client().Access(ctx, id)
	if rej, ok := rejection.As(err); ok && rej.Type == signals.RejectUnknownSession {
		return c.role, nil
	}
	if err != nil {
		return "", rpcErr(err)
	}
	return signals.RoleFor(acc, *c.ident, c.sharing), nil
}

// mayWatch refuses session id when it is not the person's to see, as an unknown one.
func (c *conn) mayWatch(ctx context.Context, id string) (string, error) {
	role, err := c.sessionRole(ctx, id)
	if err == nil && role == "" {
		err = rpcErr(signals.Reject(signals.RejectUnknownSession, "no session %s", id))
	}
	return role, err
}

// mayAct refuses session id unless the person may act on it (what = what they tried).
func (c *conn) mayAct(ctx context.Context, id, what string) error {
	role, err := c.mayWatch(ctx, id)
	if err != nil {
		return err
	}
	if role != signals.RoleController {
		reason := "you may watch session " + id + " but not " + what + " in it: it is not shared with you to act"
		return rpcError(codeForbidden, "Forbidden", reason, map[string]any{"type": signals.RejectForbidden, "error": reason})
	}
	return nil
}

// owned returns cfg as a session the connection's person creates: theirs, under the door's
// sharing rule.
func (c *conn) owned(cfg signals.SessionConfig) signals.SessionConfig {
	if c.ident != nil {
		cfg.Owner = c.ident.Name
	}
	return cfg
}

// visibleWhere narrows session/list's visibility query to the sessions the person may see
// (signals.VisibleWhere); listable still checks each.
func (c *conn) visibleWhere() string {
	if c.ident == nil {
		return ""
	}
	return signals.VisibleWhere(*c.ident, c.sharing)
}

// listable reports whether a session of s's access is the person's to see.
func (c *conn) listable(s tacpclient.SessionInfo) bool {
	return c.ident == nil || c.ident.Name == "" || signals.RoleFor(s.Access, *c.ident, c.sharing) != ""
}

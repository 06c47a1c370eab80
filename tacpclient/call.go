package tacpclient

import (
	"context"

	"github.com/tacp-dev/tacp/signals"
)

// Call sends update u with req to session sessionID and waits for its result. A refused
// update answers with a *signals.Rejection (rejection.As); a session that does not exist, with
// RejectUnknownSession.
func Call[Req, Res any](ctx context.Context, c *Client, sessionID string, u signals.Update[Req, Res], req Req) (Res, error) {
	var res Res
	return res, c.update(ctx, sessionID, u.Name, req, &res)
}

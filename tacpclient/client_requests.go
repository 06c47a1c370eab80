package tacpclient

import (
	"context"

	"github.com/tacp-dev/tacp/signals"
)

// RetryNow ends the wait of a session's limited turn: it runs again now.
func (c *Client) RetryNow(ctx context.Context, sessionID string, req signals.RetryNowRequest) (signals.RetryNowResult, error) {
	return Call(ctx, c, sessionID, signals.Updates.RetryNow, req)
}

// ElicitationRespond answers an open question of a session; a later answer gets the
// existing resolution back.
func (c *Client) ElicitationRespond(ctx context.Context, sessionID string, req signals.ElicitationRespondRequest) (signals.ElicitationRespondResult, error) {
	return Call(ctx, c, sessionID, signals.Updates.ElicitationRespond, req)
}

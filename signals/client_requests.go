package signals

import "context"

// RetryNow ends the wait of a session's limited turn: it runs again now.
func (c *Client) RetryNow(ctx context.Context, sessionID string, req RetryNowRequest) (RetryNowResult, error) {
	return Call(ctx, c, sessionID, Updates.RetryNow, req)
}

// ElicitationRespond answers an open question of a session; a later answer gets the
// existing resolution back.
func (c *Client) ElicitationRespond(ctx context.Context, sessionID string, req ElicitationRespondRequest) (ElicitationRespondResult, error) {
	return Call(ctx, c, sessionID, Updates.ElicitationRespond, req)
}

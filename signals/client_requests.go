package signals

import "context"

// RetryNow ends the wait of a session's limited turn: it runs again now.
func (c *Client) RetryNow(ctx context.Context, sessionID string, req RetryNowRequest) (RetryNowResult, error) {
	var res RetryNowResult
	return res, c.update(ctx, sessionID, UpdateRetryNow, req, &res)
}

// ElicitationRespond answers an open question of a session; a later answer gets the
// existing resolution back.
func (c *Client) ElicitationRespond(ctx context.Context, sessionID string, req ElicitationRespondRequest) (ElicitationRespondResult, error) {
	var res ElicitationRespondResult
	return res, c.update(ctx, sessionID, UpdateElicitationRespond, req, &res)
}

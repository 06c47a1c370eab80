package tacpclient

// Steering "whatever runs": what a client does when the person gave text but no steer token
// (the CLI's `starter steer` without --expect, the deck's steer without expected_turn_id,
// an ACP editor's _session/steering). One rule for all of them, in SteerLive.

import (
	"context"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
)

// SteerLiveAttempts is how many times SteerLive offers a steer: the first try with the token
// it read, then a retry each time another steer moves the token first.
const SteerLiveAttempts = 3

// SteerLiveOptions are the optional fields of SteerLive's steer request.
type SteerLiveOptions struct {
	// ClientMsgID identifies the steer (empty: a new id). Every attempt sends the same id,
	// so an attempt that was accepted but whose answer was lost comes back a duplicate.
	ClientMsgID string
	// ViewerID is the attached viewer steering, if any.
	ViewerID string
	// By names who steers (SteerRequest.By).
	By string
}

// SteerLive steers the turn that runs when it is called, for a caller that holds no steer
// token. The rule:
//
//   - It reads the session's live token and compare-and-swaps the steer on it.
//   - When no turn runs it sends nothing and returns a *signals.Rejection of type
//     RejectNoLiveTurn: the caller asked to steer, not to start a turn (an ACP face whose
//     protocol starts one when idle does that itself).
//   - When another steer moves the token first (RejectStaleTurn), it steers again on the
//     token the session reported, the same turn further on or the turn that replaced it,
//     up to SteerLiveAttempts tries; past them the last stale_turn is returned.
//
// Every other rejection (no_steer_channel, session_closed, ...) is returned as it came.
// A caller that shows a person a token should send Steer with it instead: a stale token
// is then refused, which is the point of the compare-and-swap.
func (c *Client) SteerLive(ctx context.Context, sessionID, text string, opts SteerLiveOptions) (signals.SteerResult, error) {
	read := func() (string, error) {
		st, err := c.Status(ctx, sessionID)
		return st.SteerToken, err
	}
	steer := func(req signals.SteerRequest) (signals.SteerResult, error) { return c.Steer(ctx, sessionID, req) }
	return steerLive(read, steer, signals.SteerRequest{Text: text, ClientMsgID: opts.ClientMsgID, ViewerID: opts.ViewerID, By: opts.By})
}

// steerLive is SteerLive's rule over a token reader and a steer sender.
func steerLive(read func() (string, error), steer func(signals.SteerRequest) (signals.SteerResult, error), req signals.SteerRequest) (signals.SteerResult, error) {
	if req.ClientMsgID == "" {
		req.ClientMsgID = signals.NewID()
	}
	token, err := read()
	if err != nil {
		return signals.SteerResult{}, err
	}
	for attempt := 1; ; attempt++ {
		if token == "" {
			return signals.SteerResult{}, signals.Reject(signals.RejectNoLiveTurn, "no turn is running")
		}
		req.ExpectedTurnID = token
		res, err := steer(req)
		rej, ok := rejection.As(err)
		if !ok || rej.Type != signals.RejectStaleTurn || attempt == SteerLiveAttempts {
			return res, err
		}
		d, ok := rej.Details.(signals.StaleTurnDetails)
		if !ok {
			return res, err
		}
		token = d.Actual
	}
}

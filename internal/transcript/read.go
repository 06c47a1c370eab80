package transcript

// Reading a session's journal: all of what is retained, or one turn as it happens.

import (
	"context"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

// Page calls each with every retained event of the session after seq after, in order,
// paging through the events query up to the journal's end. When retention trimmed events
// the caller has not seen, gap is called first with the seq asked after and the first one
// retained.
func Page(ctx context.Context, c *tacpclient.Client, sessionID string, after int64, gap func(after, firstRetained int64), each func(signals.Event)) error {
	for {
		res, err := c.Events(ctx, sessionID, after, 0)
		if err != nil {
			return err
		}
		if res.Gap && gap != nil {
			gap(after, res.FirstRetainedSeq)
		}
		for _, ev := range res.Events {
			each(ev)
			after = ev.Seq
		}
		if len(res.Events) == 0 || after >= res.LastSeq {
			return nil
		}
	}
}

// FollowTurn calls each with the events of turn turnID after seq after, as the session
// journals them, up to and including the turn's terminal event (turn.ended or
// turn.failed), which it returns.
func FollowTurn(ctx context.Context, c *tacpclient.Client, sessionID string, after, turnID int64, each func(signals.Event)) (signals.Event, error) {
	var last signals.Event
	err := c.Watch(ctx, sessionID, after, func(ev signals.Event) bool {
		if ev.TurnID != turnID {
			return true
		}
		each(ev)
		if ev.Kind == signals.EventTurnEnded || ev.Kind == signals.EventTurnFailed {
			last = ev
			return false
		}
		return true
	})
	return last, err
}

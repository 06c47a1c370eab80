package activities

// The session's transcript, asked of the session (and of a fork's origin) to seed a new agent
// session.

import (
	"context"
	"fmt"
	"strings"

	"github.com/tacp-dev/tacp/signals"
)

// transcript asks the session for its conversation before this turn, for seeding a new
// agent session (a query: no history, asked only when the agent's session was lost).
func (r *Runner) transcript(ctx context.Context, in signals.RunTurnInput) (signals.TranscriptResult, error) {
	own, err := r.queryTranscript(ctx, in.SessionWorkflowID, signals.TranscriptRequest{BeforeTurn: in.TurnID, MaxBytes: r.CarryContextBytes})
	if err != nil || in.ForkOf == nil {
		return own, err
	}
	// A fork's conversation begins in its origin: that part first, under a header that says
	// where it comes from, within what the fork's own part leaves of the bound.
	limit := r.CarryContextBytes
	if limit <= 0 {
		limit = signals.DefaultTranscriptBytes
	}
	budget := limit - len(own.Text) - 2
	if budget < 2*signals.MaxTranscriptHeaderBytes {
		own.Truncated = true
		return own, nil
	}
	origin, err := r.queryTranscript(ctx, signals.SessionWorkflowID(in.ForkOf.SessionID), signals.TranscriptRequest{
		BeforeTurn: in.ForkOf.BeforeTurn, MaxBytes: budget, Header: signals.ForkTranscriptHeader(*in.ForkOf),
	})
	if err != nil {
		return own, fmt.Errorf("the conversation of session %s, which this session forks: %w", in.ForkOf.SessionID, err)
	}
	res := signals.TranscriptResult{Text: origin.Text, Turns: origin.Turns + own.Turns, Truncated: origin.Truncated || own.Truncated}
	if own.Text != "" {
		res.Text = strings.TrimPrefix(res.Text+"\n\n"+own.Text, "\n\n")
	}
	return res, nil
}

// queryTranscript asks workflow id for its transcript.
func (r *Runner) queryTranscript(ctx context.Context, id string, req signals.TranscriptRequest) (signals.TranscriptResult, error) {
	var res signals.TranscriptResult
	v, err := r.Client.QueryWorkflow(ctx, id, "", signals.QueryTranscript, req)
	if err != nil {
		return res, err
	}
	return res, v.Get(&res)
}

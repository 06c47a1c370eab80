package activities

// Between-turn batching: what an agent says while no turn of its session runs (a late
// update after its answer, a replay it was not asked for) is journaled all the same
// (contract §7), sent to the session as turn_events of turn 0 keyed by the agent's host id.

import (
	"context"
	"encoding/json"

	"github.com/tacp-dev/tacp/signals"
)

// journalBetweenTurns starts a's between-turn batcher and taps the agent into it; a turn
// taps the agent into its own batcher while it runs, and release taps it back.
func (h *Host) journalBetweenTurns(a *hostedAgent) {
	wfID := signals.SessionWorkflowID(a.sessionID)
	a.between = newBatcher(h.FlushInterval, h.FlushInterval, h.FlushBytes, func(ctx context.Context, batch int64, events []json.RawMessage) error {
		return signalWithRetry(ctx, h.Client, h.Logger, wfID, signals.SignalTurnEvents, signals.TurnEventsSignal{
			Host: a.id, Batch: batch, Events: events,
		})
	})
	go a.between.run(context.Background())
	a.proc.setTap(a.between.add)
}

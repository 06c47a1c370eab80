package activities

// Delivery: the Deliver activity, polled on this worker's own task queue, carries the
// workflow's decisions (steer, cancel, permission answers, settings) into a turn running
// here within milliseconds (contract §7). With Delivery.Async it answers as soon as the turn
// has taken the decision (DeliveryResult.Taken), so the next one is not held behind it.

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/tacp-dev/tacp/signals"
)

// Deliver carries one decision into a turn running on this host.
func (h *Host) Deliver(ctx context.Context, d signals.Delivery) (signals.DeliveryResult, error) {
	h.init()
	h.mu.Lock()
	lt := h.turns[turnKey{d.SessionID, d.TurnID}]
	h.mu.Unlock()
	if lt == nil || (d.Attempt != 0 && lt.attempt != d.Attempt) {
		return signals.DeliveryResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("turn %d of session %s is not running on this host", d.TurnID, d.SessionID), signals.TypeTurnNotHere, nil)
	}
	switch d.Kind {
	case signals.DeliverCancel:
		lt.requestCancel()
		return signals.DeliveryResult{Taken: d.Async}, nil
	case signals.DeliverSteer:
		return lt.deliverSteer(ctx, d)
	case signals.DeliverPermission:
		lt.mu.Lock()
		ch := lt.perms[d.RequestID]
		delete(lt.perms, d.RequestID)
		lt.mu.Unlock()
		if ch == nil {
			return signals.DeliveryResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("permission request %s is not waiting on this host", d.RequestID), signals.TypeTurnNotHere, nil)
		}
		ch <- permissionResponse(d.Outcome, d.OptionID)
		return signals.DeliveryResult{Taken: d.Async}, nil
	case signals.DeliverElicitation:
		if !lt.deliverElicitation(d) {
			return signals.DeliveryResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("question %s is not waiting on this host", d.RequestID), signals.TypeTurnNotHere, nil)
		}
		return signals.DeliveryResult{Taken: d.Async}, nil
	case signals.DeliverWatch:
		if lt.goLive != nil {
			lt.goLive()
		}
		return signals.DeliveryResult{Taken: d.Async}, nil
	case signals.DeliverSettings:
		if d.Choices == nil || lt.applySettings == nil {
			return signals.DeliveryResult{Taken: d.Async}, nil
		}
		settings, err := lt.applySettings(ctx, *d.Choices)
		return signals.DeliveryResult{Taken: d.Async, Settings: settings}, err
	}
	return signals.DeliveryResult{}, temporal.NewNonRetryableApplicationError("unknown delivery kind "+d.Kind, "invalid_request", nil)
}

// deliverSteer hands a steer to the turn's loop. An Async one is answered Taken as soon as
// the loop has it (its outcome follows by delivery_outcome, before the turn's end); any
// other is answered when it has been delivered, as before Async existed.
func (lt *liveTurn) deliverSteer(ctx context.Context, d signals.Delivery) (signals.DeliveryResult, error) {
	req := steerRequest{text: d.Text, reply: make(chan steerReply, 1), async: d.Async, delivery: d}
	select {
	case lt.steers <- req:
	case <-lt.done:
		return signals.DeliveryResult{}, errors.New("the turn ended before the steer reached it")
	case <-ctx.Done():
		return signals.DeliveryResult{}, ctx.Err()
	}
	if d.Async {
		return signals.DeliveryResult{Taken: true}, nil
	}
	select {
	case r := <-req.reply:
		return signals.DeliveryResult{How: r.how}, r.err
	case <-ctx.Done():
		return signals.DeliveryResult{}, ctx.Err()
	}
}

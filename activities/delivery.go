package activities

// Delivery: the Deliver activity, polled on this worker's own task queue, carries the
// workflow's decisions (steer, cancel, permission answers, settings) into a turn running
// here within milliseconds (DESIGN §7).

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/tacp-dev/tacp/signals"
)

// ErrTurnNotHere is the ApplicationError type of a delivery for a turn this host does not
// run (it ended, or it runs elsewhere after a failover).
const ErrTurnNotHere = "turn_not_here"

// Deliver carries one decision into a turn running on this host.
func (h *Host) Deliver(ctx context.Context, d signals.Delivery) (signals.DeliveryResult, error) {
	h.init()
	h.mu.Lock()
	lt := h.turns[turnKey{d.SessionID, d.TurnID}]
	h.mu.Unlock()
	if lt == nil || (d.Attempt != 0 && lt.attempt != d.Attempt) {
		return signals.DeliveryResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("turn %d of session %s is not running on this host", d.TurnID, d.SessionID), ErrTurnNotHere, nil)
	}
	switch d.Kind {
	case signals.DeliverCancel:
		lt.requestCancel()
		return signals.DeliveryResult{}, nil
	case signals.DeliverSteer:
		req := steerRequest{text: d.Text, reply: make(chan steerReply, 1)}
		select {
		case lt.steers <- req:
		case <-lt.done:
			return signals.DeliveryResult{}, errors.New("the turn ended before the steer reached it")
		case <-ctx.Done():
			return signals.DeliveryResult{}, ctx.Err()
		}
		select {
		case r := <-req.reply:
			return signals.DeliveryResult{How: r.how}, r.err
		case <-ctx.Done():
			return signals.DeliveryResult{}, ctx.Err()
		}
	case signals.DeliverPermission:
		lt.mu.Lock()
		ch := lt.perms[d.RequestID]
		delete(lt.perms, d.RequestID)
		lt.mu.Unlock()
		if ch == nil {
			return signals.DeliveryResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("permission request %s is not waiting on this host", d.RequestID), ErrTurnNotHere, nil)
		}
		ch <- permissionResponse(d.Outcome, d.OptionID)
		return signals.DeliveryResult{}, nil
	case signals.DeliverSettings:
		if d.Choices == nil || lt.applySettings == nil {
			return signals.DeliveryResult{}, nil
		}
		return signals.DeliveryResult{}, lt.applySettings(ctx, *d.Choices)
	}
	return signals.DeliveryResult{}, temporal.NewNonRetryableApplicationError("unknown delivery kind "+d.Kind, "invalid_request", nil)
}

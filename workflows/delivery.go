package workflows

// The shell's side of the delivery lane (core_delivery.go holds its rules): each delivery
// the core takes off the lane is sent as a short Deliver activity on the task queue of the
// worker hosting the turn, and its result fed back. A host that is gone shows as a
// schedule-to-start timeout.

import (
	"errors"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
)

// deliverNext sends the oldest queued delivery (cmdDeliver), unless the core drops it.
func (s *session) deliverNext(ctx workflow.Context) {
	d, send := s.takeDelivery(workflow.Now(ctx))
	if !send {
		return
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              s.Turn.HostQueue,
		ScheduleToStartTimeout: deliverScheduleToStart,
		StartToCloseTimeout:    deliverStartToClose,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:                deliverySummary(d),
	})
	f := workflow.ExecuteActivity(actx, signals.ActivityDeliver, d)
	var res signals.DeliveryResult
	s.pending++
	workflow.Go(ctx, func(ctx workflow.Context) {
		err := f.Get(ctx, &res)
		s.pending--
		var timeout *temporal.TimeoutError
		hostGone := errors.As(err, &timeout) && timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
		s.deliveryDone(workflow.Now(ctx), d, res, err, hostGone)
	})
}

package tacpworker

// Admission (activities/capacity.go): the session worker's slot supplier for turns, and the
// session queue's backlog as the worker's gauges.

import (
	"context"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/tacp-dev/tacp/activities"
)

// sdkSlots is the SDK's own default slot count for what admission leaves alone: workflow
// tasks (sessions' decisions and viewers' queries), local activities and Nexus tasks.
const sdkSlots = 1000

// backlogEvery is how often the worker reads the session queue's backlog.
const backlogEvery = 15 * time.Second

// admission is the worker's turn gate and the session worker's tuner, which gives turns
// the gate's slots.
func admission(opts Options) (*activities.TurnGate, worker.WorkerTuner, error) {
	n := opts.MaxTurns
	if n == 0 {
		n = opts.MaxAgents
		if n <= 0 {
			n = activities.DefaultMaxAgents
		}
	}
	gate := activities.NewTurnGate(n, opts.MetricsHandler)
	fixed := func() worker.SlotSupplier {
		s, _ := worker.NewFixedSizeSlotSupplier(sdkSlots)
		return s
	}
	tuner, err := worker.NewCompositeTuner(worker.CompositeTunerOptions{
		WorkflowSlotSupplier:        fixed(),
		ActivitySlotSupplier:        gate.TurnSlots(),
		LocalActivitySlotSupplier:   fixed(),
		NexusSlotSupplier:           fixed(),
		SessionActivitySlotSupplier: fixed(),
	})
	return gate, tuner, err
}

// reportBacklog reports the turns scheduled on the session queue that no worker has taken
// (tacp_turns_waiting_capacity) and how long the oldest has waited, every backlogEvery
// until ctx ends. A server that does not report task queue stats leaves them unreported.
func reportBacklog(ctx context.Context, c client.Client, namespace, queue string, metrics client.MetricsHandler, log *slog.Logger) {
	tick := time.NewTicker(backlogEvery)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, backlogEvery)
		resp, err := c.WorkflowService().DescribeTaskQueue(rctx, &workflowservice.DescribeTaskQueueRequest{
			Namespace:     namespace,
			TaskQueue:     &taskqueuepb.TaskQueue{Name: queue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
			TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
			ReportStats:   true,
		})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Debug("session queue backlog not read", "error", err)
		} else if st := resp.GetStats(); st != nil {
			metrics.Gauge(activities.MetricTurnsWaitingCapacity).Update(float64(st.GetApproximateBacklogCount()))
			metrics.Gauge(activities.MetricTurnQueueAge).Update(st.GetApproximateBacklogAge().AsDuration().Seconds())
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

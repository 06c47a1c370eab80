package activities

// The turn runner's metric names, and the counting of the turn_events batches it sends.

import (
	"encoding/json"

	"go.temporal.io/sdk/client"
)

// MetricSandboxRefusals counts what the kernel sandbox refused that tacp can see: an agent
// start whose sandbox the path rules refused (kind "start"), and connections the egress
// proxy of an allowlist refused (kind "egress", counted at the next turn's start on the
// worker). What Landlock itself refuses is the agent's EACCES, counted by nobody (the
// kernel's audit log has it where audit is on).
const MetricSandboxRefusals = "tacp_sandbox_refusals"

// Metric names of the turn runner, as recorded (the Prometheus exporter adds _total).
// Sizes are counters, not histograms: the SDK's metrics handler offers counters, gauges and
// timers only, and a gauge would keep the last batch alone. events/batches is the mean batch.
const (
	MetricEventBatches     = "tacp_event_batches"
	MetricEventBatchEvents = "tacp_event_batch_events"
	MetricEventBatchBytes  = "tacp_event_batch_bytes"
)

// countBatch counts one turn_events batch sent to the session: its events and their bytes.
func countBatch(h client.MetricsHandler, events []json.RawMessage) {
	n := 0
	for _, ev := range events {
		n += len(ev)
	}
	h.Counter(MetricEventBatches).Inc(1)
	h.Counter(MetricEventBatchEvents).Inc(int64(len(events)))
	h.Counter(MetricEventBatchBytes).Inc(int64(n))
}

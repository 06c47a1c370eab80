package session

// The session's own metrics (README "Telemetry"). They go through the SDK's workflow
// metrics handler, which drops every record while a workflow task replays: a metric counts
// what happened once, adds no command to the history, and reads only workflow state and
// workflow.Now, so the workflow stays deterministic. Tags take small fixed sets of values (an
// outcome, a rejection type, who decided) and never an id, a prompt or a tool call.
//
// Steer rejections are counted only for the signal twin, whose handler journals them. An
// update is rejected by its validator, which must have no side effects, and never reaches
// its handler: the caller gets the rejection, and with tracing on the ValidateUpdate span
// carries it as its error (the SDK has no per-update metric).

import (
	"slices"

	"github.com/tacp-dev/tacp/signals"
)

// Metric names, as recorded (the Prometheus exporter adds _total to counters and _seconds
// to timers).
const (
	MetricTurnsStarted    = "tacp_turns_started"
	MetricTurnsFinished   = "tacp_turns_finished"
	MetricSteers          = "tacp_steers"
	MetricPermissionWaits = "tacp_permission_waits"
)

// Turn outcomes beyond the agent's stop reasons.
const (
	outcomeFailed = "failed"
	outcomeOther  = "other"
)

// stopReasons are ACP's stop reasons: any other text an agent answers counts as "other",
// so that an agent cannot grow the set of series.
var stopReasons = []string{"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"}

// turnOutcome is a turn's end as the turns-finished metric counts it: its stop reason, or
// failed, or other for a stop reason ACP does not name.
func turnOutcome(fin *signals.TurnFinishedSignal) string {
	switch {
	case fin.Error != "":
		return outcomeFailed
	case !slices.Contains(stopReasons, fin.StopReason):
		return outcomeOther
	}
	return fin.StopReason
}

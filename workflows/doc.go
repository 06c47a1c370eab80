// Package workflows holds tacp's Temporal workflows: SessionWorkflow, one per session, and
// TurnWorkflow, one per turn (docs/contract.md §2, §6).
//
// The package reads as etcd-io/raft does: pure cores that decide, and a thin shell that
// talks to the runtime. The cores import neither go.temporal.io/sdk/workflow nor the ACP
// SDK; they read no clock (the time comes in as `now`) and draw no random number, so tests
// drive them synchronously (table tests, fuzz targets, and the data-driven scenario files
// of testdata/scenarios, each citing the contract section it proves).
//
// The cores (pure):
//
//   - core.go: sessionCore, the session's state machine: the state carried across
//     continue-as-new, prompts, steers, cancel and close, the turn runner's reports
//     (attempt watermarks, turn.restarted, "finish waits for the last batch"), status, and
//     next, which alone says what the shell does next.
//   - core_signals.go: the signals the core takes, their drain order, the signal twins of
//     the updates; the start of a run (newSessionCore).
//   - core_delivery.go: the delivery lane (Async deliveries, DeliveryID, the steer
//     outcomes awaited, the steer-before-end hold) and the permission lifecycle.
//   - core_belts.go: viewers, grace, the turn deadline and its paused clock, policy
//     changes, and the alarm clock (which alarm is next, what fires when it rings).
//   - core_settings.go, core_mcp.go: the agent's offer and the clients' choices,
//     set_mcp_servers.
//   - steer.go (the steer CAS of contract §6), queue.go, journal.go, dedup.go,
//     permission.go (the policy), settings.go (the agent's offer), affinity.go,
//     config.go, transcript.go, metrics.go (metric names and outcomes).
//
// The shell (uses workflow.Context):
//
//   - session.go: SessionWorkflow: registers the update, query and signal handlers, feeds
//     them to the core with workflow.Now, runs the main loop (await next, carry it out:
//     start a TurnWorkflow, request its cancel, continue as new, close), upserts the search
//     attributes, and answers the core's sessionEnv (the last GetVersion ids, metrics, logs).
//   - delivery.go: runs each delivery the core takes off the lane as a Deliver activity on
//     the turn's host queue.
//   - belts.go: the one alarm timer.
//   - mcp.go: set_mcp_servers' signal twin, whose policy check is a SideEffect.
//   - admission.go: the worker's check of a session's config at its start (a SideEffect)
//     and ProfilesWorkflow.
//   - versioning.go: Worker Versioning: the build's options, the removal rule of the
//     GetVersion ids.
//   - turn.go: TurnWorkflow, which runs the RunTurn activity with its retries and
//     failover and reports the turn's end to the session.
//
// Every recorded history under testdata/histories replays (replay_test.go). Runs are
// pinned to the build that started them (versioning.go): a change to the commands a
// session produces ships as a new build, needs no workflow.GetVersion, and reaches a
// running session when it continues as new at its next idle safe point.
package workflows

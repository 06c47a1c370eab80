// Package workflows holds tacp's Temporal workflows: SessionWorkflow, one per session, and
// TurnWorkflow, one per turn (docs/contract.md §2, §6).
//
// The package reads as etcd-io/raft does: pure cores that decide, and a thin shell that
// talks to the runtime. The cores import neither go.temporal.io/sdk/workflow nor the ACP
// SDK; they read no clock (the time comes in as `now`) and draw no random number, so tests
// drive them synchronously (table tests, fuzz targets, and the data-driven scenario files
// of testdata/scenarios, each citing the contract section it proves). A test holds every
// file of the list below to it (purity_test.go): no Temporal import, no process, socket or
// random source, no clock read, no goroutine.
//
// The cores (pure):
//
//   - core_step.go: the session core's two entry points, as raft's RawNode: Step(now, Input)
//     over a closed set of inputs (an update, a raw signal, a delivery's answer, a child
//     started or ended, a request done, the alarm) and Ready(runInfo), everything the shell
//     must do with its data (Cmd: StartTurn | Deliver | RequestCancel | RetryNow |
//     ContinueAsNew | Close; SearchAttrs, Details, Alarm, Metrics); the one dispatch (wake,
//     carryOut) that the shell and the tests' rig both turn, each with its executor.
//   - core_updates.go: the update table (name, request type, check, apply): the handlers,
//     the validators, the signal twins and the scenario verbs come from it.
//   - core.go: sessionCore's state (carried across continue-as-new), its sessionEnv, the
//     journal helper.
//   - core_turn.go: the turn's life: LiveTurn (its drive asked, running, ended: the
//     session's own or a TurnWorkflow child's; its cancel none, wanted, sent; Here), beginTurn, the runner's reports (attempt
//     watermarks, turn.restarted, "finish waits for the last batch"), maybeFinish, the
//     between-turn journal.
//   - core_prompts.go: prompt, steer, cancel and close, each a check and an apply.
//   - core_status.go, core_usage.go: the state, Current Details, the search attributes'
//     values, the status query; the usage totals.
//   - core_next.go: next, which alone says which command Ready hands out, and the
//     continue-as-new policy, and the ResumeTurn of a Here turn the run before drove.
//   - core_signals.go: the runner's signals, the drain order, the start of a run
//     (newSessionCore).
//   - core_delivery.go: the delivery lane (Async deliveries, DeliveryID, the steer
//     outcomes awaited, the steer-before-end hold).
//   - core_permissions.go: a permission request's life (journaled, decided by the policy
//     of permission.go or asked, resolved once: an answer, its deadline, the turn's
//     cancel, end or restart; withdrawn and asked again), its wait's metric, set_policy
//     and permission_forget.
//   - core_belts.go: viewers, grace, the turn deadline and its paused clock, and the
//     alarm clock (which alarm is next, what fires when it rings).
//   - core_settings.go, core_mcp.go, core_limits.go, core_title.go, request_elicitation.go:
//     the agent's offer and the clients' choices, set_mcp_servers, a limited turn's wait,
//     set_title, the agent's questions.
//   - steer.go (the steer CAS of contract §6), queue.go, journal.go, dedup.go,
//     permission.go (the policy), settings.go (the agent's offer),
//     config.go, transcript.go, metrics.go (metric names and outcomes).
//
// The shell (uses workflow.Context):
//
//   - session.go: SessionWorkflow: registers the update table's handlers and validators
//     (answering what a validator asks of the worker: admission, the MCP policy) and the
//     queries, feeds every input to the core's Step with workflow.Now, runs the main loop
//     (await HasReady, wake), and carries out each command as its executor (runtimeExec):
//     a TurnWorkflow child, a Deliver activity, a cancel request, a retry-now signal, a
//     continue-as-new, a close with ReleaseAgent; the search attributes, the one alarm
//     timer, the metrics, and the core's sessionEnv (GetVersion ids, logs).
//   - admission.go: the worker's check of a session's config at its start (a SideEffect),
//     its answers to the core's Ask, and ProfilesWorkflow.
//   - versioning.go: Worker Versioning: the build's options, the removal rule of the
//     GetVersion ids.
//   - turn.go: a turn's drive (driveTurn): the RunTurn activity with its retries and
//     failover, its waits for limits (turn_limits.go), its end reported to the session;
//     TurnWorkflow runs it as a child for the runs recorded before Here turns.
//   - affinity.go: where a turn runs after its attempt on the previous host's queue,
//     decided from how that attempt ended (Temporal's timeout, cancel and application
//     errors, so it is the shell's).
//   - turn_here.go: a Here turn: the session drives its turn itself, and the next run
//     adopts the attempt a run that continued as new left running (ResumeTurn).
//
// Every recorded history under testdata/histories replays (replay_test.go). Runs are
// pinned to the build that started them (versioning.go): a change to the commands a
// session produces ships as a new build, and reaches a running session when it continues
// as new at its next idle safe point; only a change the unversioned runs started before
// versioning would replay wrongly takes a change id (turn-in-session).
package workflows

// Package session is the pure core of a tacp session (docs/contract.md §2–6), in the manner
// of etcd-io/raft's RawNode: it decides and does nothing. It imports neither Temporal nor
// the ACP SDK, reads no clock (the time comes in as now), draws no random number and starts
// no goroutine (purity_test.go holds it to that), so tests drive it synchronously: table
// tests, fuzz targets, and the data-driven scenario files of testdata/scenarios, each citing
// the contract section it proves. The shell, package workflows, feeds it and carries out
// what it says.
//
//   - core_step.go: the two entry points. Step(now, Input) takes a closed set of inputs (an
//     update, a raw signal, a delivery's answer, a drive started or ended, a request done,
//     the alarm); Ready(RunInfo) is everything the shell must do (Cmd: StartTurn | Deliver |
//     RequestCancel | RetryNow | ContinueAsNew | Close; SearchAttrs, Details, Alarm,
//     Metrics). Wake and CarryOut are the one dispatch the shell and the tests' rig both
//     turn, each with its Executor. RunInput is a run's input.
//   - core_updates.go: the update table (name, request type, check, apply): the shell's
//     handlers and validators, the signal twins and the scenario verbs come from it.
//   - core.go: Core's state (carried across continue-as-new), its Env (the runtime's
//     logs), the journal helper. build.go: what a build fixes.
//   - core_turn.go: the turn's life: LiveTurn (its drive asked, running, ended; its
//     cancel none, wanted, sent), the runner's
//     reports (attempt watermarks, turn.restarted, "finish waits for the last batch"), the
//     between-turn journal.
//   - core_prompts.go: prompt, steer, cancel and close, each a check and an apply.
//   - core_status.go, core_usage.go: the state, Current Details, the search attributes'
//     values, the status query; the usage totals.
//   - core_next.go: next, which alone says which command Ready hands out, the
//     continue-as-new policy, and the ResumeTurn of a turn the run before drove.
//   - core_signals.go: the runner's signals, the drain order, the start of a run (New).
//   - core_delivery.go: the delivery lane (Async deliveries, DeliveryID, the steer outcomes
//     awaited, the steer-before-end hold).
//   - core_permissions.go: a permission request's life (journaled, decided by the policy of
//     permission.go or asked, resolved once: an answer, its deadline, the turn's cancel, end
//     or restart; withdrawn and asked again), its wait's metric, set_policy and
//     permission_forget.
//   - core_belts.go: viewers, grace, the turn deadline and its paused clock, and the alarm
//     clock (which alarm is next, what fires when it rings).
//   - core_settings.go, core_mcp.go, core_limits.go, core_title.go, request_elicitation.go:
//     the agent's offer and the clients' choices, set_mcp_servers, a limited turn's wait,
//     set_title, the agent's questions.
//   - steer.go (the steer CAS of contract §6), queue.go, journal.go, dedup.go,
//     permission.go (the policy), settings.go (the agent's offer), config.go,
//     transcript.go, metrics.go (metric names and outcomes).
//
// A refusal is a *signals.Rejection; the shell sends it as an ApplicationError.
package session

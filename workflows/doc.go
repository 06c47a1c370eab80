// Package workflows is the Temporal shell of tacp's session: SessionWorkflow, one per
// session, and ProfilesWorkflow (docs/contract.md §2, §6).
//
// The session's rules live in the pure core, workflows/session, in the manner of
// etcd-io/raft: Step takes every input with the time passed in, Ready says what to do. The
// shell feeds it and carries out what it says:
//
//   - session.go: SessionWorkflow. It registers the update table's handlers and validators
//     (answering what a validator asks of the worker: admission, the MCP policy) and the
//     queries, feeds every input to the core's Step with workflow.Now, runs the main loop
//     (await HasReady, Wake), and is the core's Executor: a turn (turn_session.go), a Deliver
//     activity, a cancel request, a retry-now, a continue-as-new, a close with
//     ReleaseAgent; the search attributes, the one alarm timer, the metrics; and the core's
//     Env (its logs). A refusal of the core (*signals.Rejection) leaves as
//     its ApplicationError (signals/rejection).
//   - admission.go: the worker's check of a session's config at its start (a SideEffect),
//     its answers to the core's Ask, and ProfilesWorkflow.
//   - turn.go: a turn's drive (driveTurn): the RunTurn activity with its retries and
//     failover, its waits for limits (turn_limits.go), its end reported to the session.
//   - affinity.go: where a turn runs after its attempt on the previous host's queue,
//     decided from how that attempt ended (Temporal's timeout, cancel and application
//     errors, so it is the shell's).
//   - turn_session.go: the session drives its turn itself, and the next run adopts the
//     attempt a run that continued as new left running (ResumeTurn).
//
// Worker Versioning (contract §11 "Versions"; README, "Upgrading workers while sessions
// run"): a session's runs and turns are pinned to the Worker Deployment version (the build)
// that started them, so a run is only ever replayed by the code that recorded it, and a
// change of the session's shape ships as a new build, not a workflow.GetVersion. A run
// learns on each workflow task whether its deployment's target version changed; the session
// then continues as new with AutoUpgrade at its first idle safe point, and the new run
// starts on the new build. A continue-as-new for any other reason stays pinned and carries
// UpgradeWanted, because the server does not tell the next run again about a target the
// previous run declined.
//
// The session asks no workflow.GetVersion. A history that has a version marker replays
// without the call (the SDK skips version markers); a history recorded on a branch the code
// no longer has is retired with the build that last replays it (docs/operators.md, "The end
// of patch branches"). Every kept history replays (replay_test.go).
package workflows

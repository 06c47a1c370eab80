package workflows

// Worker Versioning, the workflow side (contract §11 "Versions"; README, "Upgrading workers
// while sessions run"). A session's runs and its turns are pinned to the Worker Deployment
// version (the build) that started them, so a run is only ever replayed by the code that
// recorded it, and a change of the session's shape needs no workflow.GetVersion. A run
// learns on each workflow task whether its deployment's target version changed
// (GetTargetWorkerDeploymentVersionChanged); the session then continues as new with
// AutoUpgrade at its first idle safe point (sessionCore.upgradeDue), and the new run starts
// on the new build. Continue-as-new for any other reason (history size, a running turn)
// stays pinned and carries UpgradeWanted, because the server does not tell the next run
// again about a target the previous run declined.
//
// The removal rule of the GetVersion change ids that predate versioning (the "patch
// branches"): a change id is removed, call and old branch, in the release after every build
// that may still hold open runs records it, proved by replaying every kept history of
// testdata/histories (TestReplayRecordedHistories). A build holds open runs until
// `starter deployment drained` says it has no pinned run left; an unversioned run (started
// before versioning) is replayed by whichever build is current, so the ids its history may
// lack stay until no such run is open. A history that has a version marker replays without
// the call (the SDK skips version markers), so removing the call never breaks a run that
// recorded it; only a kept history recorded before the change, which takes the old branch,
// keeps a change id alive.
//
// Removed so (their old branch is taken by no kept history, and no kept history records
// their marker, so replay proves nothing depends on them): affinity, report-once,
// steer-before-end, steer-fail-before-end, settings-reassert. Kept, until the release
// after this one, when no run started before versioning is open: admission and alarms
// (kept histories of 2026-11-30 take their old branch), and host-delivery,
// async-delivery, agent-settings and search-attributes-v2 (their old branch changes what
// an old unversioned run sends, journals or shows after its replay; the kept histories
// replay without them, but a run still open on the old shape would switch mid-run).
// One change id was added since: turn-in-session (the session runs its turns' RunTurn
// itself, turn_here.go, where runs recorded before started a TurnWorkflow child). The rule
// "a change of the session's shape ships as a new build" holds for pinned runs, but the
// unversioned runs started before versioning are replayed by the current build, and the
// kept histories of 2026-11-30 and 2026-12-01 start children: without the id every one of
// them would fail its replay. It goes with admission and alarms, when no unversioned run is
// open. No other new change id: any other change of the session's shape ships as a new
// build.

// Build is what one build of the worker fixes about its session workflows when it registers
// them: plain data, never read from an environment by the workflow, so a run's shape is the
// build's and nothing else (the run is pinned to the build).
type Build struct {
	// TurnMarkerForTest makes the build's session record a marker (a SideEffect) before it
	// starts each turn's TurnWorkflow: a build whose command order differs from one without
	// it, as the e2e test of upgrades needs (a history of one replays on the other only with
	// a non-determinism error).
	TurnMarkerForTest bool
	// NoUpgradeForTest makes the build's sessions never continue as new onto a new target
	// version: the broken build the e2e test of upgrades is watched failing with.
	NoUpgradeForTest bool
	// Confidential keeps the words of people and agents out of what the Temporal UI shows of
	// a session (its Current Details): no title, no permission title, no question, no
	// provider message; kinds, ids, states and deadlines only. A worker whose payloads are
	// encrypted sets it: the Temporal UI renders Current Details, once its codec server has
	// decoded them, through its own server with the text in the request's URL, so text
	// shown there is no longer only where the codec lets it be. It changes no command.
	Confidential bool
}

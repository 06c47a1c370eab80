package session

// Build is what one build of the worker fixes about its session workflows when it registers
// them: plain data, never read from an environment by the workflow, so a run's shape is the
// build's and nothing else (the run is pinned to the build).
type Build struct {
	// TurnMarkerForTest makes the build's session record a marker (a SideEffect) before it
	// starts each turn's drive: a build whose command order differs from one without
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

package workflows

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// Reference: versioning.go: a pinned session moves to a new target version only at an idle
// safe point; busy, it keeps its run and remembers to move.
func TestUpgrade_OnlyAtAnIdleSafePoint(t *testing.T) {
	changed := runInfo{targetChanged: true}
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	require.Equal(t, cmdContinueAsNew, r.core.next(changed), "idle: moves now")
	require.True(t, r.core.upgradeDue(changed))

	r.startTurn("work", "m1")
	require.False(t, r.core.upgradeDue(changed), "a running turn is no safe point")
	require.NotEqual(t, cmdContinueAsNew, r.core.next(changed))
	_, err := r.core.prompt(r.now, signals.PromptRequest{Text: "next", ClientMessageID: "m2"})
	require.NoError(t, err)

	r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
	require.False(t, r.core.upgradeDue(changed), "a queued prompt runs on this build first")
	require.Equal(t, cmdStartTurn, r.core.next(changed))
}

// Reference: versioning.go: a wake from a worker of the current version is an upgrade
// wanted, carried by a run that continues as new busy.
func TestUpgrade_WakeIsAnUpgradeWanted(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.startTurn("work", "m1")
	r.signal(signals.SignalWake, struct{}{})
	require.True(t, r.core.UpgradeWanted)
	require.False(t, r.core.upgradeDue(runInfo{}))
	r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
	require.True(t, r.core.upgradeDue(runInfo{}), "idle again: the wanted upgrade is due")
	require.Equal(t, cmdContinueAsNew, r.core.next(runInfo{}))
}

// Reference: versioning.go, Build.NoUpgradeForTest: the broken build the e2e test fails
// with never moves.
func TestUpgrade_BrokenBuildNeverMoves(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.core.build.NoUpgradeForTest = true
	require.Equal(t, cmdNone, r.core.next(runInfo{targetChanged: true}))
}

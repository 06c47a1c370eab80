package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// Reference: workflows/doc.go: a pinned session moves to a new target version only at an idle
// safe point; busy, it keeps its run and remembers to move.
func TestUpgrade_OnlyAtAnIdleSafePoint(t *testing.T) {
	changed := RunInfo{TargetChanged: true}
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	require.True(t, r.core.upgradeDue(changed), "idle: moves now")

	r.startTurn("work", "m1")
	r.settle()
	r.info = changed
	require.Empty(t, r.settle(), "a running turn is no safe point")
	_, err := do[signals.PromptResult](r, signals.UpdatePrompt, signals.PromptRequest{Text: "next", ClientMessageID: "m2"})
	require.NoError(t, err)

	r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
	require.Equal(t, []string{"start-turn"}, r.settle(), "a queued prompt runs on this build first")
	r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 2, Attempt: 1, StopReason: "end_turn"})
	require.Equal(t, []string{"continue-as-new"}, r.settle(), "idle: the session moves")
	require.Contains(t, r.cmdLog, "continue-as-new auto-upgrade=true")
	require.False(t, r.core.UpgradeWanted, "the new run is on the target version")
}

// Reference: workflows/doc.go: a wake from a worker of the current version is an upgrade
// wanted, carried by a run that continues as new busy.
func TestUpgrade_WakeIsAnUpgradeWanted(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.startTurn("work", "m1")
	r.signal(signals.SignalWake, struct{}{})
	require.True(t, r.core.UpgradeWanted)
	require.False(t, r.core.upgradeDue(RunInfo{}))
	r.info.Suggested = true // the run continues as new busy: the wish is carried
	r.settle()
	require.Contains(t, r.cmdLog, "continue-as-new auto-upgrade=false")
	require.Equal(t, 2, r.core.Run)
	require.True(t, r.core.UpgradeWanted)
	r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
	require.Contains(t, r.cmdLog, "continue-as-new auto-upgrade=true", "idle again: the wanted upgrade is due")
	require.Equal(t, 3, r.core.Run)
}

// Reference: workflows/doc.go, Build.NoUpgradeForTest: the broken build the e2e test fails
// with never moves.
func TestUpgrade_BrokenBuildNeverMoves(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.core.build.NoUpgradeForTest = true
	require.Equal(t, cmdNone, r.core.next(RunInfo{TargetChanged: true}))
}

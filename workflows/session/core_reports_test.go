package session

// The turn runner's carried reports (issue 28): an attempt's turn_started riding on its first
// turn_events batch or its turn_finished, its last batch riding on its turn_finished, and the
// search attributes of a turn whose runner beats.

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// prompt prompts and starts the turn without a turn_started of its own (a runner that carries
// it).
func (r *coreRig) prompt(text, id string) int64 {
	r.t.Helper()
	res, err := do[signals.PromptResult](r, signals.UpdatePrompt, signals.PromptRequest{Text: text, ClientMessageID: id})
	require.NoError(r.t, err)
	require.Equal(r.t, []string{"start-turn"}, r.settle())
	return res.TurnID
}

// report feeds one signal of the runner as the shell does: every signal wakes its loop once
// (Wake), whatever the core has ready.
func (r *coreRig) report(name string, payload any) {
	r.t.Helper()
	raw, err := json.Marshal(payload)
	require.NoError(r.t, err)
	_, err = r.core.Step(r.now, SignalInput{Name: name, Raw: raw})
	require.NoError(r.t, err)
	_, err = Wake(r.core, rigExec{r}, r.now, r.info, false)
	require.NoError(r.t, err)
	r.run()
}

// Reference: contract §6, "A turn attempt": a batch that carries its attempt's turn_started is
// taken as the turn_started and then the batch, in the drain order; its redelivery journals
// nothing twice. A steer that waited for the host queue goes out then.
func TestCore_TheFirstBatchCarriesTurnStarted(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.prompt("go", "m1")
	_, err := do[signals.SteerResult](r, signals.UpdateSteer, signals.SteerRequest{Text: "left", ExpectedTurnID: "1"})
	require.NoError(t, err)
	require.Empty(t, r.settle(), "the steer waits for the attempt's host queue")
	r.newEvents()
	batch := signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 1, Events: []json.RawMessage{chunk("a")},
		Started: &signals.TurnStartedSignal{HostQueue: "host1", AgentSessionID: "a1", ContextLost: &signals.AgentContextLostData{Reason: "gone"}}}
	r.signal(signals.SignalTurnEvents, batch)
	require.Equal(t, []string{"deliver"}, r.settle())
	require.Equal(t, "host1", r.core.Turn.HostQueue)
	require.Equal(t, "a1", r.core.AgentSessionID)
	r.signal(signals.SignalTurnEvents, batch)
	require.Equal(t, []string{"agent.context_lost", "agent.update"}, eventKinds(r.newEvents()), "journaled once")
}

// Reference: contract §6, Turns (§5, the invariant): the runner's turn_finished carries its
// last batch (numbered Batches) and its turn_started when no batch took it; the session
// journals both before the terminal event, and a repeated turn_finished journals neither again.
func TestCore_TurnFinishedCarriesTheLastBatch(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.prompt("go", "m1")
	r.newEvents()
	r.signal(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 1, Events: []json.RawMessage{chunk("a")}})
	fin := signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn", Batches: 2, HostQueue: "host1",
		Events:  []json.RawMessage{chunk("b")},
		Started: &signals.TurnStartedSignal{HostQueue: "host1", WorkspaceMissing: &signals.WorkspaceMissingData{Path: "/w", Action: signals.WorkspaceMissingEmpty}}}
	r.signal(signals.SignalTurnFinished, fin)
	r.signal(signals.SignalTurnFinished, fin)
	require.Equal(t, []string{"agent.update", "workspace.missing", "agent.update", "turn.ended"}, eventKinds(r.newEvents()))
	require.Nil(t, r.core.Turn)
	require.Equal(t, "host1", r.core.AgentHost)

	// A turn whose end waits (a steer in flight) keeps no carried events in its state, and a
	// repeated report does not journal them again.
	r.prompt("again", "m2")
	r.signal(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 2, Attempt: 1, HostQueue: "host1"})
	_, err := do[signals.SteerResult](r, signals.UpdateSteer, signals.SteerRequest{Text: "left", ExpectedTurnID: "2"})
	require.NoError(t, err)
	require.Equal(t, []string{"deliver"}, r.settle())
	r.newEvents()
	fin2 := signals.TurnFinishedSignal{TurnID: 2, Attempt: 1, StopReason: "end_turn", Batches: 1, Events: []json.RawMessage{chunk("c")}}
	r.signal(signals.SignalTurnFinished, fin2)
	require.NotNil(t, r.core.Turn.Finished)
	require.Nil(t, r.core.Turn.Finished.Events)
	r.signal(signals.SignalTurnFinished, fin2)
	require.Equal(t, []string{"agent.update"}, eventKinds(r.newEvents()), "the end waits for the steer; the batch is journaled once")
}

// Reference: contract §2, search attributes: once a runner has reported in the session, a
// turn shows "running" only once it is RunningShownAfter old, so a short turn costs one
// upsert (its end); one that runs on shows running at the first workflow task after (its
// runner's beat); the session's first turn gets the upsert at its start.
func TestCore_AShortTurnShowsOnlyItsEnd(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.prompt("first", "m1")
	require.Equal(t, signals.StateRunning, r.sa.State, "the first turn: shown at once")
	r.report(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn",
		Started: &signals.TurnStartedSignal{HostQueue: "host1"}})
	require.Equal(t, signals.StateIdle, r.sa.State)

	// A short turn: one upsert, at its end.
	before := r.upserts
	r.prompt("short", "m2")
	r.advance(time.Second)
	r.report(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 2, Attempt: 1, Batch: 1, Events: []json.RawMessage{chunk("a")},
		Started: &signals.TurnStartedSignal{HostQueue: "host1"}})
	require.Equal(t, before, r.upserts, "not shown running yet")
	r.report(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 2, Attempt: 1, StopReason: "end_turn", Batches: 1})
	require.Equal(t, before+1, r.upserts)
	require.Equal(t, signals.StateIdle, r.sa.State)
	require.Equal(t, int64(2), r.sa.Turn)

	// A long turn: shown running at its runner's beat.
	r.prompt("long", "m3")
	require.Equal(t, before+1, r.upserts)
	r.advance(signals.TurnBeatAfter)
	r.report(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 3, Attempt: 1, Batch: 1,
		Started: &signals.TurnStartedSignal{HostQueue: "host1"}})
	require.Equal(t, before+2, r.upserts)
	require.Equal(t, signals.StateRunning, r.sa.State)
	require.Equal(t, int64(3), r.sa.Turn)
}

// Reference: issue 37, workspace checkpoints: the checkpoint a runner's turn_finished carries
// is journaled once, after the turn's last batch and before its terminal event; a restore
// its turn_started carries is journaled as workspace.restored.
func TestCore_WorkspaceCheckpointComesBeforeTheTurnsEnd(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	r.prompt("go", "m1")
	r.newEvents()
	r.signal(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 1, HostQueue: "host1",
		WorkspaceRestored: &signals.WorkspaceRestoredData{From: "abc", Turn: 3}})
	fin := signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn", Batches: 2, HostQueue: "host1",
		Checkpoint: &signals.WorkspaceCheckpointData{Turn: 1, ID: "def", FilesChanged: 2}}
	r.signal(signals.SignalTurnFinished, fin)
	r.signal(signals.SignalTurnFinished, fin)
	require.Equal(t, []string{"workspace.restored"}, eventKinds(r.newEvents()), "the end waits for batch 2")
	r.signal(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 1, Events: []json.RawMessage{chunk("a")}})
	r.signal(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 2, Events: []json.RawMessage{chunk("b")}})
	evs := r.newEvents()
	require.Equal(t, []string{"agent.update", "agent.update", "workspace.checkpoint", "turn.ended"}, eventKinds(evs))
	var d signals.WorkspaceCheckpointData
	require.NoError(t, json.Unmarshal(evs[2].Data, &d))
	require.Equal(t, "def", d.ID)
}

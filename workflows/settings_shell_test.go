package workflows

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"

	"github.com/tacp-dev/tacp/internal/testkit/fixture"
	"github.com/tacp-dev/tacp/signals"
)

// turnRecord is what a session under test handed its turns and deliveries.
type turnRecord struct {
	mu         sync.Mutex
	inputs     []signals.TurnInput
	deliveries []signals.Delivery
}

// recordTurns records the turns' inputs and the deliveries of h's session.
func recordTurns(t *testing.T, h *harness) *turnRecord {
	rec := &turnRecord{}
	seenTurn = func(in signals.TurnInput) {
		rec.mu.Lock()
		rec.inputs = append(rec.inputs, in)
		rec.mu.Unlock()
	}
	t.Cleanup(func() { seenTurn = nil })
	h.env.RegisterActivityWithOptions(func(_ context.Context, d signals.Delivery) (signals.DeliveryResult, error) {
		rec.mu.Lock()
		rec.deliveries = append(rec.deliveries, d)
		rec.mu.Unlock()
		return signals.DeliveryResult{}, nil
	}, activity.RegisterOptions{Name: signals.ActivityDeliver})
	return rec
}

// The session keeps the agent's offer, refuses what it does not offer (writing nothing),
// journals a change, delivers it into the live turn and hands it to the next turn.
func TestSession_SettingsAreOfferedCheckedDeliveredAndCarriedToTheNextTurn(t *testing.T) {
	h := newHarness(t)
	rec := recordTurns(t, h)
	offer := claudeOffer()
	h.step(func() {
		h.update(signals.UpdateSetMode, signals.SetModeRequest{ModeID: "plan"}, func(_ any, err error) {
			require.Equal(t, signals.RejectInvalidRequest, rejectionType(t, err), "nothing is offered before a turn ran")
		})
		h.prompt("one", "m1", func(signals.PromptResult, error) {})
	})
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 1, HostQueue: "host1", Settings: &offer})
		h.env.SignalWorkflow(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: 1, Attempt: 1, Batch: 1, Events: []json.RawMessage{
			json.RawMessage(`{"sessionId":"a1","update":{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"review","description":"r"}]}}`),
		}})
	})
	h.step(func() {
		st := h.status()
		require.NotNil(t, st.AgentSettings)
		require.Equal(t, "default", st.AgentSettings.CurrentModeID)
		require.Len(t, st.AgentSettings.AvailableCommands, 1)
		before := h.events()
		h.update(signals.UpdateSetMode, signals.SetModeRequest{ModeID: "dontAsk"}, func(_ any, err error) {
			require.Equal(t, signals.RejectInvalidRequest, rejectionType(t, err))
		})
		h.update(signals.UpdateSetConfigOption, signals.SetConfigOptionRequest{ConfigID: "model", Value: "gpt-5"}, func(_ any, err error) {
			require.Equal(t, signals.RejectInvalidRequest, rejectionType(t, err))
		})
		h.env.SignalWorkflow(signals.UpdateSetMode, signals.SetModeRequest{ModeID: "nope"})
		require.Equal(t, before, h.events(), "a refusal journals nothing")
		h.update(signals.UpdateSetMode, signals.SetModeRequest{ModeID: "plan"}, func(res any, err error) {
			require.NoError(t, err)
			require.Equal(t, signals.SetModeResult{ModeID: "plan"}, res)
		})
	})
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn", Batches: 1})
		// Between turns: applied at the next turn's start.
		h.update(signals.UpdateSetConfigOption, signals.SetConfigOptionRequest{ConfigID: "model", Value: "opus"}, func(_ any, err error) {
			require.NoError(t, err)
		})
	})
	h.step(func() { h.prompt("two", "m2", func(signals.PromptResult, error) {}) })
	h.step(func() {
		evs := h.events()
		require.Equal(t, []string{
			"session.started", "prompt.accepted", "turn.started", "agent.settings", "agent.update", "agent.settings",
			"mode.changed", "turn.ended", "config_option.changed", "prompt.accepted", "turn.started",
		}, kinds(evs))
		require.JSONEq(t, `{"mode_id":"plan","previous":"default"}`, string(evs[6].Data))
		require.Equal(t, "plan", h.status().AgentSettings.CurrentModeID)
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 2, Attempt: 1, StopReason: "end_turn"})
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	inputs, deliveries := rec.inputs, rec.deliveries
	require.Len(t, inputs, 2)
	require.Nil(t, inputs[0].Choices)
	require.Equal(t, &signals.SessionChoices{ModeID: "plan", ConfigOptions: []signals.ConfigChoice{{ConfigID: "model", Value: "opus"}}}, inputs[1].Choices)
	require.Len(t, deliveries, 1, "the mode into turn 1")
	require.Equal(t, signals.DeliverSettings, deliveries[0].Kind)
	require.Equal(t, "plan", deliveries[0].Choices.ModeID)
}

// An observer can watch the settings, not change them.
func TestSession_SettingsRefuseObservers(t *testing.T) {
	h := newHarness(t)
	offer := claudeOffer()
	h.step(func() {
		h.update(signals.UpdateAttach, signals.AttachRequest{ViewerID: "o1", Role: signals.RoleObserver, LeaseSeconds: 60}, func(_ any, err error) { require.NoError(t, err) })
		h.prompt("one", "m1", func(signals.PromptResult, error) {})
	})
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 1, Settings: &offer})
	})
	h.step(func() {
		h.update(signals.UpdateSetMode, signals.SetModeRequest{ModeID: "plan", ViewerID: "o1"}, func(_ any, err error) {
			require.Equal(t, signals.RejectForbidden, rejectionType(t, err))
		})
		h.update(signals.UpdateSetConfigOption, signals.SetConfigOptionRequest{ConfigID: "model", Value: "opus", ViewerID: "o1"}, func(_ any, err error) {
			require.Equal(t, signals.RejectForbidden, rejectionType(t, err))
		})
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
	for _, ev := range h.events() {
		require.NotEqual(t, signals.EventModeChanged, ev.Kind)
	}
}

// A choice made after a turn's input was built is newer than the runner's report of that
// turn's agent session: the view keeps it (the report does not revert it), and it reaches
// the attempt — by its own delivery, and on a retried attempt by one queued again.
func TestSession_SettingsChosenDuringATurnOutliveItsStaleReport(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var deliveries []signals.Delivery
	h.env.RegisterActivityWithOptions(func(_ context.Context, d signals.Delivery) (signals.DeliveryResult, error) {
		mu.Lock()
		deliveries = append(deliveries, d)
		mu.Unlock()
		return signals.DeliveryResult{}, nil
	}, activity.RegisterOptions{Name: signals.ActivityDeliver})
	offer := claudeOffer()
	h.step(func() { h.prompt("one", "m1", func(signals.PromptResult, error) {}) })
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 1, HostQueue: "host1", Settings: &offer})
	})
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
	})
	h.step(func() { h.prompt("two", "m2", func(signals.PromptResult, error) {}) })
	h.step(func() {
		// Chosen before turn 2's runner reported: its report still says default.
		h.update(signals.UpdateSetMode, signals.SetModeRequest{ModeID: "plan"}, func(_ any, err error) { require.NoError(t, err) })
	})
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 2, Attempt: 1, HostQueue: "host1", Settings: &offer})
	})
	h.step(func() {
		require.Equal(t, "plan", h.status().AgentSettings.CurrentModeID, "the report does not revert a later choice")
		h.env.SignalWorkflow(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 2, Attempt: 2, HostQueue: "host2", Settings: &offer})
	})
	h.step(func() {
		require.Equal(t, "plan", h.status().AgentSettings.CurrentModeID)
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 2, Attempt: 2, StopReason: "end_turn"})
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
	mu.Lock()
	defer mu.Unlock()
	var attempts []int32
	for _, d := range deliveries {
		require.Equal(t, signals.DeliverSettings, d.Kind)
		require.Equal(t, "plan", d.Choices.ModeID)
		attempts = append(attempts, d.Attempt)
	}
	require.Equal(t, []int32{1, 2}, attempts, "delivered to attempt 1, and again to the retried attempt 2")
}

// The session's policy is the agent's ceiling: under an asking policy a mode in which the
// agent decides by itself is refused (by set_mode and by the mode config option), journaling
// nothing; allow_all, journaled with who set it, lets the session choose one; an asking
// policy set over it puts the agent back in its asking mode, journaled as the policy's
// change and delivered into the live turn.
func TestSession_ThePolicyIsTheCeilingOfTheAgentsModes(t *testing.T) {
	h := newHarness(t)
	rec := recordTurns(t, h)
	offer := claudeOffer()
	offer.AskMode, offer.AskingModes = "default", []string{"default", "plan"}
	offer.ConfigOptions[0] = json.RawMessage(`{"id":"mode","name":"Mode","type":"select","currentValue":"default","options":[{"value":"default","name":"Default"},{"value":"acceptEdits","name":"Accept edits"},{"value":"plan","name":"Plan"}]}`)
	h.step(func() { h.prompt("one", "m1", func(signals.PromptResult, error) {}) })
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 1, HostQueue: "host1", Settings: &offer})
	})
	h.step(func() {
		before := h.events()
		h.update(signals.UpdateSetMode, signals.SetModeRequest{ModeID: "acceptEdits"}, func(_ any, err error) {
			require.Equal(t, signals.RejectForbidden, rejectionType(t, err))
			require.ErrorContains(t, err, "allow_all")
		})
		h.update(signals.UpdateSetConfigOption, signals.SetConfigOptionRequest{ConfigID: signals.ConfigMode, Value: "acceptEdits"}, func(_ any, err error) {
			require.Equal(t, signals.RejectForbidden, rejectionType(t, err))
		})
		require.Equal(t, before, h.events(), "a refusal journals nothing")
		h.update(signals.UpdateSetMode, signals.SetModeRequest{ModeID: "plan"}, func(_ any, err error) { require.NoError(t, err) })
		h.update(signals.UpdateSetPolicy, signals.SetPolicyRequest{Level: signals.PolicyAllowAll, By: "cli:ann@laptop"}, func(_ any, err error) { require.NoError(t, err) })
	})
	h.step(func() {
		h.update(signals.UpdateSetMode, signals.SetModeRequest{ModeID: "acceptEdits"}, func(_ any, err error) { require.NoError(t, err) })
	})
	h.step(func() {
		h.update(signals.UpdateSetPolicy, signals.SetPolicyRequest{Level: signals.PolicyAskAlways, By: "cli:bob@desk"}, func(_ any, err error) { require.NoError(t, err) })
	})
	h.step(func() {
		evs := h.events()
		require.Equal(t, []string{"policy.changed", "mode.changed", "policy.changed", "mode.changed"}, kinds(evs[len(evs)-4:]))
		require.JSONEq(t, `{"level":"allow_all","previous":"ask_for_risky","by":"cli:ann@laptop"}`, string(evs[len(evs)-4].Data))
		require.JSONEq(t, `{"mode_id":"default","previous":"acceptEdits","by_policy":true}`, string(evs[len(evs)-1].Data))
		require.Equal(t, "default", h.status().AgentSettings.CurrentModeID)
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
	})
	h.step(func() { h.prompt("two", "m2", func(signals.PromptResult, error) {}) })
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 2, Attempt: 1, StopReason: "end_turn"})
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	inputs, deliveries := rec.inputs, rec.deliveries
	require.Len(t, inputs, 2)
	require.Equal(t, signals.PolicyAskForRisky, inputs[0].Policy)
	require.Equal(t, signals.PolicyAskAlways, inputs[1].Policy)
	require.Equal(t, "default", inputs[1].Choices.ModeID)
	require.Equal(t, "default", deliveries[len(deliveries)-1].Choices.ModeID, "the policy's mode reaches the live agent")
}

// A profile whose operator forbids allow_all: the runner reports the ceiling with the offer,
// and an allow_all session is lowered to it, journaled, before any request of the agent's is
// decided; allow_all is refused after.
func TestSession_AProfilesCeilingLowersAndRefusesAllowAll(t *testing.T) {
	h := newHarness(t)
	offer := claudeOffer()
	offer.PolicyCeiling = signals.PolicyAskForRisky
	h.step(func() { h.prompt("one", "m1", func(signals.PromptResult, error) {}) })
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 1, HostQueue: "host1", Settings: &offer})
	})
	h.step(func() {
		evs := h.events()
		last := evs[len(evs)-1]
		require.Equal(t, signals.EventPolicyChanged, last.Kind)
		require.Contains(t, string(last.Data), `"level":"ask_for_risky","previous":"allow_all"`)
		require.Equal(t, signals.PolicyAskForRisky, h.status().Policy)
		h.update(signals.UpdateSetPolicy, signals.SetPolicyRequest{Level: signals.PolicyAllowAll}, func(_ any, err error) {
			require.Equal(t, signals.RejectForbidden, rejectionType(t, err))
		})
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, Attempt: 1, StopReason: "end_turn"})
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1", Policy: signals.PolicyAllowAll}))
}

// claudeOffer is Claude Code's offer of modes and options: the session core's fixture.
func claudeOffer() signals.AgentSettings {
	return fixture.JSON[signals.AgentSettings]("session/testdata/claude-offer.json")
}

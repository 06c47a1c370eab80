package workflows

import (
	"testing"

	"github.com/stretchr/testify/mock"

	"github.com/tacp-dev/tacp/signals"
)

func TestProbe_CloseThenTurnEndSameTask(t *testing.T) {
	h := newHarness(t)
	h.step(func() {
		h.prompt("one", "m1", func(signals.PromptResult, error) {})
		h.prompt("two", "m2", func(signals.PromptResult, error) {})
	})
	h.step(func() { h.env.SetContinueAsNewSuggested(true) })
	next := canInput(t, h.run(signals.SessionConfig{SessionID: "s1"}))

	h2 := newHarness(t)
	h2.env.OnRequestCancelExternalWorkflow(mock.Anything, mock.Anything, mock.Anything).Return(func(ns, id, run string) error {
		t.Logf("cancel requested %s at %v", id, h2.env.Now())
		return nil
	})
	h2.step(func() {
		h2.update(signals.UpdateClose, signals.CloseRequest{Reason: "test"}, func(any, error) { t.Logf("close done: %v", kinds(h2.events())) })
		h2.env.SignalWorkflowSkippingWorkflowTask(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 1, StopReason: "cancelled"})
	})
	h2.step(func() {
		st := h2.status()
		t.Logf("state %s turn %d queue %v", st.State, st.TurnID, st.Queue)
		t.Logf("%v", kinds(h2.events()))
		if st.TurnID != 0 {
			h2.finishTurn(st.TurnID, "end_turn")
		}
	})
	err := h2.run(next)
	t.Logf("err %v", err)
	evs := h2.events()
	t.Logf("%v %s", kinds(evs), evs[len(evs)-1].Data)
}

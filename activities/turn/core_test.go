package turn

// Tests of the turn core, driven synchronously: no process, no clock, no goroutine. Each
// scenario is the inputs of one turn attempt, at times relative to its start, with the
// actions each must return; its name says the rule it proves, and its comment cites the
// contract section the rule comes from.

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

const testGrace = 30 * time.Second

// step is one input of a scenario and the actions it must return (nil: none).
type step struct {
	at   time.Duration
	in   Event
	want []Action
}

// Shorthands for the actions the scenarios expect.
var (
	prompt         = Action{Kind: ActPrompt}
	cancelForSteer = Action{Kind: ActCancel, Why: "steer"}
	cancelPerms    = Action{Kind: ActCancelPermissions}
	killAfterGrace = Action{Kind: ActKill, Why: KillGrace}
)

func reprompt(text string) Action { return Action{Kind: ActPrompt, Text: text} }
func inject(id int, text string) Action {
	return Action{Kind: ActInject, Steer: id, Text: text}
}
func cancelVia(why string) Action       { return Action{Kind: ActCancel, Why: why} }
func replied(id int, how string) Action { return Action{Kind: ActReply, Steer: id, How: how} }
func steerFailed(id int, why string) Action {
	return Action{Kind: ActReply, Steer: id, How: signals.HowFailed, Err: why}
}
func ended(e End) Action { return Action{Kind: ActEnd, End: e} }

// runScenario drives a new core (steering: the agent serves _session/steering) through
// steps, checking each step's actions and, at the end, that the turn ended.
func runScenario(t *testing.T, steering bool, steps []step) *Core {
	t.Helper()
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c := New(steering, testGrace)
	for i, s := range steps {
		got := c.Step(start.Add(s.at), s.in)
		require.Equal(t, s.want, got, "step %d: %T%+v at %v", i, s.in, s.in, s.at)
	}
	return c
}

// contract §6 Steer delivery: without the steering extension a steer is delivered by
// interrupt-and-continue: session/cancel, wait for the prompt to resolve `cancelled`, then
// session/prompt with the steer text, inside the same turn.
func TestTurnCore_SteerWithoutSteeringInterruptsAndContinues(t *testing.T) {
	c := runScenario(t, false, []step{
		{0, Start{}, []Action{prompt}},
		{time.Second, Steer{ID: 1, Text: "go left"}, []Action{cancelForSteer}},
		// A second steer before the prompt resolves rides the same interrupt: one
		// session/cancel, one session/prompt with both texts in order.
		{2 * time.Second, Steer{ID: 2, Text: "then right"}, nil},
		{3 * time.Second, Answer{StopReason: "cancelled"}, []Action{
			replied(1, signals.HowInterrupted), replied(2, signals.HowInterrupted), reprompt("go left\n\nthen right"),
		}},
		{4 * time.Second, Answer{StopReason: "end_turn"}, []Action{ended(End{StopReason: "end_turn", Keep: true})}},
	})
	require.True(t, c.Ended())
}

// contract §7 On cancel, §6 Steer delivery: a cancel that arrives while a steer's interrupt is
// under way wins: the steer fails (it never reaches the agent), the open permission
// requests are answered cancelled, and the interrupted prompt's answer ends the turn
// `cancelled` instead of prompting with the steer text.
func TestTurnCore_CancelDuringAnInterruptFailsTheSteerAndEndsCancelled(t *testing.T) {
	runScenario(t, false, []step{
		{0, Start{}, []Action{prompt}},
		{time.Second, Steer{ID: 1, Text: "go left"}, []Action{cancelForSteer}},
		{2 * time.Second, Cancel{Why: "delivery"}, []Action{
			cancelPerms, steerFailed(1, "the turn was cancelled"), cancelVia("delivery"),
		}},
		// A second cancel (the activity's cancellation backstop) changes nothing.
		{3 * time.Second, Cancel{Why: "activity cancellation"}, nil},
		// So is a steer that comes after the cancel.
		{4 * time.Second, Steer{ID: 2, Text: "too late"}, []Action{steerFailed(2, "the turn is cancelling")}},
		{5 * time.Second, Answer{StopReason: "cancelled"}, []Action{ended(End{StopReason: "cancelled", Keep: true})}},
	})
}

// contract §7 On cancel: the runner waits (bounded) for `cancelled`; an agent that ignores
// session/cancel is killed after the grace, and the turn ends `cancelled` all the same,
// without keeping the agent.
func TestTurnCore_AgentIgnoringCancelIsKilledAfterTheGrace(t *testing.T) {
	c := runScenario(t, false, []step{
		{0, Start{}, []Action{prompt}},
		{time.Second, Cancel{Why: "delivery"}, []Action{cancelPerms, cancelVia("delivery")}},
	})
	require.Equal(t, time.Date(2026, 12, 1, 12, 0, 1, 0, time.UTC).Add(testGrace), c.Deadline(), "one timer, at the grace's end")
	runScenario(t, false, []step{
		{0, Start{}, []Action{prompt}},
		{time.Second, Cancel{Why: "delivery"}, []Action{cancelPerms, cancelVia("delivery")}},
		{time.Second + testGrace - time.Millisecond, Tick{}, nil}, // early: the grace is not over
		{time.Second + testGrace, Tick{}, []Action{killAfterGrace, ended(End{StopReason: "cancelled"})}},
		{time.Second + testGrace + time.Millisecond, Answer{StopReason: "end_turn"}, nil}, // too late to count
	})
}

// contract §7 On cancel: the answer written just before the agent exited is the turn's; only
// an exit with no answer behind it fails the turn. Neither keeps the dead agent.
func TestTurnCore_AgentExitingWithTheAnswerInFlight(t *testing.T) {
	t.Run("the answer follows the exit", func(t *testing.T) {
		runScenario(t, false, []step{
			{0, Start{}, []Action{prompt}},
			{time.Second, Exited{}, nil},
			{time.Second + 50*time.Millisecond, Answer{StopReason: "end_turn"}, []Action{ended(End{StopReason: "end_turn"})}},
		})
	})
	t.Run("no answer follows the exit", func(t *testing.T) {
		runScenario(t, false, []step{
			{0, Start{}, []Action{prompt}},
			{time.Second, Exited{}, nil},
			{time.Second + exitAnswerWait/2, Tick{}, nil},
			{time.Second + exitAnswerWait, Tick{}, []Action{ended(End{Exited: true})}},
		})
	})
	t.Run("a steer waiting for the interrupt fails at the exit", func(t *testing.T) {
		runScenario(t, false, []step{
			{0, Start{}, []Action{prompt}},
			{time.Second, Steer{ID: 1, Text: "go left"}, []Action{cancelForSteer}},
			{2 * time.Second, Exited{}, []Action{steerFailed(1, "the agent exited")}},
			{2*time.Second + 10*time.Millisecond, Answer{StopReason: "cancelled"}, []Action{ended(End{StopReason: "cancelled"})}},
		})
	})
	t.Run("a cancelling turn ends cancelled at the exit", func(t *testing.T) {
		runScenario(t, false, []step{
			{0, Start{}, []Action{prompt}},
			{time.Second, Cancel{Why: "delivery"}, []Action{cancelPerms, cancelVia("delivery")}},
			{2 * time.Second, Exited{}, []Action{ended(End{StopReason: "cancelled"})}},
		})
	})
}

// contract §6 Steer delivery: an agent that advertises _meta.steering.supported gets the steer
// by _session/steering, with no interrupt; the turn goes on and ends with its own answer.
// Steers keep their order: one that arrives while an injection is out waits for it.
func TestTurnCore_SteerInjectedViaSessionSteering(t *testing.T) {
	runScenario(t, true, []step{
		{0, Start{}, []Action{prompt}},
		{time.Second, Steer{ID: 1, Text: "go left"}, []Action{inject(1, "go left")}},
		{time.Second + time.Millisecond, Steer{ID: 2, Text: "then right"}, nil},
		{2 * time.Second, Injected{ID: 1}, []Action{replied(1, signals.HowInjected), inject(2, "then right")}},
		{3 * time.Second, Injected{ID: 2}, []Action{replied(2, signals.HowInjected)}},
		{4 * time.Second, Answer{StopReason: "end_turn"}, []Action{ended(End{StopReason: "end_turn", Keep: true})}},
	})
}

// contract §6 Steer delivery: an injection the agent refuses (an agent whose turn just ended
// answers promptRequired) falls back to interrupt-and-continue. When the prompt resolved
// while the injection was out, nothing is left to interrupt: the steer text is prompted at
// once, inside the same turn, and the answer waits for the steer's outcome.
func TestTurnCore_RefusedInjectionFallsBackToInterrupt(t *testing.T) {
	refused := errors.New("_session/steering answered \"promptRequired\"")
	t.Run("while the prompt runs", func(t *testing.T) {
		runScenario(t, true, []step{
			{0, Start{}, []Action{prompt}},
			{time.Second, Steer{ID: 1, Text: "go left"}, []Action{inject(1, "go left")}},
			{2 * time.Second, Injected{ID: 1, Err: refused}, []Action{cancelForSteer}},
			{3 * time.Second, Answer{StopReason: "cancelled"}, []Action{replied(1, signals.HowInterrupted), reprompt("go left")}},
			{4 * time.Second, Answer{StopReason: "end_turn"}, []Action{ended(End{StopReason: "end_turn", Keep: true})}},
		})
	})
	t.Run("after the prompt resolved", func(t *testing.T) {
		runScenario(t, true, []step{
			{0, Start{}, []Action{prompt}},
			{time.Second, Steer{ID: 1, Text: "go left"}, []Action{inject(1, "go left")}},
			{2 * time.Second, Answer{StopReason: "end_turn"}, nil}, // held for the steer's outcome
			{3 * time.Second, Injected{ID: 1, Err: refused}, []Action{replied(1, signals.HowInterrupted), reprompt("go left")}},
			{4 * time.Second, Answer{StopReason: "end_turn"}, []Action{ended(End{StopReason: "end_turn", Keep: true})}},
		})
	})
	t.Run("the session/cancel for the steer fails", func(t *testing.T) {
		runScenario(t, false, []step{
			{0, Start{}, []Action{prompt}},
			{time.Second, Steer{ID: 1, Text: "go left"}, []Action{cancelForSteer}},
			{time.Second, SteerCancelFailed{Err: errors.New("broken pipe")}, []Action{steerFailed(1, "session/cancel for the steer: broken pipe")}},
			{2 * time.Second, Answer{StopReason: "end_turn"}, []Action{ended(End{StopReason: "end_turn", Keep: true})}},
		})
	})
}

// contract §6 Steer, §7: a steer that arrives after the prompt's answer ended the turn is not
// delivered (no turn of its own is started): it fails, and the ended turn does nothing else.
func TestTurnCore_SteerAfterTheAnswerFails(t *testing.T) {
	for _, steering := range []bool{false, true} {
		runScenario(t, steering, []step{
			{0, Start{}, []Action{prompt}},
			{time.Second, Answer{StopReason: "end_turn"}, []Action{ended(End{StopReason: "end_turn", Keep: true})}},
			{2 * time.Second, Steer{ID: 1, Text: "too late"}, []Action{steerFailed(1, "the turn has ended")}},
			{3 * time.Second, Cancel{Why: "delivery"}, nil},
			{4 * time.Second, Tick{}, nil},
		})
	}
}

// contract §7 (a steer delivered into a turn is reported before the turn's end): whatever ends
// the turn, every steer it holds is answered first, so no delivery is left waiting.
func TestTurnCore_EveryHeldSteerIsAnsweredBeforeTheEnd(t *testing.T) {
	lost := errors.New("heartbeat timeout")
	runScenario(t, true, []step{
		{0, Start{}, []Action{prompt}},
		{time.Second, Steer{ID: 1, Text: "a"}, []Action{inject(1, "a")}},
		{time.Second, Steer{ID: 2, Text: "b"}, nil},
		{2 * time.Second, Lost{Cause: lost}, []Action{
			{Kind: ActKill, Why: KillLost},
			steerFailed(1, "the turn attempt was lost"), steerFailed(2, "the turn attempt was lost"),
			ended(End{Lost: true, Err: lost}),
		}},
		{3 * time.Second, Injected{ID: 1}, nil},
	})
	// A cancel during an injection: the injection's result still comes back and is
	// reported; the steer waiting behind it fails; the kill grace ends the turn.
	runScenario(t, true, []step{
		{0, Start{}, []Action{prompt}},
		{time.Second, Steer{ID: 1, Text: "a"}, []Action{inject(1, "a")}},
		{time.Second, Steer{ID: 2, Text: "b"}, nil},
		{2 * time.Second, Cancel{Why: "delivery"}, []Action{cancelPerms, steerFailed(2, "the turn was cancelled"), cancelVia("delivery")}},
		{3 * time.Second, Answer{StopReason: "cancelled"}, nil}, // held for the injection's outcome
		{4 * time.Second, Injected{ID: 1}, []Action{replied(1, signals.HowInjected), ended(End{StopReason: "cancelled", Keep: true})}},
	})
}

// contract §7: the agent's failed session/prompt fails the turn, and the agent is kept only
// while its process lives.
func TestTurnCore_AFailedPromptFailsTheTurn(t *testing.T) {
	boom := errors.New("internal error")
	runScenario(t, false, []step{
		{0, Start{}, []Action{prompt}},
		{time.Second, Answer{Err: boom}, []Action{ended(End{Err: boom, Keep: true})}},
	})
}

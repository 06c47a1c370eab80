// Package turn is the pure core of one turn attempt: the rules of its prompt loop (contract
// §6 Steer delivery, §7 The turn runner) as a state machine. What happens to the turn comes in through
// Step — the agent's answer, a steer, a cancel, the result of a _session/steering request,
// the agent's exit, the clock — with the time passed in; what the turn must do goes out as
// actions (send session/prompt, session/cancel or _session/steering, answer a steer, kill
// the agent, end the turn). It does no I/O, starts no goroutine and reads no clock
// (workflows/session/purity_test.go holds it to that): the runner's turn shell
// (activities/turnshell.go) feeds it, carries the actions out and arms one timer at
// Deadline. Its tests (core_test.go) drive it synchronously, without processes.
package turn

import (
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

// exitAnswerWait is how long a turn whose agent exited waits for an answer that may be in
// flight behind the exit (written before the agent died, read after its exit was seen).
const exitAnswerWait = 100 * time.Millisecond

// Core is the state of one turn attempt. The zero value is not usable: New.
type Core struct {
	// steering: the agent advertised _meta.steering.supported (§6 Steer delivery).
	steering bool
	// grace bounds the wait for `cancelled` after session/cancel (§7 On cancel).
	grace time.Duration

	ended      bool
	cancelling bool
	killAt     time.Time // cancelling: the agent is killed at killAt
	exitedAt   time.Time // the agent process exited (zero: it runs)

	// injecting is the steer whose _session/steering request is out; waiting are the
	// steers that arrived meanwhile, delivered after it in their order.
	injecting *coreSteer
	waiting   []coreSteer
	// interrupting are the steers waiting for the interrupted prompt to resolve: one
	// session/cancel carries them all, one session/prompt their texts.
	interrupting []coreSteer
	// held is the prompt's answer when it came while a _session/steering request was out:
	// the steer's outcome is known before the answer ends (or continues) the turn.
	held *Answer
}

type coreSteer struct {
	id   int
	text string
}

// New is the core of a turn whose agent serves _session/steering when steering,
// and that kills the agent grace after a session/cancel it does not answer.
func New(steering bool, grace time.Duration) *Core {
	return &Core{steering: steering, grace: grace}
}

// Inputs of the turn core.
type (
	// Start starts the turn: the turn's prompt is sent.
	Start struct{}
	// Answer is the agent's answer to the last session/prompt (Err: the request failed).
	Answer struct {
		StopReason string
		Err        error
	}
	// Steer is a steer delivered into the turn; ID names it in the actions.
	Steer struct {
		ID   int
		Text string
	}
	// Injected is the result of the _session/steering request for steer ID.
	Injected struct {
		ID  int
		Err error
	}
	// SteerCancelFailed: the session/cancel that interrupts for the steers failed.
	SteerCancelFailed struct{ Err error }
	// Cancel asks for the turn's cancellation (Why: "delivery", "activity cancellation").
	Cancel struct{ Why string }
	// Exited: the agent process exited.
	Exited struct{}
	// Tick: the clock reached Deadline.
	Tick struct{}
	// Lost: the server no longer holds this attempt (Cause: why its context ended);
	// the next attempt takes the turn over, with session/load.
	Lost struct{ Cause error }
)

// Event is an input of the turn core (the types above).
type Event interface{ isEvent() }

func (Start) isEvent()             {}
func (Answer) isEvent()            {}
func (Steer) isEvent()             {}
func (Injected) isEvent()          {}
func (SteerCancelFailed) isEvent() {}
func (Cancel) isEvent()            {}
func (Exited) isEvent()            {}
func (Tick) isEvent()              {}
func (Lost) isEvent()              {}

// ActionKind is what an action asks the shell to do.
type ActionKind int

const (
	// ActPrompt sends session/prompt: the turn's prompt (Text empty) or the steer texts of
	// an interrupt-and-continue.
	ActPrompt ActionKind = iota + 1
	// ActInject sends _session/steering for steer Steer with Text; its result comes back
	// as Injected.
	ActInject
	// ActCancel sends session/cancel (Why says for what: "steer" or the cancel's Why).
	ActCancel
	// ActCancelPermissions answers the agent's open permission requests cancelled.
	ActCancelPermissions
	// ActReply reports how steer Steer went: How (signals.HowInjected, HowInterrupted or
	// HowFailed with Err).
	ActReply
	// ActKill kills the agent process (Why: KillGrace or KillLost).
	ActKill
	// ActEnd ends the turn attempt as End says. Nothing follows it.
	ActEnd
)

// Why the agent is killed (ActKill).
const (
	KillGrace = "grace" // it did not answer session/cancel within the grace
	KillLost  = "lost"  // the attempt was lost: the next attempt loads the agent session anew
)

// Action is one thing the shell must do, in the order Step returns them.
type Action struct {
	Kind  ActionKind
	Steer int
	Text  string
	Why   string
	How   string
	Err   string
	End   End
}

// End is how a turn attempt ended: with the agent's stop reason, or failed (Err:
// the agent's error, Exited: the agent died, Lost: the attempt was taken over, Err its
// cause). Keep says
// the agent may serve another turn.
type End struct {
	StopReason string
	Err        error
	Exited     bool
	Lost       bool
	Keep       bool
}

// Ended reports whether the turn has ended (ActEnd was returned).
func (c *Core) Ended() bool { return c.ended }

// Deadline is when the shell must Step the core with Tick (zero: no timer).
func (c *Core) Deadline() time.Time {
	switch {
	case c.ended:
		return time.Time{}
	case c.cancelling:
		return c.killAt
	case !c.exitedAt.IsZero() && c.held == nil:
		return c.exitedAt.Add(exitAnswerWait)
	}
	return time.Time{}
}

// Step feeds one input at now and returns what to do. After ActEnd every input is
// answered with nothing, except a steer, which is answered failed.
func (c *Core) Step(now time.Time, in Event) []Action {
	if c.ended {
		if s, ok := in.(Steer); ok {
			// §7: a steer that arrives after the turn's end does not start a turn of its own.
			return []Action{failed(s.ID, "the turn has ended")}
		}
		return nil
	}
	switch in := in.(type) {
	case Start:
		return []Action{{Kind: ActPrompt}}
	case Answer:
		return c.answer(in)
	case Steer:
		return c.steer(coreSteer{in.ID, in.Text})
	case Injected:
		return c.injected(in)
	case SteerCancelFailed:
		return c.failAll(&c.interrupting, "session/cancel for the steer: "+in.Err.Error())
	case Cancel:
		return c.cancel(now, in.Why)
	case Exited:
		return c.exited(now)
	case Tick:
		return c.tick(now)
	case Lost:
		return c.end([]Action{{Kind: ActKill, Why: KillLost}}, End{Lost: true, Err: in.Cause}, "the turn attempt was lost")
	}
	return nil
}

// steer delivers a steer (§6 Steer delivery): by _session/steering when the agent serves it,
// otherwise by interrupt-and-continue. Steers keep their order: one that arrives while an
// injection is out waits for it; one that arrives while an interrupt is under way joins it.
func (c *Core) steer(s coreSteer) []Action {
	switch {
	case c.cancelling:
		return []Action{failed(s.id, "the turn is cancelling")}
	case !c.exitedAt.IsZero():
		return []Action{failed(s.id, "the agent exited")}
	case c.injecting != nil:
		c.waiting = append(c.waiting, s)
		return nil
	case c.steering && len(c.interrupting) == 0:
		c.injecting = &s
		return []Action{{Kind: ActInject, Steer: s.id, Text: s.text}}
	}
	return c.interrupt(s)
}

// interrupt delivers s by interrupt-and-continue: session/cancel, and once the prompt has
// resolved, session/prompt with the steer text. One session/cancel serves every steer that
// arrives before the prompt resolves; none is needed when it has resolved already.
func (c *Core) interrupt(s coreSteer) []Action {
	c.interrupting = append(c.interrupting, s)
	if len(c.interrupting) > 1 || c.held != nil {
		return nil
	}
	return []Action{{Kind: ActCancel, Why: "steer"}}
}

// injected takes the result of a _session/steering request. A refused injection (an agent
// whose turn had just ended answers promptRequired) falls back to interrupt-and-continue.
func (c *Core) injected(in Injected) []Action {
	s := c.injecting
	if s == nil || s.id != in.ID {
		return nil
	}
	c.injecting = nil
	var out []Action
	switch {
	case in.Err == nil:
		out = append(out, Action{Kind: ActReply, Steer: s.id, How: signals.HowInjected})
	case c.cancelling:
		out = append(out, failed(s.id, "the turn was cancelled"))
	case !c.exitedAt.IsZero():
		out = append(out, failed(s.id, "the agent exited"))
	default:
		out = append(out, c.interrupt(*s)...)
	}
	waiting := c.waiting
	c.waiting = nil
	for _, w := range waiting {
		out = append(out, c.steer(w)...)
	}
	if c.injecting == nil && c.held != nil {
		a := *c.held
		c.held = nil
		out = append(out, c.answer(a)...)
	}
	return out
}

// answer takes the prompt's answer: interrupted for steers, the turn goes on with their
// texts (§6 Steer delivery: "then session/prompt with the steer text, inside the same
// turn"); otherwise the turn ends with the agent's stop reason, `cancelled` when the turn
// was being cancelled (§7 On cancel).
func (c *Core) answer(a Answer) []Action {
	if c.injecting != nil {
		c.held = &a
		return nil
	}
	keep := c.exitedAt.IsZero()
	if a.Err != nil {
		return c.end(nil, End{Err: a.Err, Keep: keep}, "the agent failed the turn")
	}
	if len(c.interrupting) > 0 && !c.cancelling && keep {
		texts := make([]string, len(c.interrupting))
		out := make([]Action, 0, len(c.interrupting)+1)
		for i, s := range c.interrupting {
			texts[i] = s.text
			out = append(out, Action{Kind: ActReply, Steer: s.id, How: signals.HowInterrupted})
		}
		c.interrupting = nil
		return append(out, Action{Kind: ActPrompt, Text: strings.Join(texts, "\n\n")})
	}
	stop := a.StopReason
	if c.cancelling {
		stop = StopCancelled
	}
	return c.end(nil, End{StopReason: stop, Keep: keep}, "the turn ended")
}

// cancel starts the turn's cancellation (§7 On cancel): open permission requests are
// answered cancelled, steers not yet delivered fail, session/cancel goes to the agent, and
// the kill grace starts. The prompt's own request is left alone: its answer is the turn's.
func (c *Core) cancel(now time.Time, why string) []Action {
	if c.cancelling {
		return nil
	}
	c.cancelling = true
	if !c.exitedAt.IsZero() {
		return c.end(nil, End{StopReason: StopCancelled}, "the turn was cancelled")
	}
	out := []Action{{Kind: ActCancelPermissions}}
	out = append(out, c.failAll(&c.interrupting, "the turn was cancelled")...)
	out = append(out, c.failAll(&c.waiting, "the turn was cancelled")...)
	c.killAt = now.Add(c.grace)
	return append(out, Action{Kind: ActCancel, Why: why})
}

// exited takes the agent's exit: a cancelling turn ends cancelled; any other waits
// exitAnswerWait for an answer written before the exit.
func (c *Core) exited(now time.Time) []Action {
	if !c.exitedAt.IsZero() {
		return nil
	}
	c.exitedAt = now
	if c.cancelling {
		return c.end(nil, End{StopReason: StopCancelled}, "the turn was cancelled")
	}
	out := c.failAll(&c.interrupting, "the agent exited")
	return append(out, c.failAll(&c.waiting, "the agent exited")...)
}

// tick fires the kill grace (§7: "waits (bounded) for stopReason: cancelled") and the
// wait for an exited agent's answer.
func (c *Core) tick(now time.Time) []Action {
	d := c.Deadline()
	if d.IsZero() || now.Before(d) {
		return nil
	}
	if c.cancelling {
		return c.end([]Action{{Kind: ActKill, Why: KillGrace}}, End{StopReason: StopCancelled}, "the turn was cancelled")
	}
	return c.end(nil, End{Exited: true}, "the agent exited")
}

// end ends the turn after out: every steer not yet delivered fails with why, so each
// steer's outcome is reported before the turn's end.
func (c *Core) end(out []Action, e End, why string) []Action {
	if c.injecting != nil {
		out = append(out, failed(c.injecting.id, why))
		c.injecting = nil
	}
	out = append(out, c.failAll(&c.waiting, why)...)
	out = append(out, c.failAll(&c.interrupting, why)...)
	c.ended, c.held = true, nil
	return append(out, Action{Kind: ActEnd, End: e})
}

// failAll answers every steer of *steers failed with why, and empties it.
func (c *Core) failAll(steers *[]coreSteer, why string) []Action {
	var out []Action
	for _, s := range *steers {
		out = append(out, failed(s.id, why))
	}
	*steers = nil
	return out
}

func failed(id int, why string) Action {
	return Action{Kind: ActReply, Steer: id, How: signals.HowFailed, Err: why}
}

// StopCancelled is ACP's stop reason `cancelled`.
const StopCancelled = string(acp.StopReasonCancelled)

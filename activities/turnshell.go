package activities

// The turn shell: the goroutine that runs a turn attempt's prompt loop around the turn core
// (activities/turn). It waits for one input at a time — the prompt's answer, a delivery from the
// live-turn registry, the result of a _session/steering request, the activity's context,
// the agent's exit, the core's one timer — steps the core with it, and carries out the
// actions the core returns. Requests that wait for the agent (session/prompt,
// _session/steering) run in goroutines of their own and come back as inputs, so the loop
// never waits behind the agent: a cancel or a steer is taken the moment it arrives.

import (
	"context"
	"errors"
	"log/slog"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/activities/turn"
	"github.com/tacp-dev/tacp/signals"
)

// turnShell is one turn attempt's loop. Its fields are set by runTurn; run uses them.
type turnShell struct {
	core   *turn.Core
	r      *Runner
	proc   *agentProc
	sid    acp.SessionId
	lt     *liveTurn
	watch  *turnObserver
	log    *slog.Logger
	prompt []acp.ContentBlock
	// outcome reports how an Async steer went (the delivery_outcome signal).
	outcome func(ctx context.Context, o signals.DeliveryOutcome)

	answered chan turn.Answer
	injected chan turn.Injected
	steers   map[int]steerRequest // steers the core holds, by the id it knows them by
	lastID   int
	outcomes outcomeQueue
	// cancelled and exited are the registry's cancel and the agent's exit, nil once seen:
	// a closed channel is always ready and would spin the loop.
	cancelled <-chan struct{}
	exited    <-chan struct{}
	ctxDone   <-chan struct{}
}

func newTurnShell(r *Runner, ag *hostedAgent, sid acp.SessionId, lt *liveTurn, prompt []acp.ContentBlock, log *slog.Logger) *turnShell {
	return &turnShell{
		core: turn.New(steeringSupported(ag.proc.caps), r.CancelGrace),
		r:    r, proc: ag.proc, sid: sid, lt: lt, watch: lt.watch, log: log, prompt: prompt,
		answered: make(chan turn.Answer, 1), injected: make(chan turn.Injected, 1),
		steers: map[int]steerRequest{}, cancelled: lt.cancel, exited: ag.proc.exited,
	}
}

// run runs the turn attempt to its end. Every Async steer's outcome has been sent when it
// returns: the turn's end is reported after them.
func (s *turnShell) run(ctx context.Context) turn.End {
	s.ctxDone = ctx.Done()
	acts := s.core.Step(time.Now(), turn.Start{})
	for {
		if end, ok := s.do(ctx, acts); ok {
			s.outcomes.wait()
			return end
		}
		in := s.next(ctx) // before time.Now(): now is when the input came, not when the wait began
		acts = s.core.Step(time.Now(), in)
	}
}

// next waits for the core's next input.
func (s *turnShell) next(ctx context.Context) turn.Event {
	var tick <-chan time.Time
	if d := s.core.Deadline(); !d.IsZero() {
		t := time.NewTimer(time.Until(d))
		defer t.Stop()
		tick = t.C
	}
	select {
	case a := <-s.answered:
		return a
	case in := <-s.injected:
		if in.Err != nil {
			s.log.Warn("_session/steering failed: interrupting instead", "error", in.Err)
		}
		return in
	case req := <-s.lt.steers:
		s.lastID++
		s.steers[s.lastID] = req
		return turn.Steer{ID: s.lastID, Text: req.text}
	case <-s.cancelled:
		s.cancelled = nil
		return turn.Cancel{Why: "delivery"}
	case <-s.ctxDone:
		s.ctxDone = nil
		if cause := context.Cause(ctx); !isCancelRequest(cause) {
			// The server no longer holds this attempt (heartbeats lost past the timeout
			// while it restarted, a worker shutting down).
			s.log.Warn("turn attempt lost: the next attempt takes the turn over", "cause", cause)
			return turn.Lost{Cause: cause}
		}
		return turn.Cancel{Why: "activity cancellation"}
	case <-tick:
		return turn.Tick{}
	case <-s.exited:
		s.exited = nil
		return turn.Exited{}
	}
}

// do carries out acts in order; ok reports the turn's end.
func (s *turnShell) do(ctx context.Context, acts []turn.Action) (end turn.End, ok bool) {
	for i := 0; i < len(acts); i++ {
		a := acts[i]
		switch a.Kind {
		case turn.ActPrompt:
			blocks := s.prompt
			if a.Text != "" {
				blocks = []acp.ContentBlock{acp.TextBlock(a.Text)}
			}
			s.sendPrompt(ctx, blocks)
		case turn.ActInject:
			go func() {
				_, err := s.r.inject(ctx, s.proc, s.sid, a.Text)
				s.injected <- turn.Injected{ID: a.Steer, Err: err}
			}()
		case turn.ActCancel:
			if a.Why != "steer" {
				s.log.Info("cancelling turn: sending session/cancel", "via", a.Why)
			}
			if err := s.proc.conn.Cancel(context.WithoutCancel(ctx), acp.CancelNotification{SessionId: s.sid}); err != nil {
				s.log.Warn("session/cancel failed", "error", err)
				if a.Why == "steer" {
					acts = append(acts, s.core.Step(time.Now(), turn.SteerCancelFailed{Err: err})...)
				}
			}
		case turn.ActCancelPermissions:
			s.lt.requestCancel() // answers the agent's open permission requests cancelled
		case turn.ActReply:
			s.reply(ctx, a)
		case turn.ActKill:
			if a.Why == turn.KillGrace {
				s.log.Warn("agent did not stop after session/cancel: killing it", "grace", s.r.CancelGrace)
			}
			s.proc.stop(0)
		case turn.ActEnd:
			return a.End, true
		}
	}
	return turn.End{}, false
}

// sendPrompt sends session/prompt; its answer comes back on answered. The prompt's context
// is not the activity's: cancelling it would drop the agent's answer (§7 On cancel).
func (s *turnShell) sendPrompt(ctx context.Context, blocks []acp.ContentBlock) {
	go func() {
		resp, err := s.proc.conn.Prompt(context.WithoutCancel(ctx), acp.PromptRequest{SessionId: s.sid, Prompt: blocks})
		if err == nil {
			s.watch.addPromptUsage(resp.Usage)
			s.watch.notePromptMeta(resp.Meta)
		}
		s.answered <- turn.Answer{StopReason: string(resp.StopReason), Err: err}
	}()
}

// reply tells a steer's sender how it went: the Deliver activity waiting for it, or, for
// an Async steer, the session by delivery_outcome.
func (s *turnShell) reply(ctx context.Context, a turn.Action) {
	req, ok := s.steers[a.Steer]
	if !ok {
		return
	}
	delete(s.steers, a.Steer)
	if !req.async {
		if a.How == signals.HowFailed {
			req.reply <- steerReply{err: errors.New(a.Err)}
		} else {
			req.reply <- steerReply{how: a.How}
		}
		return
	}
	d := req.delivery
	o := signals.DeliveryOutcome{
		DeliveryID: d.DeliveryID, Kind: signals.DeliverSteer, TurnID: d.TurnID, Attempt: s.lt.attempt,
		Offset: d.Offset, How: a.How, Error: a.Err,
	}
	s.outcomes.post(func() { s.outcome(context.WithoutCancel(ctx), o) })
}

// outcomeQueue runs the delivery_outcome sends off the turn's loop, one after another in
// the order of the steers' outcomes.
type outcomeQueue struct{ last chan struct{} }

func (q *outcomeQueue) post(send func()) {
	prev, done := q.last, make(chan struct{})
	q.last = done
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		send()
	}()
}

// wait returns once every posted send is done.
func (q *outcomeQueue) wait() {
	if q.last != nil {
		<-q.last
	}
}

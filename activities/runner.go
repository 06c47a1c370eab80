// Package activities is the turn runner: it hosts the agent process, speaks the client side
// of ACP to it (acp-go-sdk over real stdio pipes), streams every session/update back to the
// session workflow as batched turn_events signals, heartbeats, and turns a cancellation of
// the activity into session/cancel.
//
// This file holds the runner's configuration and runs a turn attempt (RunTurn); its set-up
// and end are in runner_setup.go and runner_end.go. The attempt's prompt loop is the
// turn core (activities/turn: the rules, pure) inside the turn shell (turnshell.go: the
// goroutine that talks to the agent). What a worker's turns share is the host (host.go).
package activities

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tacp-dev/tacp/checkpoint"
	"github.com/tacp-dev/tacp/internal/sandbox"
	"github.com/tacp-dev/tacp/signals"
)

// Runner defaults.
const (
	DefaultFlushInterval = 80 * time.Millisecond
	// DefaultFlushLongest is the interval a long streaming turn's flushes stretch to.
	DefaultFlushLongest = 2 * time.Second
	DefaultFlushBytes   = 64 << 10
	// DefaultMaxFlushRate is a worker's turn_events signals a second, shared by the turns
	// streaming on it: up to 20 turns flush every 100 ms, 50 every 250 ms.
	DefaultMaxFlushRate = 200
	DefaultCancelGrace  = 30 * time.Second
	DefaultInitTimeout  = time.Minute
)

// Runner runs turns. Its fields are the worker's configuration.
type Runner struct {
	// Client signals the session workflows.
	Client client.Client
	// Host keeps agents alive between turns and routes deliveries into running turns.
	Host *Host
	// Trust holds the agent profiles this worker may run and its workspace roots: a turn
	// runs only a profile's command, only in a workspace inside a root.
	Trust *Trust
	// FlushInterval is how often a turn's events are flushed to the session at first;
	// FlushLongest the interval a long streaming turn stretches to (see stretch).
	FlushInterval time.Duration
	FlushLongest  time.Duration
	FlushBytes    int
	// MaxFlushRate bounds the turn_events signals a second of all the turns streaming on
	// this worker together (0: DefaultMaxFlushRate; negative: no bound): past it each
	// turn's flush interval widens (see flushBudget).
	MaxFlushRate float64
	// CancelGrace bounds the wait for the agent to answer `cancelled` after session/cancel;
	// past it the agent process is killed and the turn ends cancelled all the same.
	CancelGrace time.Duration
	// InitTimeout bounds starting the agent and setting up its session: an agent that never
	// answers initialize fails the attempt instead of hanging the turn.
	InitTimeout time.Duration
	// NoCarryContext turns off seeding a new agent session with the session's transcript
	// when the agent's own session could not be loaded (agent.context_lost is journaled all
	// the same). CarryContextBytes bounds the transcript (0: DefaultTranscriptBytes).
	NoCarryContext    bool
	CarryContextBytes int
	// MissingWorkspace is what a turn does when the session's workspace did not follow it
	// to this worker: MissingWorkspaceFail (the default) or MissingWorkspaceEmpty.
	MissingWorkspace string
	// Checkpoints checkpoints each turn's workspace at its end and restores a workspace
	// missing on this worker from the last checkpoint (nil: off).
	Checkpoints *checkpoint.Shadows
	// Sandbox confines the agents of sandboxed profiles (Profile.Sandboxed) to their
	// session (internal/sandbox); nil: this worker runs no sandboxed profile.
	Sandbox *sandbox.Box
	// LimitMaxWait is the longest a limited turn waits for its limit to reset before it
	// runs again (0: off, the turn fails as before); LimitBackoff the first wait when the
	// agent gives no reset time (0: DefaultLimitBackoff), doubled per wait (limits.go).
	LimitMaxWait time.Duration
	LimitBackoff time.Duration
	// AdoptWait is how long an attempt keeps running after the session's run is gone (it
	// continued as new mid-turn) for the next run's adopting RunTurn to take it over, and
	// how long an ended one's outcome is kept for an adopter that comes after its end (0:
	// DefaultAdoptWait). See adopt.go.
	AdoptWait time.Duration
	Logger    *slog.Logger

	budget *flushBudget
	once   sync.Once
	// Gate admits the turns of this worker's host queue against its capacity (nil: no
	// bound); the session queue's take their slot from its slot supplier.
	Gate *TurnGate
	// beat sends a heartbeat (nil: clientBeat); tests send theirs through the SDK's test
	// environment.
	beat beatFunc
	// egressCounted is how many of the sandbox's egress refusals are counted already.
	egressCounted atomic.Int64
}

// defaults fills in the zero fields once: activities run concurrently on one Runner.
func (r *Runner) defaults() { r.once.Do(r.setDefaults) }

func (r *Runner) setDefaults() {
	if r.FlushInterval <= 0 {
		r.FlushInterval = DefaultFlushInterval
	}
	if r.FlushLongest <= 0 {
		r.FlushLongest = max(DefaultFlushLongest, r.FlushInterval)
	}
	if r.FlushBytes <= 0 {
		r.FlushBytes = DefaultFlushBytes
	}
	if r.MaxFlushRate == 0 {
		r.MaxFlushRate = DefaultMaxFlushRate
	}
	r.budget = &flushBudget{rate: r.MaxFlushRate}
	if r.CancelGrace <= 0 {
		r.CancelGrace = DefaultCancelGrace
	}
	if r.InitTimeout <= 0 {
		r.InitTimeout = DefaultInitTimeout
	}
	if r.AdoptWait <= 0 {
		r.AdoptWait = DefaultAdoptWait
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.Host == nil {
		r.Host = &Host{Client: r.Client, Logger: r.Logger}
	}
	r.Host.init()
}

// RunTurn runs one attempt of a turn (runTurn) and answers for it, or, with in.Adopt,
// answers for an attempt that a closed run of the session scheduled (adopt.go).
//
// The attempt runs on a context of its own, in a goroutine of its own, so that it outlives
// its activity when the session's run is gone: the activity waits for its outcome, or
// returns at once when it no longer answers for it. The outcome is the turn's report: the
// activity's completion reaches the session as soon as a signal would (and after a
// continue-as-new, the adopter returns it), so the runner sends no turn_finished of its own.
func (r *Runner) RunTurn(ctx context.Context, in signals.RunTurnInput) (signals.RunTurnResult, error) {
	r.defaults()
	if in.Adopt {
		return r.adopt(ctx, in)
	}
	// Attempts on the previous host's queue ran in another activity: number on from them.
	attempt := in.AttemptBase + activity.GetInfo(ctx).Attempt
	// A turn the session queue gave this worker has its slot (TurnGate.TurnSlots); one sent
	// to its host queue takes one now, or goes back to the session queue.
	done := func() {}
	if activity.GetInfo(ctx).TaskQueue == r.Host.Queue {
		if !r.Gate.tryHost() {
			// Benign: expected at capacity, logged without alarm.
			return signals.RunTurnResult{}, temporal.NewApplicationErrorWithOptions(fmt.Sprintf(
				"this worker runs %d turns, its -turns.max: the turn goes to the session queue", r.Gate.Max()),
				signals.TypeHostBusy, temporal.ApplicationErrorOptions{Category: temporal.ApplicationErrorCategoryBenign})
		}
		done = r.Gate.doneHost
	}
	log := r.Logger.With("session", in.SessionID, "turn", in.TurnID, "attempt", attempt)
	a, owner := r.Host.startAttempt(ctx, attemptKey{in.SessionID, in.TurnID, attempt}, r.AdoptWait, log)
	go func() {
		defer done()
		var (
			res signals.RunTurnResult
			err error
		)
		defer func() {
			// The SDK's recovery of a panicking activity does not reach this goroutine:
			// the attempt fails as the SDK would fail it (retryable), the worker lives on.
			if p := recover(); p != nil {
				log.Error("turn attempt panicked", "panic", p, "stack", string(debug.Stack()))
				res, err = signals.RunTurnResult{Attempt: attempt, Host: r.Host.Queue}, fmt.Errorf("turn attempt panicked: %v", p)
			}
			r.Host.endAttempt(a, res, err)
		}()
		res, err = r.runTurn(a.ctx, in, attempt, a)
	}()
	return a.answer(owner)
}

// runTurn runs one attempt of a turn on this host: take the session's agent (alive from an
// earlier turn, or started and set up with session/load of the agent session kept in
// workflow state), prompt, stream, and answer with the stop reason. Steers, cancels and
// permission answers arrive through Deliver; a cancellation of the activity (delivered with
// heartbeats) is the backstop for cancel. The prompt loop itself is the turn shell around
// the turn core (turnshell.go, activities/turn).
func (r *Runner) runTurn(ctx context.Context, in signals.RunTurnInput, attempt int32, owner beatTarget) (signals.RunTurnResult, error) {
	t := &turnRun{r: r, in: in, attempt: attempt, res: signals.RunTurnResult{Attempt: attempt, Host: r.Host.Queue}}
	t.log = r.Logger.With("session", in.SessionID, "turn", in.TurnID, "attempt", attempt)
	// The attempt beats from its first instruction: an agent's start, its session/load, the
	// transcript carry-over and an authenticate may take longer than the heartbeat timeout
	// on a loaded worker, and a quiet attempt is taken for a lost worker (another start, and
	// another). Until this attempt knows better, it beats what the attempt before it knew,
	// so that a retry after this one loads the same agent session.
	t.before = t.progressBefore(ctx)
	beat := r.startHeartbeat(ctx, owner, t.before, t.log)
	defer beat.stop()
	setup, err := t.prepare(ctx)
	if err != nil {
		return t.res, err
	}
	// Signals outlive the activity's context: the last batches go out after a cancel too.
	sendCtx, cancelSend := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelSend()
	t.sendCtx = sendCtx
	t.startBatcher(sendCtx, activity.GetMetricsHandler(ctx))

	setupCtx, cancelSetup := context.WithTimeout(ctx, r.InitTimeout)
	defer cancelSetup()
	ag, err := r.Host.acquire(setupCtx, in.SessionID, setup.argv, setup.env, setup.dir, setup.sandbox, !setup.profile.AsksTypedFailures())
	if err != nil {
		if lost := t.lostDuringSetup(ctx); lost != nil {
			return t.finish(lost)
		}
		return t.finish(t.fail(fmt.Errorf("agent: %w", err)))
	}
	keep := true
	defer func() { r.Host.release(ag, keep) }()
	sid, started, prompt, err := t.open(setupCtx, ag, setup)
	if err != nil {
		keep = false
		if lost := t.lostDuringSetup(ctx); lost != nil {
			return t.finish(lost)
		}
		return t.finish(err)
	}
	lt := t.register(ag, sid, setup.dir)
	defer r.Host.unregister(lt)
	ag.client.setTurn(lt)
	t.reportStarted(started)

	// PromptSent is recorded once the prompt is on the agent's stdin, never before: a worker
	// lost between the two makes the retry send the prompt again (a duplicate, never a lost
	// prompt). The heartbeat's goroutine records it, so its round trip to the server (the
	// SDK sends an attempt's first heartbeat at once) is not on the prompt's path.
	progress := signals.TurnProgress{AgentSessionID: t.res.AgentSessionID, PromptSent: true}
	ag.proc.stdin.onPrompt(func() { beat.set(progress) })
	defer ag.proc.stdin.onPrompt(nil)
	shell := newTurnShell(r, ag, sid, lt, prompt, t.log)
	shell.outcome = func(ctx context.Context, o signals.DeliveryOutcome) {
		if err := r.signal(ctx, in.SessionWorkflowID, signals.SignalDeliveryOutcome, o); err != nil {
			t.log.Warn("delivery_outcome failed", "delivery", o.DeliveryID, "error", err)
		}
	}
	end := shell.run(ctx)
	keep = end.Keep
	return t.ended(end, ag.proc, progress)
}

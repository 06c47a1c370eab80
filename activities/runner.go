// Package activities is the turn runner: it hosts the agent process, speaks the client side
// of ACP to it (acp-go-sdk over real stdio pipes), streams every session/update back to the
// session workflow as batched turn_events signals, heartbeats, and turns a cancellation of
// the activity into session/cancel.
//
// This file sets a turn attempt up and ends it (RunTurn); the attempt's prompt loop is the
// turn core (turncore.go: the rules, pure) inside the turn shell (turnshell.go: the
// goroutine that talks to the agent). What a worker's turns share is the host (host.go).
package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"
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
	// AdoptWait is how long an attempt the session scheduled itself (InSession) keeps
	// running after the session's run is gone (it continued as new mid-turn) for the next
	// run's adopting RunTurn to take it over, and how long an ended one's outcome is kept
	// for an adopter that comes after its end (0: DefaultAdoptWait). See adopt.go.
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

// RunTurn runs one attempt of a turn (runAttempt) and answers for it, or, with in.Adopt,
// answers for an attempt that a closed run of the session scheduled (adopt.go).
//
// A TurnWorkflow's attempt runs on the activity's context, as it always did. An attempt the
// session scheduled itself (in.InSession) runs on a context of its own, in a goroutine of
// its own, so that it outlives its activity when the session's run is gone: the activity
// waits for its outcome, or returns at once when it no longer answers for it.
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
	if !in.InSession {
		defer done()
		actx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		return r.runAttempt(actx, in, attempt, activityOwned{ctx, cancel})
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
		res, err = r.runAttempt(a.ctx, in, attempt, a)
	}()
	return a.answer(owner)
}

// runAttempt runs one attempt of a turn (runTurn). For a TurnWorkflow's attempt, when the
// agent answered, it reports the end to the session straight away, once the agent is back
// in the idle pool, with the turn's last batch and its turn_started when nothing carried
// them yet (started.go): the TurnWorkflow reports it only when this report did not go out,
// two server round trips later, carrying the same. An InSession attempt's result is that
// report: the activity's completion reaches the session as soon as a signal would (and
// after a continue-as-new, the adopter returns it), so a signal would cost the session an
// event, a workflow task and an action for nothing. Heartbeats go to owner.
func (r *Runner) runAttempt(ctx context.Context, in signals.RunTurnInput, attempt int32, owner beatTarget) (signals.RunTurnResult, error) {
	res, err := r.runTurn(ctx, in, attempt, owner)
	if err == nil && res.StopReason != "" && !in.InSession {
		if serr := r.signal(context.WithoutCancel(ctx), in.SessionWorkflowID, signals.SignalTurnFinished, signals.TurnFinishedSignal{
			TurnID: in.TurnID, Attempt: res.Attempt, StopReason: res.StopReason,
			AgentSessionID: res.AgentSessionID, Usage: res.Usage, Batches: res.Batches, HostQueue: res.Host,
			Events: res.Events, Started: res.Started, Checkpoint: res.Checkpoint,
		}); serr != nil {
			r.Logger.Warn("early turn_finished failed: the TurnWorkflow will report", "session", in.SessionID, "turn", in.TurnID, "error", serr)
		} else {
			res.Reported = true
			res.Events, res.Started, res.Checkpoint = nil, nil, nil // the session has them
		}
	}
	return res, err
}

// runTurn runs one attempt of a turn on this host: take the session's agent (alive from an
// earlier turn, or started and set up with session/load of the agent session kept in
// workflow state), prompt, stream, and answer with the stop reason. Steers, cancels and
// permission answers arrive through Deliver; a cancellation of the activity (delivered with
// heartbeats) is the backstop for cancel. The prompt loop itself is the turn shell around
// the turn core (turnshell.go, turncore.go).
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
	defer t.reportStarted(sendCtx, started)()

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

// turnRun is one attempt of a turn while runTurn sets it up and ends it.
type turnRun struct {
	r       *Runner
	in      signals.RunTurnInput
	attempt int32
	// before is what the attempt before this one knew (its heartbeats, or the TurnWorkflow's
	// Resume when it ran on the previous host's queue).
	before signals.TurnProgress
	log    *slog.Logger
	res    signals.RunTurnResult
	b      *batcher
	watch  *turnObserver
	// sendCtx is the context the attempt's signals go out on (it outlives a cancel).
	sendCtx context.Context
	// dir is the turn's workspace, once admitted.
	dir string
	// started is the attempt's turn_started while a batch may carry it (started.go).
	mu      sync.Mutex
	started *startedReport
}

// turnSetup is what the worker admitted a turn with.
type turnSetup struct {
	profile Profile
	dir     string
	// argv and env start the agent: the profile's command, or the kernel sandbox's step
	// that confines it and then execs it (confine).
	argv       []string
	env        []string
	mcpServers []acp.McpServer
	sandbox    *Sandbox // nil: the profile keeps the agent on its own files
	prompt     []acp.ContentBlock
}

// lostDuringSetup is the error of an attempt whose context ended while its agent started or
// opened its session, for another reason than the workflow's cancel (the server no longer
// holds the attempt, the worker stops): the agent's start was cut short, it did not fail,
// so the turn is retried as after any lost attempt. nil: the context is live, or cancelled.
func (t *turnRun) lostDuringSetup(ctx context.Context) error {
	if ctx.Err() == nil || isCancelRequest(context.Cause(ctx)) {
		return nil
	}
	return temporal.NewApplicationErrorWithCause("turn attempt lost while its agent started", signals.TypeAttemptLost, context.Cause(ctx), t.before)
}

// fail is the error of a turn the agent cannot run: not retried.
func (t *turnRun) fail(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), signals.TypeAgentError, nil, t.res)
}

// prepare admits the turn (trust.go): its profile, workspace, environment, MCP servers and
// prompt. An error ends the attempt before anything runs.
func (t *turnRun) prepare(ctx context.Context) (turnSetup, error) {
	r, in := t.r, t.in
	profile, dir, missing, err := r.admit(in)
	if err != nil {
		// Refused by this worker (a profile it does not offer, a workspace outside its
		// roots): nothing runs, and no other attempt would run it either.
		return turnSetup{}, temporal.NewNonRetryableApplicationError(err.Error(), signals.RejectInvalidRequest, nil, t.res)
	}
	t.dir = dir
	if missing {
		if restored, rerr := t.restore(ctx, dir); !restored {
			if err := t.workspaceMissing(ctx, dir, rerr); err != nil {
				return turnSetup{}, err
			}
		}
	} else if in.HostQueue != r.Host.Queue {
		t.catchUp(ctx, dir)
	}
	if in.ForkOf != nil && in.AgentSessionID == "" {
		t.forkFiles(ctx, dir)
	}
	s := turnSetup{profile: profile, dir: dir, argv: profile.Argv()}
	if s.env, err = profile.AgentEnv(os.Environ()); err != nil {
		return turnSetup{}, t.fail(err)
	}
	if err := t.confine(ctx, &s); err != nil {
		return turnSetup{}, err
	}
	if s.mcpServers, err = r.Trust.MCPServers(in.McpServers); err != nil {
		return turnSetup{}, temporal.NewNonRetryableApplicationError(err.Error(), signals.RejectInvalidRequest, nil, t.res)
	}
	if profile.OffersClientFS() {
		if s.sandbox, err = NewSandbox(dir); err != nil {
			return turnSetup{}, t.fail(err)
		}
	}
	if s.prompt, err = promptBlocks(in.TurnInput); err != nil {
		return turnSetup{}, t.fail(err)
	}
	return s, nil
}

// MetricSandboxRefusals counts what the kernel sandbox refused that tacp can see: an agent
// start whose sandbox the path rules refused (kind "start"), and connections the egress
// proxy of an allowlist refused (kind "egress", counted at the next turn's start on the
// worker). What Landlock itself refuses is the agent's EACCES, counted by nobody (the
// kernel's audit log has it where audit is on).
const MetricSandboxRefusals = "tacp_sandbox_refusals"

// confine wraps a sandboxed profile's agent start into the sandbox's step (argv and env):
// the agent then runs confined to its session from its first instruction on.
func (t *turnRun) confine(ctx context.Context, s *turnSetup) error {
	if !s.profile.Sandboxed() {
		return nil
	}
	box := t.r.Sandbox
	if box == nil {
		return t.fail(fmt.Errorf("agent profile %q runs sandboxed, but this worker has no sandbox", s.profile.Name))
	}
	for n := box.Refusals(); ; {
		prev := t.r.egressCounted.Load()
		if n <= prev {
			break
		}
		if t.r.egressCounted.CompareAndSwap(prev, n) {
			activity.GetMetricsHandler(ctx).WithTags(map[string]string{"kind": "egress"}).Counter(MetricSandboxRefusals).Inc(n - prev)
			break
		}
	}
	argv, env, err := box.Command(s.profile.Settings, t.in.SessionID, s.dir, s.argv, s.env)
	if err != nil {
		activity.GetMetricsHandler(ctx).WithTags(map[string]string{"kind": "start"}).Counter(MetricSandboxRefusals).Inc(1)
		return t.fail(fmt.Errorf("agent sandbox: %w", err))
	}
	s.argv, s.env = argv, env
	return nil
}

// workspaceMissing tells the session that its workspace did not follow it to this worker
// (and, with restoreErr, why its last checkpoint could not be restored), and fails the turn
// unless the worker starts such sessions in an empty workspace.
func (t *turnRun) workspaceMissing(ctx context.Context, dir string, restoreErr error) error {
	r := t.r
	miss := &signals.WorkspaceMissingData{Path: dir, Host: r.Host.Queue, Action: signals.WorkspaceMissingFailed}
	if restoreErr != nil {
		miss.RestoreError = restoreErr.Error()
	}
	if r.MissingWorkspace == MissingWorkspaceEmpty {
		miss.Action = signals.WorkspaceMissingEmpty
	}
	t.log.Warn("the session's workspace did not follow it to this worker", "path", dir, "action", miss.Action)
	if serr := r.signal(context.WithoutCancel(ctx), t.in.SessionWorkflowID, signals.SignalTurnStarted, signals.TurnStartedSignal{
		TurnID: t.in.TurnID, Attempt: t.attempt, HostQueue: r.Host.Queue, WorkspaceMissing: miss,
	}); serr != nil {
		t.log.Warn("turn_started failed", "error", serr)
	}
	if miss.Action != signals.WorkspaceMissingFailed {
		return nil
	}
	// Leave no empty workspace behind: the next turn here must find it missing too.
	_ = os.Remove(filepath.Join(dir, WorkspaceMarker))
	_ = os.Remove(dir)
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"the session's workspace is not on this worker (%s has no %s): its earlier turns ran on another machine. "+
			"Give every worker one -checkpoint.store they all reach, put the workspace roots on storage every worker shares, "+
			"or start workers with -workspace.missing=empty", dir, WorkspaceMarker),
		signals.TypeWorkspaceMissing, nil, t.res)
}

// startBatcher starts the batcher of the turn's events (turn_events signals) and the
// observer of its tool calls and usage.
func (t *turnRun) startBatcher(sendCtx context.Context, metrics client.MetricsHandler) {
	r, in := t.r, t.in
	first := r.FlushInterval
	if in.Unwatched {
		first = r.FlushLongest // nobody waits for the first token: see batcher.unwatched
	}
	t.b = newBatcher(first, r.FlushLongest, r.FlushBytes, func(ctx context.Context, batch int64, events []json.RawMessage) error {
		err := r.signal(ctx, in.SessionWorkflowID, signals.SignalTurnEvents, signals.TurnEventsSignal{
			TurnID: in.TurnID, Attempt: t.attempt, Batch: batch, Events: events, Started: t.takeStarted(),
		})
		if err == nil {
			countBatch(metrics, events)
		}
		return err
	})
	t.b.budget = r.budget
	t.b.unwatched = in.Unwatched
	go t.b.run(sendCtx)
	t.watch = newTurnObserver()
}

// finish flushes the turn's last events and completes the result with them; a
// turn_started no batch took goes out alone.
func (t *turnRun) finish(err error) (signals.RunTurnResult, error) {
	n, serr := t.b.close()
	t.startedOut(t.sendCtx)
	t.res.Batches = n
	t.res.Usage = t.watch.usageJSON() // a turn cut short reports what it has seen too
	if err == nil && serr != nil {
		err = serr // retryable: the next attempt replays the turn
	}
	return t.res, err
}

// finishAnswered is finish for a turn the agent answered: for a session that takes them so,
// its last events (one batch, numbered on) and its turn_started, if no batch took it, are
// left in the result for RunTurn's turn_finished to carry, one signal instead of three.
func (t *turnRun) finishAnswered() (signals.RunTurnResult, error) {
	if !t.in.CarriedReports {
		return t.finish(nil)
	}
	held, n, serr := t.b.closeHolding()
	if len(held) > 0 {
		n++
	}
	t.res.Batches, t.res.Events, t.res.Started = n, held, t.takeStarted()
	t.res.Usage = t.watch.usageJSON()
	return t.res, serr // a batch that failed: retryable, the next attempt replays the turn
}

// ended finishes the attempt as the turn core ended it.
func (t *turnRun) ended(end turnEnd, proc *agentProc, beat signals.TurnProgress) (signals.RunTurnResult, error) {
	switch {
	case end.Lost:
		// This attempt ends without a stop reason, so the session does not take it for the
		// turn's end; the next attempt runs the turn, with session/load.
		res, _ := t.finish(nil)
		return res, temporal.NewApplicationErrorWithCause("turn attempt lost", signals.TypeAttemptLost, end.Err, beat)
	case end.Err != nil:
		t.checkpoint()
		return t.finish(t.r.agentErr(proc, end.Err, t.res))
	case end.Exited:
		t.checkpoint()
		return t.finish(t.fail(proc.withPrinted(fmt.Errorf("%w during the turn", proc.exitErr()))))
	}
	if res, err, done := t.limited(end); done {
		return res, err
	}
	t.checkpoint()
	t.res.StopReason = end.StopReason
	return t.finishAnswered()
}

// open opens the agent session of the turn (openSession) and applies the session's choices
// to it: the turn_started signal and the prompt to send follow from how it opened.
func (t *turnRun) open(setupCtx context.Context, ag *hostedAgent, s turnSetup) (acp.SessionId, signals.TurnStartedSignal, []acp.ContentBlock, error) {
	r, proc, before := t.r, ag.proc, t.before
	// A retry after a lost worker loads the agent session the lost attempt had and learns
	// whether the prompt had reached it (progressBefore).
	if t.in.AgentSessionID == "" {
		t.in.AgentSessionID = before.AgentSessionID
	}
	// What the agent says while its session opens belongs to this turn (claude-agent-acp
	// sends its commands right after session/new); only a session/load's replay of history,
	// which the session has journaled already, is left out (openSession).
	proc.setTap(func(raw json.RawMessage) {
		t.watch.observe(raw)
		if o := ag.offer.Load(); o != nil {
			o.observe(raw)
			if o.answersOwnChange(raw) {
				return
			}
		}
		t.b.add(raw)
	})
	r.Trust.Profiles.Learn(s.profile.Name, proc.caps, s.env)
	sid, lost, err := r.openSession(setupCtx, ag, t.in, s.dir, s.mcpServers, r.Trust.Profiles.workerAuth(s.profile.Name))
	if err != nil {
		return "", signals.TurnStartedSignal{}, nil, r.agentErr(proc, err, t.res)
	}
	r.Trust.Profiles.Opened(s.profile.Name)
	t.res.AgentSessionID = string(sid)
	offered, err := r.applyChoices(setupCtx, ag, sid, t.in, s.profile, t.log)
	if err != nil {
		return "", signals.TurnStartedSignal{}, nil, t.fail(err)
	}
	started := signals.TurnStartedSignal{TurnID: t.in.TurnID, Attempt: t.attempt, HostQueue: r.Host.Queue, AgentSessionID: t.res.AgentSessionID, Settings: offered,
		Sandbox: s.profile.SandboxInfo().Describe(), Beats: t.in.CarriedReports}
	prompt := s.prompt
	switch {
	case lost != "":
		started.ContextLost, prompt = t.contextLost(setupCtx, lost, sid, prompt)
	case t.in.ForkOf != nil && t.in.AgentSessionID == "":
		// A fork's first agent session: it starts from the origin's conversation, and the
		// journal says so (agent.context_lost's reason names the fork: its agent holds no
		// memory of its own, only what tacp carried).
		lost = fmt.Sprintf("a fork of session %s: its agent starts from that session's conversation", t.in.ForkOf.SessionID)
		started.ContextLost, prompt = t.contextLost(setupCtx, lost, sid, prompt)
	case before.PromptSent && before.AgentSessionID == string(sid):
		// The agent session holds the prompt already (the lost attempt sent it, and the agent
		// keeps what it was told): sending it again would show the model the prompt twice.
		// The lost attempt's partial answer is dropped by viewers (turn.restarted, resumed).
		t.log.Info("the agent session holds the prompt already: asking it to continue instead of sending it again")
		prompt = []acp.ContentBlock{acp.TextBlock(ResumeText)}
		started.Resumed = true
	}
	return sid, started, prompt, nil
}

// contextLost journals that the agent could not load the session's agent session (never
// forget silently), and seeds the new agent session with the conversation.
func (t *turnRun) contextLost(ctx context.Context, lost string, sid acp.SessionId, prompt []acp.ContentBlock) (*signals.AgentContextLostData, []acp.ContentBlock) {
	cl := &signals.AgentContextLostData{Reason: lost, Attempt: t.attempt, Host: t.r.Host.Queue, LostSessionID: t.in.AgentSessionID, NewSessionID: string(sid)}
	if !t.r.NoCarryContext {
		seed, serr := t.r.transcript(ctx, t.in)
		if serr != nil {
			t.log.Warn("transcript query failed: the new agent session starts without the conversation", "error", serr)
		} else if seed.Text != "" {
			prompt = append([]acp.ContentBlock{acp.TextBlock(seed.Text)}, prompt...)
			cl.Carried, cl.CarriedTruncated = len(seed.Text), seed.Truncated
		}
	}
	t.log.Warn("agent context lost: started a new agent session", "reason", lost, "carried_bytes", cl.Carried)
	return cl, prompt
}

// register enters the turn into the host's live-turn registry, wired to its agent.
func (t *turnRun) register(ag *hostedAgent, sid acp.SessionId, dir string) *liveTurn {
	r, in := t.r, t.in
	lt := r.Host.register(in.SessionID, in.TurnID, t.attempt)
	lt.beforePermission = func() (answered func()) {
		t.b.flushNow()
		t.startedOut(t.sendCtx) // the answer goes to the host queue turn_started names
		// While the turn waits for a person, the session knows why it is quiet (the request
		// says so): the beat a quiet turn owes waits for the answer.
		return t.b.holdBeat(signals.TurnBeatAfter)
	}
	lt.watch = t.watch
	lt.goLive = func() { t.b.goLive(r.FlushInterval) }
	lt.askPermission = func(ctx context.Context, sig signals.PermissionRequestedSignal) error {
		return r.signal(ctx, in.SessionWorkflowID, signals.SignalPermissionRequested, sig)
	}
	lt.completeElicitation = func(ctx context.Context, sig signals.ElicitationCompletedSignal) error {
		return r.signal(ctx, in.SessionWorkflowID, signals.SignalElicitationCompleted, sig)
	}
	lt.askElicitation = func(ctx context.Context, sig signals.ElicitationRequestedSignal) error {
		return r.signal(ctx, in.SessionWorkflowID, signals.SignalElicitationRequested, sig)
	}
	home, _ := os.UserHomeDir()
	lt.reach = func(toolCall json.RawMessage) string { return ToolCallReach(toolCall, dir, home) }
	lt.applySettings = func(ctx context.Context, c signals.SessionChoices) (*signals.AgentSettings, error) {
		o := ag.offer.Load()
		if o == nil {
			return nil, errors.New("the agent session offers nothing to set")
		}
		err := o.apply(ctx, ag.proc.conn, sid, c)
		return o.report(ag.proc.caps), err
	}
	return lt
}

// progressBefore is what the attempt before this one knew: the last heartbeat of this
// activity's earlier attempt, or, when that ran on the previous host's queue, what the
// TurnWorkflow passed on.
func (t *turnRun) progressBefore(ctx context.Context) signals.TurnProgress {
	var before signals.TurnProgress
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &before)
	} else if t.in.Resume != nil {
		before = *t.in.Resume
	}
	if before.AgentSessionID == "" && t.attempt > 1 {
		// The lost attempt's last beats may not have reached the server (the SDK holds a
		// heartbeat back for up to a throttle interval), but its turn_started signal did
		// if it opened an agent session: the session knows which one. Loading it keeps the
		// conversation, or fails and is journaled (agent.context_lost); a new agent session
		// started here without a word would forget it silently. Whether the prompt reached
		// the agent is not known then: it is sent again rather than lost.
		if id := t.sessionsAgentSession(ctx); id != "" {
			before.AgentSessionID = id
		}
	}
	return before
}

// sessionsAgentSession asks the session which agent session it holds ("" when it holds none
// or does not answer).
func (t *turnRun) sessionsAgentSession(ctx context.Context) string {
	wait := 3 * time.Second
	if hb := activity.GetInfo(ctx).HeartbeatTimeout; hb > 0 {
		wait = hb / 3
	}
	qctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	v, err := t.r.Client.QueryWorkflow(qctx, t.in.SessionWorkflowID, "", signals.QueryStatus)
	if err != nil {
		t.log.Warn("status query failed: the retry opens the agent session its input names", "error", err)
		return ""
	}
	var st signals.Status
	if err := v.Get(&st); err != nil {
		return ""
	}
	return st.AgentSessionID
}

// isCancelRequest reports whether an activity context ended because the workflow asked for
// the cancellation (the cancel backstop), rather than because the attempt was lost.
func isCancelRequest(cause error) bool {
	var ce *temporal.CanceledError
	return errors.As(cause, &ce)
}

// Metric names of the turn runner, as recorded (the Prometheus exporter adds _total).
// Sizes are counters, not histograms: the SDK's metrics handler offers counters, gauges and
// timers only, and a gauge would keep the last batch alone. events/batches is the mean batch.
const (
	MetricEventBatches     = "tacp_event_batches"
	MetricEventBatchEvents = "tacp_event_batch_events"
	MetricEventBatchBytes  = "tacp_event_batch_bytes"
)

// countBatch counts one turn_events batch sent to the session: its events and their bytes.
func countBatch(h client.MetricsHandler, events []json.RawMessage) {
	n := 0
	for _, ev := range events {
		n += len(ev)
	}
	h.Counter(MetricEventBatches).Inc(1)
	h.Counter(MetricEventBatchEvents).Inc(int64(len(events)))
	h.Counter(MetricEventBatchBytes).Inc(int64(n))
}

// ResumeText is the prompt of an attempt whose agent session already holds the turn's prompt
// (the lost attempt sent it): the agent is asked to go on, not told the prompt twice.
const ResumeText = "[tacp: the worker running this turn was lost while you were answering the previous message. " +
	"Your partial answer may not have reached the user. Continue answering that message; do not repeat work that is already done.]"

// WorkspaceMarker is the file tacp writes into a workspace it creates, naming the session:
// a later turn on a worker that finds no such workspace knows it did not follow the session.
const WorkspaceMarker = ".tacp-workspace"

// What a turn does when the session's workspace is missing on its worker.
const (
	MissingWorkspaceFail  = "fail"
	MissingWorkspaceEmpty = "empty"
)

// transcript asks the session for its conversation before this turn, for seeding a new
// agent session (a query: no history, asked only when the agent's session was lost).
func (r *Runner) transcript(ctx context.Context, in signals.RunTurnInput) (signals.TranscriptResult, error) {
	own, err := r.queryTranscript(ctx, in.SessionWorkflowID, signals.TranscriptRequest{BeforeTurn: in.TurnID, MaxBytes: r.CarryContextBytes})
	if err != nil || in.ForkOf == nil {
		return own, err
	}
	// A fork's conversation begins in its origin: that part first, under a header that says
	// where it comes from, within what the fork's own part leaves of the bound.
	limit := r.CarryContextBytes
	if limit <= 0 {
		limit = signals.DefaultTranscriptBytes
	}
	budget := limit - len(own.Text) - 2
	if budget < 2*signals.MaxTranscriptHeaderBytes {
		own.Truncated = true
		return own, nil
	}
	origin, err := r.queryTranscript(ctx, signals.SessionWorkflowID(in.ForkOf.SessionID), signals.TranscriptRequest{
		BeforeTurn: in.ForkOf.BeforeTurn, MaxBytes: budget, Header: signals.ForkTranscriptHeader(*in.ForkOf),
	})
	if err != nil {
		return own, fmt.Errorf("the conversation of session %s, which this session forks: %w", in.ForkOf.SessionID, err)
	}
	res := signals.TranscriptResult{Text: origin.Text, Turns: origin.Turns + own.Turns, Truncated: origin.Truncated || own.Truncated}
	if own.Text != "" {
		res.Text = strings.TrimPrefix(res.Text+"\n\n"+own.Text, "\n\n")
	}
	return res, nil
}

// queryTranscript asks workflow id for its transcript.
func (r *Runner) queryTranscript(ctx context.Context, id string, req signals.TranscriptRequest) (signals.TranscriptResult, error) {
	var res signals.TranscriptResult
	v, err := r.Client.QueryWorkflow(ctx, id, "", signals.QueryTranscript, req)
	if err != nil {
		return res, err
	}
	return res, v.Get(&res)
}

// steeringSupported reports whether the agent advertised _meta.steering.supported.
func steeringSupported(caps acp.InitializeResponse) bool {
	st, _ := caps.Meta["steering"].(map[string]any)
	ok, _ := st["supported"].(bool)
	return ok
}

// steeringParams are the params of _session/steering as the agents that serve it take them
// (claude-agent-acp): the prompt as content blocks, like session/prompt's, and idleBehavior
// "promptRequired", so that an agent whose turn has already ended answers that instead of
// starting a detached turn of its own: the steer then goes in by interrupt-and-continue,
// inside the tacp turn.
func steeringParams(sid acp.SessionId, text string) map[string]any {
	return map[string]any{
		"sessionId": sid,
		"prompt":    []acp.ContentBlock{acp.TextBlock(text)},
		"_meta":     map[string]any{"steering": map[string]any{"idleBehavior": signals.SteeringIdlePromptRequired}},
	}
}

// inject delivers a steer through _session/steering; any answer but "injected" (or
// "startedNewTurn", from an agent that ignores idleBehavior) is an error, so the caller
// falls back to interrupt-and-continue.
func (r *Runner) inject(ctx context.Context, proc *agentProc, sid acp.SessionId, text string) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	raw, err := proc.conn.CallExtension(ctx, signals.SteeringMethod, steeringParams(sid, text))
	if err != nil {
		return "", err
	}
	var resp struct {
		Outcome string `json:"outcome"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return "", fmt.Errorf("decode %s answer: %w", signals.SteeringMethod, err)
	}
	switch resp.Outcome {
	case signals.SteerInjected, signals.SteerStartedNewTurn:
		return signals.HowInjected, nil
	default:
		return "", fmt.Errorf("%s answered %q", signals.SteeringMethod, resp.Outcome)
	}
}

// agentErr is the error of a turn the agent failed: not retried, with the partial result
// (attempt, batches, agent session) as details.
func (r *Runner) agentErr(proc *agentProc, err error, res signals.RunTurnResult) error {
	msg := err.Error()
	var reqErr *acp.RequestError
	if errors.As(err, &reqErr) {
		msg = reqErr.Message
		if reqErr.Data != nil {
			if b, jerr := json.Marshal(reqErr.Data); jerr == nil {
				msg += " " + string(b)
			}
		}
	}
	if !proc.alive() {
		msg = proc.withPrinted(fmt.Errorf("%w: %s", proc.exitErr(), msg)).Error()
	}
	return temporal.NewNonRetryableApplicationError("agent: "+msg, signals.TypeAgentError, nil, res)
}

// openSession picks the agent session for the turn: the one the live agent already holds
// when it is the session's, else session/load of the one kept in workflow state when the
// agent can load sessions, else a new one.
//
// An agent that answers session/new with auth_required is authenticated with authID, an
// auth method the worker completes by itself (an env-var key the agent's environment
// holds), and asked again; with none the error says what the operator must set.
//
// lost is set (the reason) when the session had an agent session that this agent could not
// load, so the new one does not know the conversation.
func (r *Runner) openSession(ctx context.Context, ag *hostedAgent, in signals.RunTurnInput, dir string, mcpServers []acp.McpServer, authID string) (sid acp.SessionId, lost string, err error) {
	proc := ag.proc
	key, _ := json.Marshal(mcpServers)
	if ag.acpSession != "" && (in.AgentSessionID == "" || in.AgentSessionID == string(ag.acpSession)) {
		// The session's MCP servers changed (set_mcp_servers): an agent that loads sessions
		// loads its own again with them; one that cannot keeps its conversation, and gets
		// them in its next process.
		if bytes.Equal(ag.mcpKey, key) || !proc.caps.AgentCapabilities.LoadSession {
			return ag.acpSession, "", nil
		}
		in.AgentSessionID = string(ag.acpSession)
	} else if in.AgentSessionID != "" && !proc.caps.AgentCapabilities.LoadSession {
		lost = "the agent cannot load sessions (no loadSession capability)"
	}
	ag.mcpKey = key
	if in.AgentSessionID != "" && proc.caps.AgentCapabilities.LoadSession {
		// The replay is the conversation the session has journaled already (a lost attempt's
		// partial output was superseded by turn.restarted): it is counted in the worker's log,
		// not journaled twice.
		var replayed atomic.Int64
		endReplay := proc.replayUntilAnswer(func(json.RawMessage) { replayed.Add(1) })
		loaded, err := proc.conn.LoadSession(ctx, acp.LoadSessionRequest{
			SessionId: acp.SessionId(in.AgentSessionID), Cwd: dir, McpServers: mcpServers,
		})
		endReplay()
		if err == nil {
			r.Logger.Info("session/load: the agent replayed the conversation", "session", in.SessionID, "updates", replayed.Load())
			ag.acpSession = acp.SessionId(in.AgentSessionID)
			ag.offer.Store(offerOf(loaded.Modes, loaded.ConfigOptions, loaded.Models))
			return ag.acpSession, "", nil
		}
		r.Logger.Warn("session/load failed: starting a new agent session", "session", in.SessionID, "error", err)
		lost = "session/load failed: " + loadErrText(err)
	}
	resp, err := proc.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: dir, McpServers: mcpServers})
	if authRequired(err) && authID != "" {
		if _, aerr := proc.conn.Authenticate(ctx, acp.AuthenticateRequest{MethodId: authID}); aerr != nil {
			return "", "", fmt.Errorf("authenticate %s: %w", authID, aerr)
		}
		resp, err = proc.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: dir, McpServers: mcpServers})
	}
	if authRequired(err) {
		return "", "", fmt.Errorf("session/new: the agent needs authentication the worker cannot complete: %s (%w)", AuthHint(proc.caps.AuthMethods), err)
	}
	if err != nil {
		return "", "", fmt.Errorf("session/new: %w", err)
	}
	ag.acpSession = resp.SessionId
	ag.offer.Store(offerOf(resp.Modes, resp.ConfigOptions, resp.Models))
	return resp.SessionId, lost, nil
}

// loadErrText is the agent's message for a failed session/load, without its data (which
// may echo paths of the agent's host).
func loadErrText(err error) string {
	var reqErr *acp.RequestError
	if errors.As(err, &reqErr) {
		return reqErr.Message
	}
	return err.Error()
}

// admit resolves the turn's agent profile and workspace through the worker's Trust, and
// creates the workspace when it does not exist yet (inside its root, resolved first).
//
// missing is set when the workspace did not exist on this worker although the session had
// turns before (it holds an agent session): its files are on the machine that ran them.
// tacp writes WorkspaceMarker, naming the session, into every workspace it creates.
func (r *Runner) admit(in signals.RunTurnInput) (profile Profile, dir string, missing bool, err error) {
	if r.Trust == nil || r.Trust.Profiles == nil || r.Trust.Roots == nil {
		return Profile{}, "", false, errors.New("this worker has no agent profiles or workspace roots configured")
	}
	if in.Agent != "" {
		if err := signals.ValidateProfileName(in.Agent); err != nil {
			return Profile{}, "", false, err
		}
	}
	profile, err = r.Trust.Profiles.Resolve(in.Agent)
	if err != nil {
		return Profile{}, "", false, err
	}
	dir, err = r.Trust.Roots.Resolve(in.SessionID, in.Workspace)
	if err != nil {
		return Profile{}, "", false, err
	}
	_, statErr := os.Stat(dir)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Profile{}, "", false, fmt.Errorf("workspace: %w", err)
	}
	// Created through a path checked a moment ago: check what it became.
	if real, err := filepath.EvalSymlinks(dir); err != nil || !r.Trust.Roots.Contains(real) {
		return Profile{}, "", false, fmt.Errorf("workspace %q moved outside the workspace roots while it was created", in.Workspace)
	}
	if created {
		if err := os.WriteFile(filepath.Join(dir, WorkspaceMarker), []byte(in.SessionID+"\n"), 0o644); err != nil {
			r.Logger.Warn("workspace marker not written", "session", in.SessionID, "error", err)
		}
	}
	return profile, dir, created && in.AgentSessionID != "", nil
}

// signal sends a signal to the session workflow (by workflow id: it reaches the current
// run), retrying transient failures for up to a minute.
func (r *Runner) signal(ctx context.Context, workflowID, name string, arg any) error {
	return signalWithRetry(ctx, r.Client, r.Logger, workflowID, name, arg)
}

func signalWithRetry(ctx context.Context, c client.Client, log *slog.Logger, workflowID, name string, arg any) error {
	backoff := 50 * time.Millisecond
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.SignalWorkflow(ctx, workflowID, "", name, arg)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		log.Warn("signal failed: retrying", "signal", name, "error", err)
		time.Sleep(backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
}

// promptBlocks converts the turn's prompt into ACP content blocks.
func promptBlocks(in signals.TurnInput) ([]acp.ContentBlock, error) {
	if len(in.Content) > 0 {
		var blocks []acp.ContentBlock
		if err := json.Unmarshal(in.Content, &blocks); err != nil {
			return nil, fmt.Errorf("prompt content is not ACP content blocks: %w", err)
		}
		if in.Text != "" {
			blocks = append([]acp.ContentBlock{acp.TextBlock(in.Text)}, blocks...)
		}
		return blocks, nil
	}
	return []acp.ContentBlock{acp.TextBlock(in.Text)}, nil
}

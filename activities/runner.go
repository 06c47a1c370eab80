// Package activities is the turn runner: it hosts the agent process, speaks the client side
// of ACP to it (acp-go-sdk over real stdio pipes), streams every session/update back to the
// session workflow as batched turn_events signals, heartbeats, and turns a cancellation of
// the activity into session/cancel.
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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

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
	DefaultInitTimeout  = 30 * time.Second
	heartbeatEvery      = time.Second
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
	Logger           *slog.Logger

	budget *flushBudget
	once   sync.Once
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
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.Host == nil {
		r.Host = &Host{Client: r.Client, Logger: r.Logger}
	}
	r.Host.init()
}

// RunTurn runs one attempt of a turn (runTurn) and, when the agent answered, reports the
// end to the session straight away, once the agent is back in the idle pool: the
// TurnWorkflow reports it too after the activity completes, two server round trips later,
// and the session takes whichever comes first (the other no longer names its live turn).
func (r *Runner) RunTurn(ctx context.Context, in signals.RunTurnInput) (signals.RunTurnResult, error) {
	res, err := r.runTurn(ctx, in)
	if err == nil && res.StopReason != "" {
		if serr := r.signal(context.WithoutCancel(ctx), in.SessionWorkflowID, signals.SignalTurnFinished, signals.TurnFinishedSignal{
			TurnID: in.TurnID, Attempt: res.Attempt, StopReason: res.StopReason,
			AgentSessionID: res.AgentSessionID, Usage: res.Usage, Batches: res.Batches, HostQueue: res.Host,
		}); serr != nil {
			r.Logger.Warn("early turn_finished failed: the TurnWorkflow will report", "session", in.SessionID, "turn", in.TurnID, "error", serr)
		} else {
			res.Reported = true
		}
	}
	return res, err
}

// runTurn runs one attempt of a turn on this host: take the session's agent (alive from an
// earlier turn, or started and set up with session/load of the agent session kept in
// workflow state), prompt, stream, and answer with the stop reason. Steers, cancels and
// permission answers arrive through Deliver; a cancellation of the activity (delivered with
// heartbeats) is the backstop for cancel.
func (r *Runner) runTurn(ctx context.Context, in signals.RunTurnInput) (signals.RunTurnResult, error) {
	r.defaults()
	// Attempts on the previous host's queue ran in another activity: number on from them.
	attempt := in.AttemptBase + activity.GetInfo(ctx).Attempt
	log := r.Logger.With("session", in.SessionID, "turn", in.TurnID, "attempt", attempt)
	res := signals.RunTurnResult{Attempt: attempt, Host: r.Host.Queue}
	fail := func(err error) error {
		return temporal.NewNonRetryableApplicationError(err.Error(), signals.TypeAgentError, nil, res)
	}

	profile, dir, missing, err := r.admit(in)
	if err == nil && missing {
		miss := &signals.WorkspaceMissingData{Path: dir, Host: r.Host.Queue, Action: signals.WorkspaceMissingFailed}
		if r.MissingWorkspace == MissingWorkspaceEmpty {
			miss.Action = signals.WorkspaceMissingEmpty
		}
		log.Warn("the session's workspace did not follow it to this worker", "path", dir, "action", miss.Action)
		if serr := r.signal(context.WithoutCancel(ctx), in.SessionWorkflowID, signals.SignalTurnStarted, signals.TurnStartedSignal{
			TurnID: in.TurnID, Attempt: attempt, HostQueue: r.Host.Queue, WorkspaceMissing: miss,
		}); serr != nil {
			log.Warn("turn_started failed", "error", serr)
		}
		if miss.Action == signals.WorkspaceMissingFailed {
			// Leave no empty workspace behind: the next turn here must find it missing too.
			_ = os.Remove(filepath.Join(dir, WorkspaceMarker))
			_ = os.Remove(dir)
			return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"the session's workspace is not on this worker (%s has no %s): its earlier turns ran on another machine. "+
					"Put the workspace roots on storage every worker shares, or start workers with -workspace.missing=empty", dir, WorkspaceMarker),
				ErrWorkspaceMissing, nil, res)
		}
	}
	if err != nil {
		// Refused by this worker (a profile it does not offer, a workspace outside its
		// roots): nothing runs, and no other attempt would run it either.
		return res, temporal.NewNonRetryableApplicationError(err.Error(), signals.RejectInvalidRequest, nil, res)
	}
	env, err := profile.AgentEnv(os.Environ())
	if err != nil {
		return res, fail(err)
	}
	mcpServers, err := r.Trust.MCPServers(in.McpServers)
	if err != nil {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), signals.RejectInvalidRequest, nil, res)
	}
	var sandbox *Sandbox // nil: the profile keeps the agent on its own files
	if profile.OffersClientFS() {
		if sandbox, err = NewSandbox(dir); err != nil {
			return res, fail(err)
		}
	}
	prompt, err := promptBlocks(in.TurnInput)
	if err != nil {
		return res, fail(err)
	}

	// Signals outlive the activity's context: the last batches go out after a cancel too.
	sendCtx, cancelSend := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelSend()
	metrics := activity.GetMetricsHandler(ctx)
	b := newBatcher(r.FlushInterval, r.FlushLongest, r.FlushBytes, func(ctx context.Context, batch int64, events []json.RawMessage) error {
		err := r.signal(ctx, in.SessionWorkflowID, signals.SignalTurnEvents, signals.TurnEventsSignal{
			TurnID: in.TurnID, Attempt: attempt, Batch: batch, Events: events,
		})
		if err == nil {
			countBatch(metrics, events)
		}
		return err
	})
	b.budget = r.budget
	go b.run(sendCtx)
	watch := newTurnObserver()
	finish := func(res signals.RunTurnResult, err error) (signals.RunTurnResult, error) {
		n, serr := b.close()
		res.Batches = n
		res.Usage = watch.usageJSON() // a turn cut short reports what it has seen too
		if err == nil && serr != nil {
			err = serr // retryable: the next attempt replays the turn
		}
		return res, err
	}

	// A retry after a lost worker loads the agent session the lost attempt had, which it
	// recorded in its heartbeats (or, when it ran on the previous host's queue, the
	// TurnWorkflow passed on), and learns whether the prompt had reached it.
	var before signals.TurnProgress
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &before)
	} else if in.Resume != nil {
		before = *in.Resume
	}
	if in.AgentSessionID == "" {
		in.AgentSessionID = before.AgentSessionID
	}
	setupCtx, cancelSetup := context.WithTimeout(ctx, r.InitTimeout)
	defer cancelSetup()
	ag, err := r.Host.acquire(setupCtx, in.SessionID, profile.Argv(), env, dir, sandbox)
	if err != nil {
		return finish(res, fail(fmt.Errorf("agent: %w", err)))
	}
	keep := true
	defer func() { r.Host.release(ag, keep) }()
	proc := ag.proc
	// What the agent says while its session opens belongs to this turn (claude-agent-acp
	// sends its commands right after session/new); only a session/load's replay of history,
	// which the session has journaled already, is left out (openSession).
	proc.setTap(func(raw json.RawMessage) {
		watch.observe(raw)
		if o := ag.offer.Load(); o != nil {
			o.observe(raw)
		}
		b.add(raw)
	})
	r.Trust.Profiles.Learn(profile.Name, proc.caps, env)
	sid, lost, err := r.openSession(setupCtx, ag, in, dir, mcpServers, r.Trust.Profiles.workerAuth(profile.Name))
	if err != nil {
		keep = false
		return finish(res, r.agentErr(proc, err, res))
	}
	r.Trust.Profiles.Opened(profile.Name)
	res.AgentSessionID = string(sid)
	offered := r.applyChoices(setupCtx, ag, sid, in, log)
	started := signals.TurnStartedSignal{TurnID: in.TurnID, Attempt: attempt, HostQueue: r.Host.Queue, AgentSessionID: res.AgentSessionID, Settings: offered}
	switch {
	case lost != "":
		// Never forget silently: journaled, and the new agent session gets the conversation.
		cl := &signals.AgentContextLostData{Reason: lost, Attempt: attempt, Host: r.Host.Queue, LostSessionID: in.AgentSessionID, NewSessionID: string(sid)}
		if !r.NoCarryContext {
			seed, serr := r.transcript(setupCtx, in)
			if serr != nil {
				log.Warn("transcript query failed: the new agent session starts without the conversation", "error", serr)
			} else if seed.Text != "" {
				prompt = append([]acp.ContentBlock{acp.TextBlock(seed.Text)}, prompt...)
				cl.Carried, cl.CarriedTruncated = len(seed.Text), seed.Truncated
			}
		}
		log.Warn("agent context lost: started a new agent session", "reason", lost, "carried_bytes", cl.Carried)
		started.ContextLost = cl
	case before.PromptSent && before.AgentSessionID == string(sid):
		// The agent session holds the prompt already (the lost attempt sent it, and the agent
		// keeps what it was told): sending it again would show the model the prompt twice.
		// The lost attempt's partial answer is dropped by viewers (turn.restarted, resumed).
		log.Info("the agent session holds the prompt already: asking it to continue instead of sending it again")
		prompt = []acp.ContentBlock{acp.TextBlock(ResumeText)}
		started.Resumed = true
	}

	lt := r.Host.register(in.SessionID, in.TurnID, attempt)
	defer r.Host.unregister(lt)
	lt.beforePermission = b.flushNow
	lt.watch = watch
	lt.askPermission = func(ctx context.Context, sig signals.PermissionRequestedSignal) error {
		return r.signal(ctx, in.SessionWorkflowID, signals.SignalPermissionRequested, sig)
	}
	home, _ := os.UserHomeDir()
	lt.reach = func(toolCall json.RawMessage) string { return ToolCallReach(toolCall, dir, home) }
	lt.applySettings = func(ctx context.Context, c signals.SessionChoices) error {
		o := ag.offer.Load()
		if o == nil {
			return errors.New("the agent session offers nothing to set")
		}
		return o.apply(ctx, proc.conn, sid, c)
	}
	ag.client.setTurn(lt)

	// turn_started tells the session where to deliver decisions. The prompt does not wait for
	// it: the session takes events and requests of an attempt in any order. The turn's end
	// does (bounded): a quick turn's turn_finished must not overtake it, or the session, the
	// turn over, drops what it says (agent.context_lost, workspace.missing).
	startedSent := make(chan struct{})
	go func() {
		defer close(startedSent)
		if err := r.signal(sendCtx, in.SessionWorkflowID, signals.SignalTurnStarted, started); err != nil {
			log.Warn("turn_started failed: decisions cannot reach this attempt", "error", err)
		}
	}()
	defer func() {
		select {
		case <-startedSent:
		case <-time.After(startedWait):
			log.Warn("turn_started still not sent at the turn's end", "waited", startedWait)
		}
	}()

	type answer struct {
		resp acp.PromptResponse
		err  error
	}
	answered := make(chan answer, 1)
	send := func(blocks []acp.ContentBlock) {
		// The prompt's context is not the activity's: cancelling it would drop the agent's
		// answer. Cancellation goes to the agent as session/cancel instead.
		go func() {
			resp, err := proc.conn.Prompt(context.WithoutCancel(ctx), acp.PromptRequest{SessionId: sid, Prompt: blocks})
			answered <- answer{resp, err}
		}()
	}
	send(prompt)
	// Heartbeats beat on their own: nothing the loop below waits for (a steer's injection,
	// bounded at 10 s — the heartbeat timeout itself —, a write to an agent that stopped
	// reading its stdin) may starve them, or a healthy worker's turn is taken for lost.
	// PromptSent is recorded with the first: the request is written before Prompt blocks.
	beat := signals.TurnProgress{AgentSessionID: res.AgentSessionID, PromptSent: true}
	activity.RecordHeartbeat(ctx, beat)
	stopBeating := make(chan struct{})
	defer close(stopBeating)
	go func() {
		hb := time.NewTicker(heartbeatEvery)
		defer hb.Stop()
		for {
			select {
			case <-hb.C:
				activity.RecordHeartbeat(ctx, beat)
			case <-stopBeating:
				return
			}
		}
	}()
	var (
		cancelling   bool
		killAt       <-chan time.Time
		interrupting []steerRequest // steers waiting for the interrupted prompt to resolve
	)
	startCancel := func(why string) {
		if cancelling {
			return
		}
		cancelling = true
		log.Info("cancelling turn: sending session/cancel", "via", why)
		lt.requestCancel() // answers the agent's open permission requests cancelled
		for _, s := range interrupting {
			s.reply <- steerReply{err: errors.New("the turn was cancelled")}
		}
		interrupting = nil
		if err := proc.conn.Cancel(context.WithoutCancel(ctx), acp.CancelNotification{SessionId: sid}); err != nil {
			log.Warn("session/cancel failed", "error", err)
		}
		killAt = time.After(r.CancelGrace)
	}
	for {
		select {
		case a := <-answered:
			if a.err != nil {
				keep = proc.alive()
				return finish(res, r.agentErr(proc, a.err, res))
			}
			watch.addPromptUsage(a.resp.Usage)
			if len(interrupting) > 0 && !cancelling {
				// Interrupt-and-continue: the same turn goes on with the steer text.
				texts := make([]string, len(interrupting))
				for i, s := range interrupting {
					texts[i] = s.text
					s.reply <- steerReply{how: signals.HowInterrupted}
				}
				interrupting = nil
				send([]acp.ContentBlock{acp.TextBlock(strings.Join(texts, "\n\n"))})
				continue
			}
			res.StopReason = string(a.resp.StopReason)
			if cancelling {
				res.StopReason = string(acp.StopReasonCancelled)
			}
			return finish(res, nil)
		case req := <-lt.steers:
			if cancelling {
				req.reply <- steerReply{err: errors.New("the turn is cancelling")}
				continue
			}
			if steeringSupported(proc.caps) && len(interrupting) == 0 {
				how, err := r.inject(ctx, proc, sid, req.text)
				if err == nil {
					req.reply <- steerReply{how: how}
					continue
				}
				log.Warn("_session/steering failed: interrupting instead", "error", err)
			}
			if len(interrupting) == 0 {
				if err := proc.conn.Cancel(context.WithoutCancel(ctx), acp.CancelNotification{SessionId: sid}); err != nil {
					req.reply <- steerReply{err: fmt.Errorf("session/cancel for the steer: %w", err)}
					continue
				}
			}
			interrupting = append(interrupting, req)
		case <-lt.cancel:
			startCancel("delivery")
		case <-ctx.Done():
			if cause := context.Cause(ctx); !isCancelRequest(cause) {
				// The server no longer holds this attempt (heartbeats lost past the timeout
				// while it restarted, a worker shutting down): the next attempt runs the
				// turn, with session/load. This one stops its agent and ends without a stop
				// reason, so the session does not take it for the turn's end.
				log.Warn("turn attempt lost: the next attempt takes the turn over", "cause", cause)
				keep = false
				proc.stop(0)
				res, _ = finish(res, nil)
				return res, temporal.NewApplicationErrorWithCause("turn attempt lost", "attempt_lost", cause, beat)
			}
			startCancel("activity cancellation")
		case <-killAt:
			log.Warn("agent did not stop after session/cancel: killing it", "grace", r.CancelGrace)
			keep = false
			proc.stop(0)
			res.StopReason = string(acp.StopReasonCancelled)
			return finish(res, nil)
		case <-proc.exited:
			keep = false
			if cancelling {
				res.StopReason = string(acp.StopReasonCancelled)
				return finish(res, nil)
			}
			// The answer may be in flight behind the exit; give it a moment.
			select {
			case a := <-answered:
				answered <- a
				continue
			case <-time.After(100 * time.Millisecond):
			}
			return finish(res, fail(fmt.Errorf("%w during the turn", proc.exitErr())))
		}
	}
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

// startedWait bounds how long a turn's end waits for its turn_started to go out.
const startedWait = 5 * time.Second

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

// ErrWorkspaceMissing is the ApplicationError type of a turn failed because the session's
// workspace did not follow it to the worker.
const ErrWorkspaceMissing = "workspace_missing"

// transcript asks the session for its conversation before this turn, for seeding a new
// agent session (a query: no history, asked only when the agent's session was lost).
func (r *Runner) transcript(ctx context.Context, in signals.RunTurnInput) (signals.TranscriptResult, error) {
	var res signals.TranscriptResult
	v, err := r.Client.QueryWorkflow(ctx, in.SessionWorkflowID, "", signals.QueryTranscript, signals.TranscriptRequest{
		BeforeTurn: in.TurnID, MaxBytes: r.CarryContextBytes,
	})
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
		msg = proc.exitErr().Error() + ": " + msg
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

package activities

// A turn attempt's set-up: the attempt (turnRun) and what it was admitted with, preparing
// it (profile, workspace, sandbox, MCP servers, prompt), its batcher, and its live turn.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	acp "github.com/coder/acp-go-sdk"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tacp-dev/tacp/signals"
)

// turnRun is one attempt of a turn while runTurn sets it up and ends it.
type turnRun struct {
	r       *Runner
	in      signals.RunTurnInput
	attempt int32
	// before is what the attempt before this one knew (its heartbeats, or the session's
	// Resume when it ran in another activity).
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

// Package activities is the turn runner: it hosts the agent process, speaks the client side
// of ACP to it (acp-go-sdk over real stdio pipes), streams every session/update back to the
// session workflow as batched turn_events signals, heartbeats, and turns a cancellation of
// the activity into session/cancel.
package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tacp-dev/tacp/signals"
)

// Runner defaults.
const (
	DefaultFlushInterval = 100 * time.Millisecond
	DefaultFlushBytes    = 64 << 10
	DefaultCancelGrace   = 30 * time.Second
	// initializeTimeout bounds the ACP handshake and session setup: an agent that never
	// answers fails the attempt instead of hanging the turn.
	initializeTimeout = 30 * time.Second
	heartbeatEvery    = time.Second
)

// Runner runs turns. Its fields are the worker's configuration.
type Runner struct {
	// Client signals the session workflows.
	Client client.Client
	// Agent is the default agent command line, used when a session names none.
	Agent string
	// DataDir holds per-session workspaces when a session names none.
	DataDir string
	// HostQueue is this worker's own task queue, reported in turn_started.
	HostQueue     string
	FlushInterval time.Duration
	FlushBytes    int
	// CancelGrace bounds the wait for the agent to answer `cancelled` after session/cancel;
	// past it the agent process is killed and the turn ends cancelled all the same.
	CancelGrace time.Duration
	Logger      *slog.Logger
}

func (r *Runner) defaults() {
	if r.FlushInterval <= 0 {
		r.FlushInterval = DefaultFlushInterval
	}
	if r.FlushBytes <= 0 {
		r.FlushBytes = DefaultFlushBytes
	}
	if r.CancelGrace <= 0 {
		r.CancelGrace = DefaultCancelGrace
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
}

// RunTurn runs one attempt of a turn: start the agent, set up its ACP session (loading the
// one kept in workflow state when the agent can), prompt, stream, and answer with the stop
// reason. A cancellation of the activity (delivered with heartbeats) becomes session/cancel.
func (r *Runner) RunTurn(ctx context.Context, in signals.RunTurnInput) (signals.RunTurnResult, error) {
	r.defaults()
	info := activity.GetInfo(ctx)
	attempt := info.Attempt
	log := r.Logger.With("session", in.SessionID, "turn", in.TurnID, "attempt", attempt)
	res := signals.RunTurnResult{Attempt: attempt}

	agentCmd := in.Agent
	if agentCmd == "" {
		agentCmd = r.Agent
	}
	argv, err := SplitCommand(agentCmd)
	if err != nil {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), signals.ErrAgent, nil, res)
	}
	dir, err := r.workspace(in)
	if err != nil {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), signals.ErrAgent, nil, res)
	}

	send := func(ctx context.Context, batch int64, events []json.RawMessage) error {
		return r.signal(ctx, in.SessionWorkflowID, signals.SignalTurnEvents, signals.TurnEventsSignal{
			TurnID: in.TurnID, Attempt: attempt, Batch: batch, Events: events,
		})
	}
	// Signals outlive the activity's context: the last batches go out after a cancel too.
	sendCtx, cancelSend := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelSend()
	b := newBatcher(r.FlushInterval, r.FlushBytes, send)
	go b.run(sendCtx)
	finish := func(res signals.RunTurnResult, err error) (signals.RunTurnResult, error) {
		n, serr := b.close()
		res.Batches = n
		if err == nil && serr != nil {
			err = serr // retryable: the next attempt replays the turn
		}
		return res, err
	}

	proc, err := startAgent(argv, dir, &turnClient{log: log}, log)
	if err != nil {
		return finish(res, temporal.NewNonRetryableApplicationError(err.Error(), signals.ErrAgent, nil, res))
	}
	defer proc.stop(2 * time.Second)

	setupCtx, cancelSetup := context.WithTimeout(ctx, initializeTimeout)
	defer cancelSetup()
	if err := proc.initialize(setupCtx); err != nil {
		return finish(res, r.agentErr(proc, err, res))
	}
	sid, err := r.openSession(setupCtx, proc, in, dir)
	if err != nil {
		return finish(res, r.agentErr(proc, err, res))
	}
	res.AgentSessionID = string(sid)
	proc.setTap(b.add)

	if err := r.signal(ctx, in.SessionWorkflowID, signals.SignalTurnStarted, signals.TurnStartedSignal{
		TurnID: in.TurnID, Attempt: attempt, HostQueue: r.HostQueue, AgentSessionID: res.AgentSessionID,
	}); err != nil {
		return finish(res, err)
	}

	prompt, err := promptBlocks(in.TurnInput)
	if err != nil {
		return finish(res, temporal.NewNonRetryableApplicationError(err.Error(), signals.ErrAgent, nil, res))
	}
	type answer struct {
		resp acp.PromptResponse
		err  error
	}
	answered := make(chan answer, 1)
	// The prompt's context is not the activity's: cancelling it would drop the agent's
	// answer. Cancellation goes to the agent as session/cancel instead.
	go func() {
		resp, err := proc.conn.Prompt(context.WithoutCancel(ctx), acp.PromptRequest{SessionId: sid, Prompt: prompt})
		answered <- answer{resp, err}
	}()

	hb := time.NewTicker(heartbeatEvery)
	defer hb.Stop()
	cancelled := ctx.Done()
	var killAt <-chan time.Time
	for {
		select {
		case a := <-answered:
			if a.err != nil {
				return finish(res, r.agentErr(proc, a.err, res))
			}
			res.StopReason = string(a.resp.StopReason)
			if killAt != nil {
				res.StopReason = string(acp.StopReasonCancelled)
			}
			if a.resp.Usage != nil {
				res.Usage, _ = json.Marshal(a.resp.Usage)
			}
			return finish(res, nil)
		case <-hb.C:
			activity.RecordHeartbeat(ctx, in.TurnID)
		case <-cancelled:
			cancelled = nil
			log.Info("turn cancelled: sending session/cancel")
			if err := proc.conn.Cancel(context.WithoutCancel(ctx), acp.CancelNotification{SessionId: sid}); err != nil {
				log.Warn("session/cancel failed", "error", err)
			}
			killAt = time.After(r.CancelGrace)
		case <-killAt:
			log.Warn("agent did not stop after session/cancel: killing it", "grace", r.CancelGrace)
			proc.stop(0)
			res.StopReason = string(acp.StopReasonCancelled)
			return finish(res, nil)
		case <-proc.exited:
			if killAt != nil {
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
			return finish(res, temporal.NewNonRetryableApplicationError(proc.exitErr().Error()+" during the turn", signals.ErrAgent, nil, res))
		}
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
	return temporal.NewNonRetryableApplicationError("agent: "+msg, signals.ErrAgent, nil, res)
}

// openSession loads the agent session kept in workflow state when the agent can load
// sessions, and starts a new one otherwise. Updates replayed by session/load are history
// the session has journaled already, so the tap is off meanwhile.
func (r *Runner) openSession(ctx context.Context, proc *agentProc, in signals.RunTurnInput, dir string) (acp.SessionId, error) {
	if in.AgentSessionID != "" && proc.caps.AgentCapabilities.LoadSession {
		_, err := proc.conn.LoadSession(ctx, acp.LoadSessionRequest{
			SessionId: acp.SessionId(in.AgentSessionID), Cwd: dir, McpServers: []acp.McpServer{},
		})
		if err == nil {
			return acp.SessionId(in.AgentSessionID), nil
		}
		r.Logger.Warn("session/load failed: starting a new agent session", "session", in.SessionID, "error", err)
	}
	resp, err := proc.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: dir, McpServers: []acp.McpServer{}})
	if err != nil {
		return "", fmt.Errorf("session/new: %w", err)
	}
	return resp.SessionId, nil
}

func (r *Runner) workspace(in signals.RunTurnInput) (string, error) {
	dir := in.Workspace
	if dir == "" {
		dir = filepath.Join(r.DataDir, "workspaces", in.SessionID)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	return dir, nil
}

// signal sends a signal to the session workflow (by workflow id: it reaches the current
// run), retrying transient failures for up to a minute.
func (r *Runner) signal(ctx context.Context, workflowID, name string, arg any) error {
	backoff := 50 * time.Millisecond
	deadline := time.Now().Add(time.Minute)
	for {
		err := r.Client.SignalWorkflow(ctx, workflowID, "", name, arg)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		r.Logger.Warn("signal failed: retrying", "signal", name, "error", err)
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

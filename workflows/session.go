package workflows

// SessionWorkflow is the shell around the session core (workflows/session/core_step.go), in the manner of
// etcd-io/raft's node.go around its RawNode: it registers the handlers of the update table,
// feeds every update, signal, result and alarm into the core's Step with workflow.Now, and
// carries out what the core's Ready says — the command with its data (start a turn, request
// its cancel, deliver a decision, signal a retry, continue as new, close), the search
// attributes, the Current Details, the one alarm timer, the metrics — through wake and
// CarryOut (workflows/session/core_step.go), the one dispatch, which the tests' rig
// (workflows/session/core_test.go) turns too with its own Executor. It holds the core as a field
// and never reads or writes its state. It answers what the core asks of the worker (Ask:
// admission, the MCP policy) and of the runtime (Env: versions, logs). Handlers only
// step the core and never block; the main loop alone issues commands, so that a run can
// continue as new at any workflow-task boundary, a running turn included (contract §6).

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/tacp-dev/tacp/workflows/session"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
)

// shell is one run of SessionWorkflow: the core and what only the workflow runtime holds.
type shell struct {
	core  *session.Core
	adm   Admission
	build session.Build

	receivers []signalReceiver

	// drive is the turn this run drives (turn_session.go), nil before its first.
	drive *liveDrive
	// stepped: the drive of a turn stepped the core (its report, its end) outside the
	// loop, which carries out the Ready that follows (the search attributes, the metrics):
	// a report by signal wakes the loop as a signal.
	stepped bool

	// the alarm timer of this run: its generation, its cancel, and whether it rang
	alarmGen    int
	cancelAlarm workflow.CancelFunc
	alarmRang   bool
}

// SessionWorkflow runs one tacp session with no admission of its own (tests; a worker
// registers NewSessionWorkflow with its Admission). See the package documentation and
// docs/contract.md.
func SessionWorkflow(ctx workflow.Context, in session.RunInput) error {
	return sessionWorkflow(ctx, in, nil, session.Build{})
}

func sessionWorkflow(ctx workflow.Context, in session.RunInput, adm Admission, build session.Build) error {
	cfg, err := session.ResolveConfig(in.SessionConfig)
	if err == nil && len(in.Carried) == 0 {
		if msg := admitAtStart(ctx, adm, in.SessionConfig); msg != "" {
			err = errors.New(msg)
		}
	}
	if err != nil {
		// tacpclient.Client refuses such a config before it starts anything; a client that did
		// not check gets the reason for its first prompt instead of "unknown update".
		rej := signals.Reject(signals.RejectInvalidRequest, "invalid session config: %v", err)
		refuse := func(workflow.Context, json.RawMessage) (struct{}, error) { return struct{}{}, rejection.Error(rej) }
		validate := func(workflow.Context, json.RawMessage) error { return rejection.Error(rej) }
		// The updates a session can be started with (tacpclient.Client's Prompt and Start).
		for _, name := range []string{signals.UpdatePrompt, signals.UpdateAttach, signals.UpdateDetach} {
			_ = workflow.SetUpdateHandlerWithOptions(ctx, name, refuse, workflow.UpdateHandlerOptions{Validator: validate, Description: updateDescriptions[name]})
		}
		return temporal.NewNonRetryableApplicationError(err.Error(), signals.RejectInvalidRequest, nil)
	}
	core, err := session.New(workflow.Now(ctx), cfg, build, runtimeEnv{ctx}, in.Carried)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("decode carried state: "+err.Error(), "carried_state", nil)
	}
	s := &shell{core: core, adm: adm, build: build}
	if err := s.register(ctx); err != nil {
		return err
	}
	return s.loop(ctx)
}

// --- handlers ---

// registerUpdate sets an entry of the update table's handler, which steps the core, and its
// validator, which asks the core and then the worker what the core asks of it. Both take the
// request as its JSON, which the entry decodes: the table erases its entries' types, and a
// request that does not decode is refused as invalid_request, changing nothing. An update
// sent with no payload is the request's zero value, as the SDK's own decoding makes it.
func (s *shell) registerUpdate(ctx workflow.Context, u session.UpdateRule) error {
	name := u.Name()
	decode := func(raw json.RawMessage) (any, error) {
		if len(raw) == 0 {
			raw = json.RawMessage("null")
		}
		req, err := u.Decode(raw)
		if err != nil {
			return nil, rejection.Error(signals.Reject(signals.RejectInvalidRequest, "%s: %v", name, err))
		}
		return req, nil
	}
	handler := func(ctx workflow.Context, raw json.RawMessage) (any, error) {
		req, err := decode(raw)
		if err != nil {
			return nil, err
		}
		res, err := s.core.Step(workflow.Now(ctx), session.UpdateInput{Name: name, Req: req})
		if st, ok := res.(signals.Status); ok && err == nil {
			st.HistoryLength = workflow.GetInfo(ctx).GetCurrentHistoryLength() // attach answers with status
			res = st
		}
		return res, updateError(err)
	}
	var validator any // none for an update with no rule (detach, close)
	if u.Validates() {
		validator = func(_ workflow.Context, raw json.RawMessage) error {
			req, err := decode(raw)
			if err != nil {
				return err
			}
			ask, err := s.core.Validate(name, req)
			if err != nil {
				return updateError(err)
			}
			if msg := s.answer(ask); msg != "" {
				return rejection.Error(signals.Reject(signals.RejectInvalidRequest, "%s", msg))
			}
			return nil
		}
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, name, handler, workflow.UpdateHandlerOptions{Validator: validator, Description: updateDescriptions[name]})
}

// updateError is the error an update's handler or validator returns for the core's err: a
// *signals.Rejection travels as its ApplicationError (signals/rejection), which the client
// reads back as the same rejection; any other error as it is.
func updateError(err error) error {
	var rej *signals.Rejection
	if errors.As(err, &rej) {
		return rejection.Error(rej)
	}
	return err
}

// answer is the worker's answer to what the core asks of it: a refusal's message, "" when
// the worker allows it (admission.go).
func (s *shell) answer(ask session.Ask) string {
	switch {
	case ask.Config != nil:
		return admissionMessage(s.adm, *ask.Config)
	case ask.McpServers != nil:
		return mcpRefusal(s.adm, ask.McpServers)
	}
	return ""
}

func (s *shell) register(ctx workflow.Context) error {
	for _, u := range session.Updates {
		if err := s.registerUpdate(ctx, u); err != nil {
			return err
		}
	}
	if err := workflow.SetQueryHandlerWithOptions(ctx, signals.QueryStatus, func() (signals.Status, error) {
		st := s.core.Status()
		st.HistoryLength = workflow.GetInfo(ctx).GetCurrentHistoryLength()
		st.BuildID = workflow.GetInfo(ctx).GetCurrentBuildID()
		return st, nil
	}, workflow.QueryHandlerOptions{Description: queryDescriptions[signals.QueryStatus]}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandlerWithOptions(ctx, signals.QueryEvents, func(req signals.EventsRequest) (signals.EventsResult, error) {
		return s.core.Events(req), nil
	}, workflow.QueryHandlerOptions{Description: queryDescriptions[signals.QueryEvents]}); err != nil {
		return err
	}
	// The transcript is asked for by a runner that could not load the agent's session, at
	// the moment it needs it: a query costs no history, so the warm path pays nothing.
	if err := workflow.SetQueryHandlerWithOptions(ctx, signals.QueryTranscript, func(req signals.TranscriptRequest) (signals.TranscriptResult, error) {
		return s.core.Transcript(req), nil
	}, workflow.QueryHandlerOptions{Description: queryDescriptions[signals.QueryTranscript]}); err != nil {
		return err
	}
	for _, name := range session.SignalOrder {
		ch := workflow.GetSignalChannelWithOptions(ctx, name, workflow.SignalChannelOptions{Description: signalDescription(name)})
		s.receivers = append(s.receivers, signalReceiver{name: name, ch: ch})
	}
	return nil
}

// signalReceiver is one signal channel. Signals are handled by the main loop, not by
// coroutines of their own: a signal a coroutine has been handed but not yet run would be
// lost by a continue-as-new in the same workflow task.
type signalReceiver struct {
	name string
	ch   workflow.ReceiveChannel
}

// signalIn feeds one signal to the core. A twin that asks the worker (set_mcp_servers) and
// passes the core's rule has the worker's answer recorded in a SideEffect first (a signal has
// no validator), so that a replay on a worker with another policy takes the same path.
func (s *shell) signalIn(ctx workflow.Context, name string, raw json.RawMessage) {
	in := session.SignalInput{Name: name, Raw: raw}
	if u, ok := session.UpdateByName[name]; ok && u.AsksInTwin() {
		if req, err := u.Decode(raw); err == nil {
			if ask, err := s.core.Validate(name, req); err == nil {
				_ = workflow.SideEffect(ctx, func(workflow.Context) any { return s.answer(ask) }).Get(&in.Refused)
			}
		}
	}
	_, _ = s.core.Step(workflow.Now(ctx), in)
}

// runtimeEnv answers the core's Env from the workflow runtime.
type runtimeEnv struct{ ctx workflow.Context }

func (e runtimeEnv) Warn(msg string, keyvals ...any) {
	workflow.GetLogger(e.ctx).Warn(msg, keyvals...)
}

// --- the main loop ---

// signalsPending reports whether a signal waits in a channel.
func (s *shell) signalsPending() bool {
	for _, r := range s.receivers {
		if r.ch.Len() > 0 {
			return true
		}
	}
	return false
}

// drainSignals feeds every signal received so far, channel by channel.
func (s *shell) drainSignals(ctx workflow.Context) {
	for _, r := range s.receivers {
		for {
			var raw json.RawMessage
			if !r.ch.ReceiveAsync(&raw) {
				break
			}
			s.signalIn(ctx, r.name, raw)
		}
	}
}

// runInfo reads what the core needs of the run's history.
func (s *shell) runInfo(ctx workflow.Context) session.RunInfo {
	info := workflow.GetInfo(ctx)
	return session.RunInfo{
		Suggested:     info.GetContinueAsNewSuggested(),
		HistoryLength: info.GetCurrentHistoryLength(),
		TargetChanged: info.GetTargetWorkerDeploymentVersionChanged(),
	}
}

// loop feeds the core and carries out its Ready (session.Wake). It wakes for a
// signal, the alarm, or whatever the core has ready (a command, an alarm that moved).
//
// An operator's cancellation of the workflow is caught here, like a close (contract §6,
// docs/operators.md "Cancel, terminate, reset"): the core closes the session, and the loop
// carries on in a disconnected context until the close is done — the turn's cancel, the
// agent's stop and session.closed need commands the cancelled context would refuse. The
// run then completes, as a closed session's does, so that the session stays closed.
func (s *shell) loop(ctx workflow.Context) error {
	x := runtimeExec{ctx: ctx, s: s}
	s.drainSignals(ctx)
	if _, err := session.CarryOut(x, s.core.Ready(workflow.Now(ctx), s.runInfo(ctx))); err != nil {
		return err // the run's first Ready holds no command
	}
	cancelled := false
	for {
		err := workflow.Await(ctx, func() bool {
			return s.signalsPending() || s.alarmRang || s.stepped || s.core.HasReady(s.runInfo(ctx))
		})
		if err != nil && !cancelled && temporal.IsCanceledError(err) {
			cancelled = true
			ctx, _ = workflow.NewDisconnectedContext(ctx)
			x.ctx = ctx
			_, _ = s.core.Step(workflow.Now(ctx), session.OperatorCancelled{})
			continue
		}
		if err != nil {
			return err
		}
		s.stepped = false
		s.drainSignals(ctx)
		rang := s.alarmRang
		s.alarmRang = false
		if end, err := session.Wake(s.core, x, workflow.Now(ctx), s.runInfo(ctx), rang); end || err != nil {
			return err
		}
	}
}

// runtimeExec carries out the core's commands in the workflow runtime.
type runtimeExec struct {
	ctx workflow.Context
	s   *shell
}

// Close stops the agent, deletes what a deleting Close asked for, and ends the run once
// every handler has finished, in a context an operator's cancellation arriving meanwhile
// does not reach: the Close goes to its end either way.
func (x runtimeExec) Close(c session.Close) (bool, error) {
	ctx, _ := workflow.NewDisconnectedContext(x.ctx)
	x.s.stopAgent(ctx, c)
	x.s.deleteData(ctx, c)
	return true, workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

func (x runtimeExec) ContinueAsNew(c session.ContinueAsNew) (bool, error) {
	ctx := x.ctx
	if !workflow.AllHandlersFinished(ctx) || x.s.signalsPending() {
		// A handler still runs (or a signal came): wait for it, then ask again, so that the
		// carried state holds what it did.
		if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
			if temporal.IsCanceledError(err) {
				return false, nil // an operator's cancellation: the loop catches it
			}
			return true, err
		}
		x.s.drainSignals(ctx)
		return false, nil
	}
	opts := workflow.ContinueAsNewErrorOptions{}
	if c.AutoUpgrade {
		opts.InitialVersioningBehavior = workflow.ContinueAsNewVersioningBehaviorAutoUpgrade
	}
	return true, workflow.NewContinueAsNewErrorWithOptions(ctx, opts, SessionWorkflow, c.Input)
}

// RequestCancel cancels this run's drive of the turn: its RunTurn is asked to cancel, and
// the drive reports the turn cancelled.
func (x runtimeExec) RequestCancel(c session.RequestCancel) {
	x.s.cancelDrive(c.TurnID)
	_, _ = x.s.core.Step(workflow.Now(x.ctx), session.RequestDone{})
}

// RetryNow ends the limit's wait of this run's drive of the turn.
func (x runtimeExec) RetryNow(c session.RetryNow) {
	x.s.retryDrive(c.TurnID)
	_, _ = x.s.core.Step(workflow.Now(x.ctx), session.RequestDone{})
}

func (x runtimeExec) ResumeTurn(c session.ResumeTurn) { x.s.resumeDrive(x.ctx, c) }

func (x runtimeExec) Deliver(c session.Deliver)              { x.s.deliver(x.ctx, c) }
func (x runtimeExec) StartTurn(c session.StartTurn)          { x.s.startTurn(x.ctx, c) }
func (x runtimeExec) Show(sa *session.SearchAttrs, d string) { x.s.show(x.ctx, sa, d) }
func (x runtimeExec) Arm(a *session.Alarm)                   { x.s.arm(x.ctx, a) }
func (x runtimeExec) Record(ms []session.Metric)             { x.s.record(x.ctx, ms) }

// startTurn starts this run's drive of the turn (turn_session.go), which feeds the core its
// start and its end.
func (s *shell) startTurn(ctx workflow.Context, c session.StartTurn) {
	if s.build.TurnMarkerForTest {
		_ = workflow.SideEffect(ctx, func(workflow.Context) any { return true }).Get(nil)
	}
	s.startDrive(ctx, c)
}

// deliver runs one delivery as a Deliver activity on the task queue of the worker hosting
// the turn, and feeds its result back. A host that is gone shows as a schedule-to-start
// timeout.
func (s *shell) deliver(ctx workflow.Context, c session.Deliver) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              c.HostQueue,
		ScheduleToStartTimeout: session.DeliverScheduleToStart,
		StartToCloseTimeout:    session.DeliverStartToClose,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:                c.Summary,
	})
	f := workflow.ExecuteActivity(actx, signals.ActivityDeliver, c.Delivery)
	workflow.Go(ctx, func(ctx workflow.Context) {
		var res signals.DeliveryResult
		err := f.Get(ctx, &res)
		var timeout *temporal.TimeoutError
		hostGone := errors.As(err, &timeout) && timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
		_, _ = s.core.Step(workflow.Now(ctx), session.DeliveryAnswered{Delivery: c.Delivery, Result: res, Err: err, HostGone: hostGone})
	})
}

// stopAgent ends a closed session's agent on the worker that holds it (its agent session
// closed with session/close where the agent offers it, its process stopped), instead of
// leaving it to the idle TTL. Best effort and bounded: a host that is gone took its agents
// with it (the reaper).
func (s *shell) stopAgent(ctx workflow.Context, c session.Close) {
	if c.AgentHost == "" {
		return
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              c.AgentHost,
		ScheduleToStartTimeout: releaseTimeout,
		StartToCloseTimeout:    releaseTimeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:                "end the closed session's agent on the worker that holds it",
	})
	err := workflow.ExecuteActivity(actx, signals.ActivityReleaseAgent, signals.ReleaseAgentRequest{SessionID: c.SessionID, Closed: true}).Get(actx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Info("the closed session's agent was not stopped by its host (gone, or slow): its idle TTL will", "host", c.AgentHost, "error", err)
	}
}

// deleteData removes a deleting close's data on the worker that holds the session's agent
// (DeleteSessionData, after stopAgent stopped the agent) and journals what it did
// (session.deleted): nothing held, what went, or why it could not (a host that is gone).
func (s *shell) deleteData(ctx workflow.Context, c session.Close) {
	if c.Delete == nil {
		return
	}
	done := session.SessionDataDeleted{Host: c.AgentHost}
	if c.AgentHost != "" {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue:              c.AgentHost,
			ScheduleToStartTimeout: releaseTimeout,
			StartToCloseTimeout:    time.Minute,
			RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
			Summary:                "remove the deleted session's data on the worker that holds it",
		})
		if err := workflow.ExecuteActivity(actx, signals.ActivityDeleteSessionData, *c.Delete).Get(actx, &done.Result); err != nil {
			done.Err = err.Error()
		}
	}
	_, _ = s.core.Step(workflow.Now(ctx), done)
}

// show sets the Current Details (the Temporal UI's, not history) and upserts the search
// attributes when they changed.
func (s *shell) show(ctx workflow.Context, sa *session.SearchAttrs, details string) {
	workflow.SetCurrentDetails(ctx, details)
	if sa == nil {
		return
	}
	attrs := []temporal.SearchAttributeUpdate{
		temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrSessionState).ValueSet(sa.State),
		temporal.NewSearchAttributeKeyInt64(signals.SearchAttrTurn).ValueSet(sa.Turn),
		temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrAgent).ValueSet(sa.Agent),
		temporal.NewSearchAttributeKeyBool(signals.SearchAttrAwaitingApproval).ValueSet(sa.Awaiting),
	}
	if sa.LastActivity != nil {
		attrs = append(attrs, temporal.NewSearchAttributeKeyTime(signals.SearchAttrLastActivity).ValueSet(*sa.LastActivity))
	}
	if sa.LastOutcome != "" {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrLastOutcome).ValueSet(sa.LastOutcome))
	}
	// TacpWaitingUntil is newer than the others, and a namespace that lacks it fails the
	// workflow task that names it: only a session that waited for a limit upserts it.
	waiting := temporal.NewSearchAttributeKeyTime(signals.SearchAttrWaitingUntil)
	switch {
	case sa.WaitingUntil != nil:
		attrs = append(attrs, waiting.ValueSet(*sa.WaitingUntil))
	case sa.UnsetWaitingUntil:
		attrs = append(attrs, waiting.ValueUnset())
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, attrs...); err != nil {
		workflow.GetLogger(ctx).Warn("upsert search attributes", "error", err)
	}
}

// arm keeps one timer running for the alarm Ready names (nil: the armed timer stands).
func (s *shell) arm(ctx workflow.Context, a *session.Alarm) {
	if a == nil {
		return
	}
	if s.cancelAlarm != nil {
		s.cancelAlarm()
	}
	s.alarmGen++
	gen := s.alarmGen
	tctx, cancel := workflow.WithCancel(ctx)
	s.cancelAlarm = cancel
	d := max(a.At.Sub(workflow.Now(ctx)), time.Millisecond)
	timer := workflow.NewTimerWithOptions(tctx, d, workflow.TimerOptions{Summary: a.Summary})
	workflow.Go(ctx, func(ctx workflow.Context) {
		if timer.Get(ctx, nil) == nil && gen == s.alarmGen {
			s.alarmRang = true
		}
	})
}

// record records the metrics through the SDK's workflow metrics handler, which drops every
// record while a workflow task replays (workflows/session/metrics.go).
func (s *shell) record(ctx workflow.Context, ms []session.Metric) {
	for _, m := range ms {
		h := workflow.GetMetricsHandler(ctx)
		if m.Tags != nil {
			h = h.WithTags(m.Tags)
		}
		if m.Timer {
			h.Timer(m.Name).Record(m.Duration)
		} else {
			h.Counter(m.Name).Inc(1)
		}
	}
}

// IsContinueAsNew reports whether err is the continue-as-new a run ends with.
func IsContinueAsNew(err error) bool {
	var can *workflow.ContinueAsNewError
	return errors.As(err, &can)
}

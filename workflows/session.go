package workflows

// SessionWorkflow is the shell around the session core (core.go), in the manner of
// etcd-io/raft's node.go around raft.go: it registers the handlers, feeds every update,
// signal and alarm into the core with workflow.Now, carries out what the core's next says
// (start a turn, request its cancel, deliver a decision, continue as new, close), keeps the
// one alarm timer (belts.go), and answers the core's sessionEnv (versions, metrics, logs).
// Handlers only change state and never block; the main loop alone issues commands, so that a
// run can continue as new at any workflow-task boundary, a running turn included (contract §6).

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
)

// session is one run of SessionWorkflow: the core and what only the workflow runtime holds.
type session struct {
	*sessionCore

	receivers []signalReceiver
	lastSA    string
	saVersion *workflow.Version

	// the alarm timer of this run (belts.go)
	alarmGen    int
	cancelAlarm workflow.CancelFunc

	// waitedUntil: this run set TacpWaitingUntil (a limit's wait), to unset when it ends.
	waitedUntil bool
}

// SessionWorkflow runs one tacp session with no admission of its own (tests; a worker
// registers NewSessionWorkflow with its Admission). See the package documentation and
// docs/contract.md.
func SessionWorkflow(ctx workflow.Context, in sessionInput) error {
	return sessionWorkflow(ctx, in, nil, Build{})
}

// sessionInput is SessionWorkflow's argument: a client's signals.SessionConfig, and, in a
// run started by continue-as-new, the state the previous run carried. The config is
// embedded, so the JSON is the config's own plus "carried": a client's {"session_id": "s1"}
// decodes, and so do the inputs recorded before Carried left signals.SessionConfig.
type sessionInput struct {
	signals.SessionConfig
	// Carried is the sessionState a run hands to the next; clients never set it.
	Carried json.RawMessage `json:"carried,omitempty"`
}

func sessionWorkflow(ctx workflow.Context, in sessionInput, adm Admission, build Build) error {
	cfg, err := ResolveConfig(in.SessionConfig)
	if err == nil && len(in.Carried) == 0 {
		if msg := admitAtStart(ctx, adm, in.SessionConfig); msg != "" {
			err = errors.New(msg)
		}
	}
	if err != nil {
		// signals.Client refuses such a config before it starts anything; a client that did
		// not check gets the reason for its first prompt instead of "unknown update".
		rej := signals.Reject(signals.RejectInvalidRequest, "invalid session config: %v", err)
		refuse := func(workflow.Context, json.RawMessage) (struct{}, error) { return struct{}{}, rej.ApplicationError() }
		validate := func(workflow.Context, json.RawMessage) error { return rej.ApplicationError() }
		// The updates a session can be started with (signals.Client's Prompt and Start).
		for _, name := range []string{signals.UpdatePrompt, signals.UpdateAttach, signals.UpdateDetach} {
			_ = workflow.SetUpdateHandlerWithOptions(ctx, name, refuse, workflow.UpdateHandlerOptions{Validator: validate})
		}
		return temporal.NewNonRetryableApplicationError(err.Error(), signals.RejectInvalidRequest, nil)
	}
	core, err := newSessionCore(workflow.Now(ctx), cfg, adm, runtimeEnv{ctx}, in.Carried)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("decode carried state: "+err.Error(), "carried_state", nil)
	}
	core.build = build
	s := &session{sessionCore: core}
	if err := s.register(ctx); err != nil {
		return err
	}
	return s.loop(ctx)
}

func (s *session) register(ctx workflow.Context) error {
	type reg struct {
		name      string
		handler   any
		validator any
	}
	for _, r := range []reg{
		{signals.UpdatePrompt, handler(s.prompt), validator(s.validatePrompt)},
		{signals.UpdateSteer, handler(s.steer), validator(s.validateSteer)},
		{signals.UpdateCancel, handler(s.cancel), validator(s.validateCancel)},
		{signals.UpdatePermissionRespond, handler(s.respond), validator(s.validateRespond)},
		{signals.UpdatePermissionForget, handler(s.forget), validator(s.validateForget)},
		{signals.UpdateSetPolicy, handler(s.setPolicy), validator(s.validateSetPolicy)},
		{signals.UpdateAttach, s.attachUpdate, validator(s.validateAttach)},
		{signals.UpdateDetach, handler(s.detach), nil},
		{signals.UpdateClose, handler(s.close), nil},
		{signals.UpdateSetMode, handler(s.setMode), validator(s.validateSetMode)},
		{signals.UpdateSetConfigOption, handler(s.setConfig), validator(s.validateSetConfig)},
		{signals.UpdateSetMcpServers, handler(s.setMcpServers), validator(s.validateSetMcpServers)},
		{signals.UpdateRetryNow, handler(s.retryNow), validator(s.validateRetryNow)},
		{signals.UpdateElicitationRespond, handler(s.elicitationRespond), validator(s.validateElicitationRespond)},
	} {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, r.name, r.handler, workflow.UpdateHandlerOptions{Validator: r.validator}); err != nil {
			return err
		}
	}
	if err := workflow.SetQueryHandler(ctx, signals.QueryStatus, func() (signals.Status, error) {
		return s.statusQuery(ctx), nil
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, signals.QueryEvents, func(req signals.EventsRequest) (signals.EventsResult, error) {
		return s.Journal.Since(req.AfterSeq, req.Limit), nil
	}); err != nil {
		return err
	}
	// The transcript is asked for by a runner that could not load the agent's session, at
	// the moment it needs it: a query costs no history, so the warm path pays nothing.
	if err := workflow.SetQueryHandler(ctx, signals.QueryTranscript, func(req signals.TranscriptRequest) (signals.TranscriptResult, error) {
		return BuildTranscript(s.Journal.Events, req.BeforeTurn, req.MaxBytes), nil
	}); err != nil {
		return err
	}
	for _, name := range signalOrder {
		s.receivers = append(s.receivers, signalReceiver{name: name, handle: func(ctx workflow.Context, raw json.RawMessage) {
			s.signal(workflow.Now(ctx), name, raw)
		}})
	}
	s.receivers = append(s.receivers, s.mcpSignal())
	for i := range s.receivers {
		s.receivers[i].ch = workflow.GetSignalChannel(ctx, s.receivers[i].name)
	}
	return nil
}

// handler adapts a core update handler to the SDK's: the core takes workflow.Now.
func handler[Req, Res any](f func(time.Time, Req) (Res, error)) func(workflow.Context, Req) (Res, error) {
	return func(ctx workflow.Context, req Req) (Res, error) { return f(workflow.Now(ctx), req) }
}

// validator adapts a core validator to the SDK's.
func validator[Req any](f func(Req) error) func(workflow.Context, Req) error {
	return func(_ workflow.Context, req Req) error { return f(req) }
}

// attachUpdate answers attach with the status query's snapshot.
func (s *session) attachUpdate(ctx workflow.Context, req signals.AttachRequest) (signals.Status, error) {
	st, err := s.attach(workflow.Now(ctx), req)
	if err == nil {
		st.HistoryLength = workflow.GetInfo(ctx).GetCurrentHistoryLength()
	}
	return st, err
}

// statusQuery is the core's status and the run's history length.
func (s *session) statusQuery(ctx workflow.Context) signals.Status {
	st := s.status()
	st.HistoryLength = workflow.GetInfo(ctx).GetCurrentHistoryLength()
	st.BuildID = workflow.GetInfo(ctx).GetCurrentBuildID()
	return st
}

// signalReceiver is one signal channel and its handler. Signals are handled by the main
// loop, not by coroutines of their own: a signal a coroutine has been handed but not yet run
// would be lost by a continue-as-new in the same workflow task.
type signalReceiver struct {
	name   string
	handle func(workflow.Context, json.RawMessage)
	ch     workflow.ReceiveChannel
}

// runtimeEnv answers the core's sessionEnv from the workflow runtime. Metrics go through
// the SDK's workflow metrics handler, which drops every record while a workflow task
// replays (metrics.go).
type runtimeEnv struct{ ctx workflow.Context }

func (e runtimeEnv) version(change string, max version) version {
	return version(workflow.GetVersion(e.ctx, change, workflow.DefaultVersion, workflow.Version(max)))
}

func (e runtimeEnv) turnStarted() {
	workflow.GetMetricsHandler(e.ctx).Counter(MetricTurnsStarted).Inc(1)
}

func (e runtimeEnv) turnFinished(outcome string) {
	workflow.GetMetricsHandler(e.ctx).WithTags(map[string]string{"outcome": outcome}).Counter(MetricTurnsFinished).Inc(1)
}

func (e runtimeEnv) steered(outcome string) {
	workflow.GetMetricsHandler(e.ctx).WithTags(map[string]string{"outcome": outcome}).Counter(MetricSteers).Inc(1)
}

func (e runtimeEnv) permissionWaited(decidedBy string, waited time.Duration) {
	workflow.GetMetricsHandler(e.ctx).WithTags(map[string]string{"decided_by": decidedBy}).Timer(MetricPermissionWaits).Record(waited)
}

func (e runtimeEnv) warn(msg string, keyvals ...any) {
	workflow.GetLogger(e.ctx).Warn(msg, keyvals...)
}

// --- the main loop ---

// signalsPending reports whether a signal waits in a channel.
func (s *session) signalsPending() bool {
	for _, r := range s.receivers {
		if r.ch.Len() > 0 {
			return true
		}
	}
	return false
}

// drainSignals handles every signal received so far, channel by channel.
func (s *session) drainSignals(ctx workflow.Context) {
	for _, r := range s.receivers {
		for {
			var raw json.RawMessage
			if !r.ch.ReceiveAsync(&raw) {
				break
			}
			r.handle(ctx, raw)
		}
	}
}

// runInfo reads what the core needs of the run's history.
func (s *session) runInfo(ctx workflow.Context) runInfo {
	info := workflow.GetInfo(ctx)
	return runInfo{
		suggested:     info.GetContinueAsNewSuggested(),
		historyLength: info.GetCurrentHistoryLength(),
		targetChanged: info.GetTargetWorkerDeploymentVersionChanged(),
	}
}

// loop feeds the core and carries out what its next says. It wakes for a signal, the alarm,
// an alarm that moved, or a command; the core alone says which command.
func (s *session) loop(ctx workflow.Context) error {
	for {
		s.drainSignals(ctx)
		s.upsertSearchAttributes(ctx)
		s.armAlarm(ctx)
		err := workflow.Await(ctx, func() bool {
			return s.signalsPending() || s.alarmFired || s.alarmNeedsArming() || s.next(s.runInfo(ctx)) != cmdNone
		})
		if err != nil {
			return err
		}
		s.drainSignals(ctx)
		if s.alarmFired {
			s.fireAlarms(workflow.Now(ctx))
		}
		switch s.next(s.runInfo(ctx)) {
		case cmdClose:
			s.closeSession(workflow.Now(ctx))
			s.upsertSearchAttributes(ctx)
			s.stopAgent(ctx)
			return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
		case cmdContinueAsNew:
			return s.continueAsNew(ctx)
		case cmdRequestCancel:
			turnID := s.requestCancel()
			s.track(ctx, workflow.RequestCancelExternalWorkflow(ctx, signals.TurnWorkflowID(s.cfg.SessionID, turnID), ""), nil)
		case cmdDeliver:
			s.deliverNext(ctx)
		case cmdStartTurn:
			s.startTurn(ctx)
		case cmdRetryNow:
			turnID := s.sendRetryNow()
			s.track(ctx, workflow.SignalExternalWorkflow(ctx, signals.TurnWorkflowID(s.cfg.SessionID, turnID), "", signals.SignalTurnRetryNow, nil), nil)
		}
	}
}

// track counts a command's future as pending until it resolves, so that continue-as-new and
// close wait for it; done, if set, runs with its error.
func (s *session) track(ctx workflow.Context, f workflow.Future, done func(error)) {
	s.pending++
	workflow.Go(ctx, func(ctx workflow.Context) {
		err := f.Get(ctx, nil)
		s.pending--
		if done != nil {
			done(err)
		}
	})
}

// startTurn starts the next queued prompt's TurnWorkflow and feeds the core what becomes of
// it: in this run the child's end is visible too.
func (s *session) startTurn(ctx workflow.Context) {
	if s.build.TurnMarkerForTest {
		_ = workflow.SideEffect(ctx, func(workflow.Context) any { return true }).Get(nil)
	}
	in := s.beginTurn(workflow.Now(ctx))
	turnID := in.TurnID
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            signals.TurnWorkflowID(s.cfg.SessionID, turnID),
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		StaticSummary:         fmt.Sprintf("turn %d of session %s", turnID, s.cfg.SessionID),
	})
	child := workflow.ExecuteChildWorkflow(cctx, signals.TurnWorkflowType, in)
	s.track(ctx, child.GetChildWorkflowExecution(), func(err error) {
		if err != nil {
			s.turnStartFailed(workflow.Now(ctx), turnID, err.Error())
			return
		}
		if !s.turnWorkflowStarted(turnID) {
			return
		}
		workflow.Go(ctx, func(ctx workflow.Context) {
			err := child.Get(ctx, nil)
			if err == nil || temporal.IsCanceledError(err) {
				s.turnWorkflowEnded(workflow.Now(ctx), turnID)
				return
			}
			s.turnWorkflowFailed(workflow.Now(ctx), turnID, err.Error())
		})
	})
}

// closeStopsAgentChange guards the ReleaseAgent a closing session sends the host that
// holds its agent, for runs that closed without it.
const closeStopsAgentChange = "close-stops-agent"

// stopAgent ends a closed session's agent on the worker that holds it (its agent session
// closed with session/close where the agent offers it, its process stopped), instead of
// leaving it to the idle TTL. Best effort and bounded: a host that is gone took its agents
// with it (the reaper).
func (s *session) stopAgent(ctx workflow.Context) {
	if s.AgentHost == "" || workflow.GetVersion(ctx, closeStopsAgentChange, workflow.DefaultVersion, 1) < 1 {
		return
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              s.AgentHost,
		ScheduleToStartTimeout: releaseTimeout,
		StartToCloseTimeout:    releaseTimeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:                "end the closed session's agent on the worker that holds it",
	})
	err := workflow.ExecuteActivity(actx, signals.ActivityReleaseAgent, signals.ReleaseAgentRequest{SessionID: s.cfg.SessionID, Closed: true}).Get(actx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Info("the closed session's agent was not stopped by its host (gone, or slow): its idle TTL will", "host", s.AgentHost, "error", err)
	}
}

func (s *session) upsertSearchAttributes(ctx workflow.Context) {
	state, turn, awaiting := s.searchAttributes()
	// What the session is doing and waiting for, for the Temporal UI's Current Details (not
	// history: the SDK answers it from the workflow's state).
	workflow.SetCurrentDetails(ctx, s.currentDetails(state, turn))
	outcome := ""
	v := s.searchAttrsVersion(ctx)
	if v > workflow.DefaultVersion {
		outcome = s.LastOutcome
	}
	waiting := s.waitingUntil()
	key := fmt.Sprintf("%s/%d/%t/%s", state, turn, awaiting, outcome)
	if waiting != nil || s.waitedUntil {
		key += "/" + fmt.Sprint(waiting) // only a session that waited for a limit upserts TacpWaitingUntil
	}
	if key == s.lastSA {
		return
	}
	s.lastSA = key
	attrs := []temporal.SearchAttributeUpdate{
		temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrSessionState).ValueSet(state),
		temporal.NewSearchAttributeKeyInt64(signals.SearchAttrTurn).ValueSet(turn),
		temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrAgent).ValueSet(agentName(s.cfg.Agent)),
		temporal.NewSearchAttributeKeyBool(signals.SearchAttrAwaitingApproval).ValueSet(awaiting),
	}
	if v > workflow.DefaultVersion {
		attrs = append(attrs, temporal.NewSearchAttributeKeyTime(signals.SearchAttrLastActivity).ValueSet(workflow.Now(ctx)))
	}
	if outcome != "" {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrLastOutcome).ValueSet(outcome))
	}
	attrs = append(attrs, s.waitingAttr(waiting)...)
	if err := workflow.UpsertTypedSearchAttributes(ctx, attrs...); err != nil {
		workflow.GetLogger(ctx).Warn("upsert search attributes", "error", err)
	}
}

// searchAttrsChange guards the TacpLastOutcome and TacpLastActivity search attributes for
// runs that upserted without them.
const searchAttrsChange = "search-attributes-v2"

// searchAttrsVersion is asked once per run, at its first upsert.
func (s *session) searchAttrsVersion(ctx workflow.Context) workflow.Version {
	if s.saVersion == nil {
		v := workflow.GetVersion(ctx, searchAttrsChange, workflow.DefaultVersion, 1)
		s.saVersion = &v
	}
	return *s.saVersion
}

// --- continue-as-new ---

func (s *session) continueAsNew(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	s.drainSignals(ctx)
	// Moving to the new target version is decided last, on the state the next run takes:
	// a signal drained above may have made the session busy again, and then it stays pinned.
	info := s.runInfo(ctx)
	upgrade := s.upgradeDue(info)
	s.UpgradeWanted = !upgrade && (s.UpgradeWanted || info.targetChanged)
	if upgrade {
		// The new run starts on the target version; it may find the agent's host gone with
		// the old build, so its first turn goes to the session queue (affinity resumes there).
		s.AgentHost = ""
	}
	carried, err := json.Marshal(s.sessionState)
	if err != nil {
		return fmt.Errorf("encode carried state: %w", err)
	}
	next := sessionInput{SessionConfig: s.cfg.SessionConfig, Carried: carried}
	opts := workflow.ContinueAsNewErrorOptions{}
	if upgrade {
		opts.InitialVersioningBehavior = workflow.ContinueAsNewVersioningBehaviorAutoUpgrade
	}
	return workflow.NewContinueAsNewErrorWithOptions(ctx, opts, SessionWorkflow, next)
}

// IsContinueAsNew reports whether err is the continue-as-new a run ends with.
func IsContinueAsNew(err error) bool {
	var can *workflow.ContinueAsNewError
	return errors.As(err, &can)
}

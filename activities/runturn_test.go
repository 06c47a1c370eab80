package activities

// Tests of RunTurn with the real testagent binary under the SDK's activity test
// environment. The session workflow is played by signalRecorder, a client.Client that only
// records the signals the runner sends.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/tacp-dev/tacp/signals"
)

// signalRecorder is the session workflow as the runner sees it: it records every signal.
// The embedded interface is nil: the runner calls SignalWorkflow only.
type signalRecorder struct {
	client.Client

	mu   sync.Mutex
	sigs []recordedSignal
	// results are the results of the attempts that succeeded, the turns' reports, in order.
	results []turnResult
	// onPermission, when set, answers a permission request as the workflow would (it runs
	// on the runner's goroutine, after the request is recorded).
	onPermission func(signals.PermissionRequestedSignal)
	// transcript, when set, answers the transcript query (unset: the query fails).
	transcript func(signals.TranscriptRequest) (signals.TranscriptResult, error)
	queries    []signals.TranscriptRequest
	// status, when set, answers the status query.
	status func() signals.Status
	// before, when set, runs before a signal is recorded (it may hold it, as a slow server
	// would).
	before func(name string)
	// ended, when set, is the status of the session's latest run (unset: running).
	ended enumspb.WorkflowExecutionStatus
}

// DescribeWorkflowExecution answers with the status of the session's latest run.
func (c *signalRecorder) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	if c.ended != enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED {
		st = c.ended
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: st}}, nil
}

type recordedSignal struct {
	name string
	arg  any
}

func (c *signalRecorder) SignalWorkflow(_ context.Context, _, _, name string, arg any) error {
	c.mu.Lock()
	before := c.before
	c.mu.Unlock()
	if before != nil {
		before(name)
	}
	c.mu.Lock()
	c.sigs = append(c.sigs, recordedSignal{name, arg})
	answer := c.onPermission
	c.mu.Unlock()
	if p, ok := arg.(signals.PermissionRequestedSignal); ok && answer != nil {
		go answer(p)
	}
	return nil
}

// QueryWorkflow answers the queries the runner asks: transcript, and status.
func (c *signalRecorder) QueryWorkflow(_ context.Context, _, _, name string, args ...any) (converter.EncodedValue, error) {
	if name == signals.QueryStatus {
		c.mu.Lock()
		answer := c.status
		c.mu.Unlock()
		if answer == nil {
			return nil, errors.New("no status query handler")
		}
		return statusValue(answer()), nil
	}
	if name != signals.QueryTranscript || len(args) != 1 {
		return nil, fmt.Errorf("unexpected query %q", name)
	}
	req := args[0].(signals.TranscriptRequest)
	c.mu.Lock()
	c.queries = append(c.queries, req)
	answer := c.transcript
	c.mu.Unlock()
	if answer == nil {
		return nil, errors.New("no transcript query handler")
	}
	res, err := answer(req)
	if err != nil {
		return nil, err
	}
	return transcriptValue(res), nil
}

// transcriptValue is a transcript query's answer as the client hands it over.
type transcriptValue signals.TranscriptResult

func (v transcriptValue) HasValue() bool { return true }

func (v transcriptValue) Get(ptr any) error {
	*ptr.(*signals.TranscriptResult) = signals.TranscriptResult(v)
	return nil
}

// statusValue is a status query's answer as the client hands it over.
type statusValue signals.Status

func (v statusValue) HasValue() bool { return true }

func (v statusValue) Get(ptr any) error {
	*ptr.(*signals.Status) = signals.Status(v)
	return nil
}

func (c *signalRecorder) all() []recordedSignal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]recordedSignal(nil), c.sigs...)
}

// result records the result of an attempt that succeeded: the turn's report, which carries
// its last batch and, when no batch took it, its turn_started.
func (c *signalRecorder) result(turn int64, res signals.RunTurnResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.results = append(c.results, turnResult{turn, res})
}

// events returns the session/update params of turn (0: between turns) the session would
// journal, in batch order: those of its turn_events batches and the last batch its result
// carries.
func (c *signalRecorder) events(turn int64) []json.RawMessage {
	var batches []signals.TurnEventsSignal
	for _, s := range c.all() {
		if ev, ok := s.arg.(signals.TurnEventsSignal); ok && ev.TurnID == turn {
			batches = append(batches, ev)
		}
	}
	c.mu.Lock()
	for _, r := range c.results {
		if r.turn == turn && len(r.res.Events) > 0 {
			batches = append(batches, signals.TurnEventsSignal{TurnID: turn, Attempt: r.res.Attempt, Batch: r.res.Batches, Events: r.res.Events})
		}
	}
	c.mu.Unlock()
	sort.SliceStable(batches, func(i, j int) bool { return batches[i].Batch < batches[j].Batch })
	var out []json.RawMessage
	for _, b := range batches {
		out = append(out, b.Events...)
	}
	return out
}

// turnResult is an attempt's result and its turn.
type turnResult struct {
	turn int64
	res  signals.RunTurnResult
}

func (c *signalRecorder) permissions() []signals.PermissionRequestedSignal {
	var out []signals.PermissionRequestedSignal
	for _, s := range c.all() {
		if p, ok := s.arg.(signals.PermissionRequestedSignal); ok {
			out = append(out, p)
		}
	}
	return out
}

// kindsOf returns the sessionUpdate kind of each update.
func kindsOf(t *testing.T, events []json.RawMessage) []string {
	t.Helper()
	var out []string
	for _, u := range decodeUpdates(t, events) {
		out = append(out, u.Update.Kind)
	}
	return out
}

// turnRig is a runner on a host of its own, signalling a recorder.
type turnRig struct {
	t           *testing.T
	rec         *signalRecorder
	host        *Host
	runner      *Runner
	transcripts string
	// beats are the progress the attempts recorded with their heartbeats, in order.
	beatsMu sync.Mutex
	beats   []signals.TurnProgress
}

func newTurnRig(t *testing.T, transcripts string) *turnRig {
	t.Helper()
	logger, _ := testLogger(t)
	rec := &signalRecorder{}
	host := &Host{Queue: "test-host-" + t.Name(), Client: rec, Logger: logger, FlushInterval: 5 * time.Millisecond}
	t.Cleanup(host.Close)
	if transcripts == "" {
		transcripts = t.TempDir()
	}
	rig := &turnRig{t: t, rec: rec, host: host, transcripts: transcripts}
	// The profiles the rig's tests name (rigProfile): the testagent with each set of flags.
	var profiles []Profile
	for _, flags := range [][]string{nil, {"-commands"}, {"-ignore-cancel"}, {"-start-delay", "30s"}} {
		profiles = append(profiles, Profile{Name: rigProfile(flags), Command: rig.command(flags)})
	}
	ps, err := NewProfiles(profiles, "")
	require.NoError(t, err)
	roots, err := NewRoots([]string{t.TempDir()})
	require.NoError(t, err)
	rig.runner = &Runner{
		Client: rec, Host: host, Trust: &Trust{Profiles: ps, Roots: roots}, Logger: logger,
		FlushInterval: 5 * time.Millisecond, CancelGrace: 10 * time.Second,
		beat: sdkBeat,
	}
	return rig
}

// sdkBeat sends a heartbeat through the SDK, which the test environment hands to its
// heartbeat listener.
func sdkBeat(_, owner context.Context, p signals.TurnProgress) error {
	activity.RecordHeartbeat(owner, p)
	return nil
}

func (r *turnRig) command(flags []string) string {
	cmd := fmt.Sprintf("%s -transcripts %s", testagentBin, r.transcripts)
	for _, f := range flags {
		cmd += " " + f
	}
	return cmd
}

func rigProfile(flags []string) string {
	if len(flags) == 0 {
		return "plain"
	}
	return strings.TrimLeft(strings.Join(flags, ""), "-")
}

// agent is the profile of the testagent with flags, sharing the rig's transcripts.
func (r *turnRig) agent(flags ...string) string { return rigProfile(flags) }

// run runs one turn to its end.
func (r *turnRig) run(in signals.RunTurnInput) (signals.RunTurnResult, error) {
	r.t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetTestTimeout(60 * time.Second)
	env.RegisterActivityWithOptions(r.runner.RunTurn, activity.RegisterOptions{Name: signals.ActivityRunTurn})
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var p signals.TurnProgress
		if details.HasValues() && details.Get(&p) == nil {
			r.beatsMu.Lock()
			r.beats = append(r.beats, p)
			r.beatsMu.Unlock()
		}
	})
	if in.SessionWorkflowID == "" {
		in.SessionWorkflowID = signals.SessionWorkflowID(in.SessionID)
	}
	val, err := env.ExecuteActivity(signals.ActivityRunTurn, in)
	var res signals.RunTurnResult
	if err == nil {
		require.NoError(r.t, val.Get(&res))
		r.rec.result(in.TurnID, res)
	}
	return res, err
}

func (r *turnRig) mustRun(in signals.RunTurnInput) signals.RunTurnResult {
	r.t.Helper()
	res, err := r.run(in)
	require.NoError(r.t, err)
	return res
}

func turnInput(session string, turn int64, agent, text string) signals.RunTurnInput {
	return signals.RunTurnInput{TurnInput: signals.TurnInput{SessionID: session, TurnID: turn, Agent: agent, Text: text}}
}

// What an agent says right after answering session/new belongs to the turn that opened the
// session (claude-agent-acp sends its available_commands_update then): it is journaled,
// never dropped (contract §7). A session/load's replay of history is not journaled again, but
// what the agent says after the load's answer is.
func TestRunTurnRecordsWhatTheAgentSaysAroundSessionNewAndLoad(t *testing.T) {
	transcripts := t.TempDir()
	rig := newTurnRig(t, transcripts)
	agent := rig.agent("-commands")
	res := rig.mustRun(turnInput("s1", 1, agent, "/echo\nhello"))
	require.Equal(t, "end_turn", res.StopReason)
	kinds := kindsOf(t, rig.rec.events(1))
	require.Contains(t, kinds, "available_commands_update", "the update sent right after session/new")
	require.Empty(t, rig.rec.events(0), "nothing leaked between turns")

	// Another worker takes the session over with session/load.
	other := newTurnRig(t, transcripts)
	other.runner.MissingWorkspace = MissingWorkspaceEmpty // its workspace roots are its own
	in := turnInput("s1", 2, agent, "/echo\nagain")
	in.AgentSessionID = res.AgentSessionID
	res2 := other.mustRun(in)
	require.Equal(t, res.AgentSessionID, res2.AgentSessionID, "the session was loaded, not replaced")
	events := other.rec.events(2)
	require.Contains(t, kindsOf(t, events), "available_commands_update", "the update sent right after the load's answer")
	require.Equal(t, []string{"again"}, joinedTexts(t, events), "the replay of turn 1 is not journaled again")
}

// joinedTexts is the agent's message text of events, joined.
func joinedTexts(t *testing.T, events []json.RawMessage) []string {
	t.Helper()
	var s string
	for _, x := range messageTexts(decodeUpdates(t, events)) {
		s += x
	}
	if s == "" {
		return nil
	}
	return []string{s}
}

// The runner offers the agent the client's file system (initialize advertises
// fs.readTextFile and fs.writeTextFile), served inside the session's workspace only.
func TestRunTurnOffersTheWorkspaceFilesToTheAgent(t *testing.T) {
	rig := newTurnRig(t, "")
	agent := rig.agent()
	rig.mustRun(turnInput("s1", 1, agent, "/write notes.txt\nhello tacp"))
	require.Equal(t, []string{"wrote notes.txt"}, joinedTexts(t, rig.rec.events(1)))
	got, err := os.ReadFile(filepath.Join(rig.runner.Trust.Roots.Dirs()[0], "s1", "notes.txt"))
	require.NoError(t, err)
	require.Equal(t, "hello tacp", string(got))

	rig.mustRun(turnInput("s1", 2, agent, "/read notes.txt"))
	require.Equal(t, []string{"read: hello tacp"}, joinedTexts(t, rig.rec.events(2)))

	rig.mustRun(turnInput("s1", 3, agent, "/read ../../outside.txt"))
	texts := joinedTexts(t, rig.rec.events(3))
	require.Len(t, texts, 1)
	require.Contains(t, texts[0], "read refused:")
	require.Contains(t, texts[0], "escapes the workspace")
}

// answerPermissions makes the recorder answer every permission request with optionID, as
// the session would through Deliver.
func (r *turnRig) answerPermissions(session string, optionID string) {
	r.rec.mu.Lock()
	defer r.rec.mu.Unlock()
	r.rec.onPermission = func(p signals.PermissionRequestedSignal) {
		_, err := r.host.Deliver(context.Background(), signals.Delivery{
			Kind: signals.DeliverPermission, SessionID: session, TurnID: p.TurnID, Attempt: p.Attempt,
			RequestID: p.RequestID, Outcome: signals.OutcomeSelected, OptionID: optionID,
		})
		if err != nil {
			r.t.Errorf("deliver the permission answer: %v", err)
		}
	}
}

// The permission request of claude-agent-acp names no tool; the tool_call before it does
// (_meta.claudeCode.toolName). The runner passes that name with the request, so "always
// allow" remembers the tool.
func TestRunTurnNamesTheToolOfAPermissionRequest(t *testing.T) {
	rig := newTurnRig(t, "")
	rig.answerPermissions("s1", "allow_always")
	rig.mustRun(turnInput("s1", 1, rig.agent(), "/permission edit main.go"))
	require.Equal(t, []string{"permission: selected allow_always"}, joinedTexts(t, rig.rec.events(1)))
	perms := rig.rec.permissions()
	require.Len(t, perms, 1)
	require.Equal(t, "Edit", perms[0].ToolName)
	require.NotContains(t, string(perms[0].ToolCall), "toolName", "the request as the agent sent it")
}

// Every usage field the agent reports is kept: the prompt answer's counters (cached and
// thought tokens too) and the last usage_update, whose context gauge and cumulative cost
// are objects the session keeps as the latest value rather than sums.
func TestRunTurnKeepsEveryUsageFieldTheAgentReports(t *testing.T) {
	rig := newTurnRig(t, "")
	res := rig.mustRun(turnInput("s1", 1, rig.agent(), "/usage"))
	require.JSONEq(t, `{
		"inputTokens": 10, "outputTokens": 20, "totalTokens": 38, "cachedReadTokens": 5, "thoughtTokens": 3,
		"context": {"used": 30, "size": 200000},
		"cost": {"amount": 0.0125, "currency": "USD"}
	}`, string(res.Usage))
}

// A turn cut short still counts: an agent that never answers session/cancel is killed, and
// what it reported before (its usage_update) is the turn's usage.
func TestRunTurnCutShortStillReportsItsUsage(t *testing.T) {
	rig := newTurnRig(t, "")
	rig.runner.CancelGrace = 200 * time.Millisecond
	type outcome struct {
		res signals.RunTurnResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := rig.run(turnInput("s1", 1, rig.agent("-ignore-cancel"), "/usage 60s"))
		done <- outcome{res, err}
	}()
	require.Eventually(t, func() bool {
		for _, x := range messageTexts(decodeUpdates(t, rig.rec.events(1))) {
			if x == "." {
				return true
			}
		}
		return false
	}, 30*time.Second, 5*time.Millisecond)
	_, err := rig.host.Deliver(context.Background(), signals.Delivery{Kind: signals.DeliverCancel, SessionID: "s1", TurnID: 1})
	require.NoError(t, err)
	out := <-done
	require.NoError(t, out.err)
	require.Equal(t, "cancelled", out.res.StopReason)
	// The gauges it reported count. An agent killed with SIGTERM may still answer its prompt
	// as it goes (the test agent does, with its counters), and an answer that arrives within
	// the wait after the exit counts too; either way the usage_update is kept.
	var usage map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(out.res.Usage, &usage))
	require.JSONEq(t, `{"used": 30, "size": 200000}`, string(usage["context"]))
	require.JSONEq(t, `{"amount": 0.0125, "currency": "USD"}`, string(usage["cost"]))
	if len(usage) > 2 {
		require.JSONEq(t, `10`, string(usage["inputTokens"]), "the dying answer's counters, as the agent sent them")
	}
}

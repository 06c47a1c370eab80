package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

// TestRecordHistories records real histories for workflows/replay_test.go, which replays
// every file under workflows/testdata/histories so that a change breaking running sessions
// fails CI. Run it after a deliberate change of the workflows' shape, and commit the new
// files beside the old. A turn is the session's own activity, so its history is the
// session's:
//
//	TACP_RECORD_HISTORIES=1 go test ./e2e -run TestRecordHistories
func TestRecordHistories(t *testing.T) {
	dir, stamp := recordingTo(t)

	// A session with a streamed turn, a cancelled turn, signal-path rejections and a close.
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	prompt(t, cfg, "/chunks 5 every 10ms")
	turnEnd(t, id, 1)
	require.NoError(t, tc.SignalWorkflow(ctxFor(t, 10*time.Second), signals.SessionWorkflowID(id), "", signals.UpdatePrompt, signals.PromptRequest{Text: ""}))
	prompt(t, cfg, "/sleep 60s")
	waitRunning(t, id, 2)
	_, err := sc.Steer(ctxFor(t, 10*time.Second), id, signals.SteerRequest{Text: "x", ExpectedTurnID: "1"})
	require.Error(t, err)
	_, err = sc.Cancel(ctxFor(t, 10*time.Second), id, signals.CancelRequest{})
	require.NoError(t, err)
	turnEnd(t, id, 2)
	closeAndRecord(t, sc, id, signals.CloseRequest{Reason: "recorded"}, filepath.Join(dir, fmt.Sprintf("session-turns-cancel-close-%s.json", stamp)))

	// Decisions delivered into running turns: an injected steer, a permission answered, a
	// cancel delivered while a permission waits.
	id = session(t)
	cfg = signals.SessionConfig{SessionID: id, Agent: steeringAgent()}
	prompt(t, cfg, "/sleep 2s")
	waitRunning(t, id, 1)
	_, err = steer(t, id, "1", "go left", "r1")
	require.NoError(t, err)
	delivered(t, id, 1)
	turnEnd(t, id, 1)
	prompt(t, cfg, "/permission edit")
	req := permissionRequested(t, id)
	_, err = sc.PermissionRespond(ctxFor(t, 10*time.Second), id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: "allow_always"})
	require.NoError(t, err)
	turnEnd(t, id, 2)
	prompt(t, cfg, "/permission execute")
	permissionRequested(t, id)
	_, err = sc.Cancel(ctxFor(t, 10*time.Second), id, signals.CancelRequest{})
	require.NoError(t, err)
	turnEnd(t, id, 3)
	closeAndRecord(t, sc, id, signals.CloseRequest{}, filepath.Join(dir, fmt.Sprintf("session-steer-permission-cancel-%s.json", stamp)))

	// Viewers, policy and belts: an attached controller, a permission asked under
	// ask_always and answered allow_always, grace started and cancelled, a rule used.
	id = session(t)
	cfg = signals.SessionConfig{SessionID: id, Policy: "ask_always", PermissionTimeout: "1h"}
	ctx := ctxFor(t, 30*time.Second)
	prompt(t, cfg, "/sleep 1s")
	_, err = sc.Attach(ctx, id, signals.AttachRequest{ViewerID: "v1", Role: "controller", LeaseSeconds: 600})
	require.NoError(t, err)
	turnEnd(t, id, 1)
	prompt(t, cfg, "/permission edit")
	req = permissionRequestedIn(t, id, 2)
	require.NoError(t, sc.Detach(ctx, id, signals.DetachRequest{ViewerID: "v1"}))
	waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventViewerGraceStarted })
	_, err = sc.Attach(ctx, id, signals.AttachRequest{ViewerID: "v2", Role: "observer", LeaseSeconds: 600})
	require.NoError(t, err)
	_, err = sc.PermissionRespond(ctx, id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: "allow_always"})
	require.NoError(t, err)
	turnEnd(t, id, 2)
	prompt(t, cfg, "/permission edit")
	turnEnd(t, id, 3)
	closeAndRecord(t, sc, id, signals.CloseRequest{}, filepath.Join(dir, fmt.Sprintf("session-viewers-policy-grace-%s.json", stamp)))

	// The first run of a session that continues as new in the middle of a streaming turn.
	id = session(t)
	prompt(t, signals.SessionConfig{SessionID: id, MaxRunEvents: 60}, "/chunks 100 every 10ms")
	turnEnd(t, id, 1)
	d, err := tc.DescribeWorkflowExecution(ctxFor(t, 10*time.Second), signals.SessionWorkflowID(id), "")
	require.NoError(t, err)
	first := d.GetWorkflowExecutionInfo().GetFirstRunId()
	writeHistory(t, signals.SessionWorkflowID(id), first, filepath.Join(dir, fmt.Sprintf("session-continue-as-new-mid-turn-%s.json", stamp)))
	// Its second run, which adopted the turn's attempt (ResumeTurn).
	iter := tc.GetWorkflowHistory(ctxFor(t, 30*time.Second), signals.SessionWorkflowID(id), first, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	require.True(t, iter.HasNext())
	closed, err := iter.Next()
	require.NoError(t, err)
	second := closed.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
	require.NotEmpty(t, second, "the first run continued as new")
	writeHistory(t, signals.SessionWorkflowID(id), second, filepath.Join(dir, fmt.Sprintf("session-continue-as-new-adopted-%s.json", stamp)))
}

// TestRecordHistoriesSettings records the agent's offer as session state: agent.settings
// from the runner's report, set_mode and set_config_option between turns and delivered into
// a live turn, refusals by update and by signal, the choices carried into the next turn
// (-run TestRecordHistories records these too).
func TestRecordHistoriesSettings(t *testing.T) {
	dir, stamp := recordingTo(t)

	id := session(t)
	cfg := signals.SessionConfig{SessionID: id, Agent: profileSettings}
	ctx := ctxFor(t, 60*time.Second)
	prompt(t, cfg, "/settings")
	turnEnd(t, id, 1)
	waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventAgentSettings })
	_, err := sc.SetMode(ctx, id, signals.SetModeRequest{ModeID: "dontAsk"})
	require.Error(t, err, "a mode the agent does not offer")
	require.NoError(t, tc.SignalWorkflow(ctx, signals.SessionWorkflowID(id), "", signals.UpdateSetMode, signals.SetModeRequest{ModeID: "nope"}))
	_, err = sc.SetMode(ctx, id, signals.SetModeRequest{ModeID: "plan"})
	require.NoError(t, err)
	require.NoError(t, tc.SignalWorkflow(ctx, signals.SessionWorkflowID(id), "", signals.UpdateSetConfigOption, signals.SetConfigOptionRequest{ConfigID: "model", Value: "opus"}))
	waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventConfigOptionChanged })
	prompt(t, cfg, "/sleep 2s")
	waitRunning(t, id, 2)
	_, err = sc.SetConfigOption(ctx, id, signals.SetConfigOptionRequest{ConfigID: "model", Value: "sonnet"})
	require.NoError(t, err, "delivered into the live turn")
	_, err = sc.SetMode(ctx, id, signals.SetModeRequest{ModeID: "acceptEdits"})
	require.NoError(t, err)
	turnEnd(t, id, 2)
	prompt(t, cfg, "/settings")
	evs := turnEnd(t, id, 3)
	require.Equal(t, "settings mode=acceptEdits model=sonnet", strings.Join(agentTexts(t, evs, 3), ""))
	closeAndRecord(t, sc, id, signals.CloseRequest{Reason: "recorded"}, filepath.Join(dir, fmt.Sprintf("session-settings-%s.json", stamp)))

	// set_mcp_servers: by update (the servers it has), refused by policy (this worker takes
	// none from clients) by update and by its signal twin (a SideEffect), then a turn.
	id = session(t)
	cfg = signals.SessionConfig{SessionID: id, Agent: profileSettings}
	prompt(t, cfg, "/mcp")
	turnEnd(t, id, 1)
	res, err := sc.SetMcpServers(ctx, id, signals.SetMcpServersRequest{McpServers: json.RawMessage(`[]`)})
	require.NoError(t, err)
	require.False(t, res.Changed)
	docs := json.RawMessage(`[{"type":"http","name":"docs","url":"http://127.0.0.1:1/mcp","headers":[]}]`)
	_, err = sc.SetMcpServers(ctx, id, signals.SetMcpServersRequest{McpServers: docs})
	require.ErrorContains(t, err, "refused")
	require.NoError(t, tc.SignalWorkflow(ctx, signals.SessionWorkflowID(id), "", signals.UpdateSetMcpServers, signals.SetMcpServersRequest{McpServers: docs}))
	prompt(t, cfg, "/mcp")
	evs = turnEnd(t, id, 2)
	require.Equal(t, "mcp: ", strings.Join(agentTexts(t, evs, 2), ""), "the refused servers never reached the agent")
	closeAndRecord(t, sc, id, signals.CloseRequest{Reason: "recorded"}, filepath.Join(dir, fmt.Sprintf("session-mcp-servers-%s.json", stamp)))
}

// writeHistory records a history, never over an existing file: the files recorded by
// earlier versions are what proves today's code still replays them.
func writeHistory(t *testing.T, workflowID, runID, path string) {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		t.Logf("keeping %s", path)
		return
	}
	iter := tc.GetWorkflowHistory(ctxFor(t, 30*time.Second), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var h historypb.History
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&h)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	t.Logf("recorded %s: %d events", path, len(h.Events))
}

// TestRecordHistoriesPermissionExpiredAndFailover records the scenarios the first set lacks:
// a permission asked and left to expire, and a turn restarted on another worker after its
// worker process was killed (-run TestRecordHistories records these too).
func TestRecordHistoriesPermissionExpiredAndFailover(t *testing.T) {
	dir, stamp := recordingTo(t)

	// A permission nobody answers: asked, suspended, expired by its deadline (fail closed,
	// the agent gets the reject option), then the next turn runs.
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id, PermissionTimeout: "2s"}
	prompt(t, cfg, "/permission delete")
	permissionRequestedIn(t, id, 1)
	waitFor(t, id, func(ev signals.Event) bool {
		return ev.Kind == signals.EventPermissionResolved && strings.Contains(string(ev.Data), `"expired"`)
	})
	turnEnd(t, id, 1)
	prompt(t, cfg, "/chunks 2")
	turnEnd(t, id, 2)
	closeAndRecord(t, sc, id, signals.CloseRequest{Reason: "recorded"}, filepath.Join(dir, fmt.Sprintf("session-permission-expired-%s.json", stamp)))

	// Failover: the worker process running a streaming turn is killed; the turn's activity
	// times out on its heartbeat and its retry runs on the other worker (turn.restarted).
	queue := "tacp-record-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	first := startWorkerProcess(t, queue)
	id = session(t)
	cfg = signals.SessionConfig{SessionID: id}
	_, err := qc.Prompt(ctxFor(t, 30*time.Second), cfg, signals.PromptRequest{Text: "/chunks 60 every 100ms", ClientMessageID: "turn-1"})
	require.NoError(t, err)
	waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventAgentUpdate })
	startWorkerProcess(t, queue)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	_, err = qc.Prompt(ctxFor(t, 30*time.Second), cfg, signals.PromptRequest{Text: "after the kill", ClientMessageID: "turn-2"})
	require.NoError(t, err)
	evs := turnEnd(t, id, 2)
	require.NotZero(t, countKind(evs, signals.EventTurnRestarted, 1), "turn 1 restarted")
	closeAndRecord(t, qc, id, signals.CloseRequest{Reason: "recorded"}, filepath.Join(dir, fmt.Sprintf("session-failover-turn-restarted-%s.json", stamp)))
}

// recordingTo skips unless TACP_RECORD_HISTORIES is set, and returns the folder recorded
// histories go to and today's stamp for their names.
// TestRecordHistoriesAsyncDelivery records steers delivered Async (the delivery answered
// taken, the outcome by delivery_outcome): one injected through the agent's steering
// extension, one by interrupt-and-continue followed by a cancel while a steer is out.
func TestRecordHistoriesAsyncDelivery(t *testing.T) {
	dir, stamp := recordingTo(t)

	id := session(t)
	cfg := signals.SessionConfig{SessionID: id, Agent: steeringAgent()}
	prompt(t, cfg, "/sleep 2s")
	waitRunning(t, id, 1)
	_, err := steer(t, id, "1", "go left", "a1")
	require.NoError(t, err)
	delivered(t, id, 1)
	turnEnd(t, id, 1)
	closeAndRecord(t, sc, id, signals.CloseRequest{}, filepath.Join(dir, fmt.Sprintf("session-steer-outcome-injected-%s.json", stamp)))

	id = session(t)
	cfg = signals.SessionConfig{SessionID: id}
	prompt(t, cfg, "/sleep 2s")
	waitRunning(t, id, 1)
	_, err = steer(t, id, "1", "go right", "b1")
	require.NoError(t, err)
	delivered(t, id, 1)
	turnEnd(t, id, 1)
	prompt(t, cfg, "/sleep 30s")
	waitRunning(t, id, 2)
	_, err = steer(t, id, "2", "and faster", "b2")
	require.NoError(t, err)
	_, err = sc.Cancel(ctxFor(t, 10*time.Second), id, signals.CancelRequest{})
	require.NoError(t, err)
	turnEnd(t, id, 2)
	closeAndRecord(t, sc, id, signals.CloseRequest{}, filepath.Join(dir, fmt.Sprintf("session-steer-interrupted-cancel-%s.json", stamp)))
}

// closeAndRecord closes the session through c, waits for session.closed and writes the
// session's history to path.
func closeAndRecord(t *testing.T, c *tacpclient.Client, id string, req signals.CloseRequest, path string) {
	t.Helper()
	_, err := c.Close(ctxFor(t, 30*time.Second), id, req)
	require.NoError(t, err)
	waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventSessionClosed })
	writeHistory(t, signals.SessionWorkflowID(id), "", path)
}

func recordingTo(t *testing.T) (dir, stamp string) {
	t.Helper()
	if os.Getenv("TACP_RECORD_HISTORIES") == "" {
		t.Skip("set TACP_RECORD_HISTORIES=1 to record")
	}
	dir = filepath.Join("..", "workflows", "testdata", "histories")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir, time.Now().UTC().Format("20060102")
}

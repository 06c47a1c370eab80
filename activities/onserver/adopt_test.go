// Package onserver tests the turn runner (package activities) on the real Temporal server
// (devserver), with the real testagent: what only a server shows, such as the NotFound a
// heartbeat meets once the run that scheduled the activity continued as new. It is a
// package of its own so that the activities tests do not link the server.
package onserver

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/devserver"
	"github.com/tacp-dev/tacp/signals"
)

// testagentBin is the testagent binary built once by TestMain.
var testagentBin string

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "tacp-onserver-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	testagentBin = filepath.Join(tmp, "testagent")
	build := exec.Command("go", "build", "-o", testagentBin, "../../testagent")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build testagent:", err)
		return 1
	}
	return m.Run()
}

// Names of the test's session workflow.
const (
	queue           = "onserver"
	signalAdopt     = "adopt"
	queryPermission = "permission"
)

// adoptingSession plays the session of issue 28 as far as adoption goes. Its first run
// schedules RunTurn itself and continues as new mid-turn, once the agent asks
// for a permission; its next run, when told to, schedules the adopting RunTurn on the host
// and returns what it answers. The permission request is its query's answer.
func adoptingSession(ctx workflow.Context, in signals.RunTurnInput, perm *signals.PermissionRequestedSignal) (signals.RunTurnResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute, HeartbeatTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	if perm == nil {
		workflow.ExecuteActivity(ctx, signals.ActivityRunTurn, in)
		var p signals.PermissionRequestedSignal
		workflow.GetSignalChannel(ctx, signals.SignalPermissionRequested).Receive(ctx, &p)
		return signals.RunTurnResult{}, workflow.NewContinueAsNewError(ctx, adoptingSession, in, &p)
	}
	if err := workflow.SetQueryHandler(ctx, queryPermission, func() (signals.PermissionRequestedSignal, error) { return *perm, nil }); err != nil {
		return signals.RunTurnResult{}, err
	}
	workflow.GetSignalChannel(ctx, signalAdopt).Receive(ctx, nil)
	in.Adopt, in.AttemptBase = true, perm.Attempt
	ctx = workflow.WithTaskQueue(ctx, in.HostQueue)
	var res signals.RunTurnResult
	err := workflow.ExecuteActivity(ctx, signals.ActivityRunTurn, in).Get(ctx, &res)
	return res, err
}

// logBuffer is the runner's log, for the test to wait on what it says.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) has(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Contains(b.buf.String(), s)
}

// The session continues as new while its turn runs: the RunTurn it scheduled belongs to a
// closed run, and its heartbeat meets the server's NotFound. The attempt is held, the agent
// goes on, and the next run's adopting RunTurn on the host's queue answers with the turn's
// end: one agent process, nothing restarted.
func TestTheNextRunAdoptsTheTurnOfARunThatContinuedAsNew(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	c, err := srv.NewClient(ctx, client.Options{})
	require.NoError(t, err)
	t.Cleanup(c.Close)

	var logs logBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("runner log:\n%s", logs.buf.String())
		}
	})
	host := &activities.Host{Queue: queue + "-host", Client: c, Logger: logger}
	t.Cleanup(host.Close)
	profiles, err := activities.NewProfiles([]activities.Profile{{Name: "plain", Command: testagentBin + " -transcripts " + t.TempDir()}}, "")
	require.NoError(t, err)
	roots, err := activities.NewRoots([]string{t.TempDir()})
	require.NoError(t, err)
	runner := &activities.Runner{Client: c, Host: host, Trust: &activities.Trust{Profiles: profiles, Roots: roots}, Logger: logger}
	// As the tacp worker polls them: heartbeats reach the server within a second.
	for _, q := range []string{queue, host.Queue} {
		w := worker.New(c, q, worker.Options{MaxHeartbeatThrottleInterval: time.Second, DefaultHeartbeatThrottleInterval: time.Second})
		w.RegisterWorkflow(adoptingSession)
		w.RegisterActivityWithOptions(runner.RunTurn, activity.RegisterOptions{Name: signals.ActivityRunTurn})
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
	}

	in := signals.RunTurnInput{
		TurnInput:         signals.TurnInput{SessionID: "s1", TurnID: 1, Agent: "plain", Text: "/permission edit main.go", HostQueue: host.Queue},
		SessionWorkflowID: signals.SessionWorkflowID("s1"),
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: in.SessionWorkflowID, TaskQueue: queue}, adoptingSession, in, (*signals.PermissionRequestedSignal)(nil))
	require.NoError(t, err)
	firstRun := run.GetRunID()

	// The first run continued as new mid-turn; the attempt's activity learns it from the
	// server (NotFound) and the attempt is held.
	var perm signals.PermissionRequestedSignal
	require.Eventually(t, func() bool {
		v, err := c.QueryWorkflow(ctx, in.SessionWorkflowID, "", queryPermission)
		return err == nil && v.Get(&perm) == nil
	}, time.Minute, 20*time.Millisecond)
	pid := host.AgentPID("s1")
	require.NotZero(t, pid)
	require.Eventually(t, func() bool { return logs.has("the session's run is gone") }, time.Minute, 20*time.Millisecond,
		"the attempt's heartbeat met NotFound and the attempt is held")

	require.NoError(t, c.SignalWorkflow(ctx, in.SessionWorkflowID, "", signalAdopt, nil))
	require.Eventually(t, func() bool { return logs.has("turn attempt adopted") }, time.Minute, 20*time.Millisecond)
	_, err = host.Deliver(ctx, signals.Delivery{
		Kind: signals.DeliverPermission, SessionID: "s1", TurnID: 1, Attempt: perm.Attempt,
		RequestID: perm.RequestID, Outcome: signals.OutcomeSelected, OptionID: "allow_once",
	})
	require.NoError(t, err)

	var res signals.RunTurnResult
	require.NoError(t, c.GetWorkflow(ctx, in.SessionWorkflowID, "").Get(ctx, &res))
	require.Equal(t, "end_turn", res.StopReason)
	require.Equal(t, perm.Attempt, res.Attempt)
	require.Equal(t, pid, host.AgentPID("s1"), "one agent process, alive between turns")
	require.True(t, logs.has("was_held=true"))

	desc, err := c.DescribeWorkflowExecution(ctx, in.SessionWorkflowID, "")
	require.NoError(t, err)
	require.NotEqual(t, firstRun, desc.WorkflowExecutionInfo.Execution.RunId, "the turn ended in the next run")
}

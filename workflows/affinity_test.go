package workflows

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
)

// Reference: contract §10, Affinity. Each row is one rule of afterHostAttempt, in its order.
func TestAffinity_AfterHostAttempt(t *testing.T) {
	progress := signals.TurnProgress{AgentSessionID: "agent-1", PromptSent: true}
	tests := []struct {
		name string
		err  error
		want hostOutcome
	}{
		{"Rule1_AnsweredIsDone", nil, hostOutcome{}},
		{"Rule1_CancelledIsDone", temporal.NewCanceledError(), hostOutcome{}},
		{"Rule2_NotTakenFallsBackWithNoAttemptSpent", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil), hostOutcome{Fallback: true}},
		{"Rule2_HostBusyFallsBackWithNoAttemptSpent", temporal.NewApplicationError("no room", signals.TypeHostBusy), hostOutcome{Fallback: true}},
		{"Rule3_HeartbeatLostFallsBackAsAttempt2", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil), hostOutcome{Fallback: true, Base: 1}},
		{"Rule3_HeartbeatLostResumesFromTheLastHeartbeat", temporal.NewHeartbeatTimeoutError(progress), hostOutcome{Fallback: true, Base: 1, Resume: &progress}},
		{"Rule3_StartToCloseFallsBack", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil), hostOutcome{Fallback: true, Base: 1}},
		{"Rule4_AgentErrorIsDone", temporal.NewNonRetryableApplicationError("agent: boom", signals.TypeAgentError, nil), hostOutcome{}},
		{"Rule4_RefusedIsDone", temporal.NewNonRetryableApplicationError("no such profile", signals.RejectInvalidRequest, nil), hostOutcome{}},
		{"Rule5_AttemptLostFallsBackAsAttempt2", temporal.NewApplicationError("turn attempt lost", "attempt_lost"), hostOutcome{Fallback: true, Base: 1}},
		{"Rule5_AttemptLostResumesFromItsDetails", temporal.NewApplicationError("turn attempt lost", "attempt_lost", progress), hostOutcome{Fallback: true, Base: 1, Resume: &progress}},
		{"Rule5_AnyOtherErrorFallsBack", errors.New("signal failed"), hostOutcome{Fallback: true, Base: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := afterHostAttempt(tt.err)
			got.Why = ""
			require.Equal(t, tt.want, got)
		})
	}
}

// turnEnv drives a turn alone (driveAlone) with RunTurn played by runTurn (told which task
// queue it was scheduled on) and records the ReleaseAgent requests with their queues.
type turnEnv struct {
	env      *testsuite.TestWorkflowEnvironment
	mu       sync.Mutex
	queues   []string // RunTurn's, in order
	releases []string // "queue: session -> new host"
}

func newTurnEnv(t *testing.T, runTurn func(queue string) (signals.RunTurnResult, error)) *turnEnv {
	var suite testsuite.WorkflowTestSuite
	e := &turnEnv{env: suite.NewTestWorkflowEnvironment()}
	e.env.RegisterWorkflowWithOptions(driveAlone, workflow.RegisterOptions{Name: driveAloneType})
	e.env.RegisterActivityWithOptions(func(ctx context.Context, in signals.RunTurnInput) (signals.RunTurnResult, error) {
		q := activity.GetInfo(ctx).TaskQueue
		e.mu.Lock()
		e.queues = append(e.queues, q)
		e.mu.Unlock()
		return runTurn(q)
	}, activity.RegisterOptions{Name: signals.ActivityRunTurn})
	e.env.RegisterActivityWithOptions(func(ctx context.Context, req signals.ReleaseAgentRequest) error {
		e.mu.Lock()
		e.releases = append(e.releases, fmt.Sprintf("%s: %s -> %s", activity.GetInfo(ctx).TaskQueue, req.SessionID, req.NewHost))
		e.mu.Unlock()
		return nil
	}, activity.RegisterOptions{Name: signals.ActivityReleaseAgent})
	e.env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(nil)
	return e
}

func (e *turnEnv) run(t *testing.T, host string) {
	t.Helper()
	e.env.ExecuteWorkflow(driveAloneType, signals.TurnInput{
		SessionID: "s1", TurnID: 2, Text: "hi", HostQueue: host,
		StartToClose: time.Minute, Heartbeat: 10 * time.Second,
	})
	require.True(t, e.env.IsWorkflowCompleted())
	require.NoError(t, e.env.GetWorkflowError())
}

// No orphans (contract §10): a turn that fell back and ran on another host asks the host the
// session left to stop its idle agent; a turn its host ran, or one that fell back onto the
// same host, asks nothing.
func TestAffinity_ReleaseAgentOnTheHostTheSessionLeft(t *testing.T) {
	const old, other = "host-old", "host-new"
	notTaken := temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
	tests := []struct {
		name         string
		runTurn      func(queue string) (signals.RunTurnResult, error)
		wantQueues   int
		wantReleases []string
	}{
		{"TheHostRanItNothingReleased", func(q string) (signals.RunTurnResult, error) {
			return signals.RunTurnResult{Host: q, StopReason: "end_turn"}, nil
		}, 1, nil},
		{"RanElsewhereTheOldHostReleases", func(q string) (signals.RunTurnResult, error) {
			if q == old {
				return signals.RunTurnResult{}, notTaken
			}
			return signals.RunTurnResult{Host: other, StopReason: "end_turn"}, nil
		}, 2, []string{old + ": s1 -> " + other}},
		{"FellBackOntoTheSameHostNothingReleased", func(q string) (signals.RunTurnResult, error) {
			if q == old {
				return signals.RunTurnResult{}, notTaken
			}
			return signals.RunTurnResult{Host: old, StopReason: "end_turn"}, nil
		}, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTurnEnv(t, tt.runTurn)
			e.run(t, old)
			require.Len(t, e.queues, tt.wantQueues)
			require.Equal(t, old, e.queues[0], "the first attempt is on the agent's host queue")
			require.Equal(t, tt.wantReleases, e.releases)
		})
	}
}

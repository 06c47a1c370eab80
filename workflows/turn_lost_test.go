package workflows

import (
	"context"
	"encoding/json"
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

func TestAttemptLost(t *testing.T) {
	progress := signals.TurnProgress{AgentSessionID: "as-1", PromptSent: true}
	tests := []struct {
		name       string
		err        error
		lost       bool
		wantResume bool
	}{
		{"HeartbeatTimeoutIsALostWorker", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil), true, false},
		{"HeartbeatTimeoutResumesFromItsDetails", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil, progress), true, true},
		{"TheRunnersAttemptLostIsALostWorker", temporal.NewApplicationError("turn attempt lost", signals.TypeAttemptLost, progress), true, true},
		{"StartToCloseIsTheDeadlineNotALoss", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil), false, false},
		{"AnAgentErrorIsNotALoss", temporal.NewNonRetryableApplicationError("agent failed", signals.TypeAgentError, nil), false, false},
		{"SuccessIsNotALoss", nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lost, resume := attemptLost(tt.err)
			require.Equal(t, tt.lost, lost)
			require.Equal(t, tt.wantResume, resume != nil)
		})
	}
}

// A turn whose workers are lost more often than a round has attempts is never failed for it
// (issue 35): each lost attempt is followed by one more, numbered on, resuming from what the
// lost one knew, until one answers.
func TestTurn_LostWorkersNeverFailTheTurn(t *testing.T) {
	const losses = 2*turnAttempts + 1
	var (
		mu       sync.Mutex
		attempts []int32
		resumes  []string
	)
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(driveAlone, workflow.RegisterOptions{Name: driveAloneType})
	env.RegisterActivityWithOptions(func(ctx context.Context, in signals.RunTurnInput) (signals.RunTurnResult, error) {
		n := in.AttemptBase + activity.GetInfo(ctx).Attempt
		mu.Lock()
		attempts = append(attempts, n)
		resume := ""
		if in.Resume != nil {
			resume = in.Resume.AgentSessionID
		}
		resumes = append(resumes, resume)
		mu.Unlock()
		if len(attempts) <= losses {
			return signals.RunTurnResult{}, temporal.NewApplicationError("turn attempt lost", signals.TypeAttemptLost,
				signals.TurnProgress{AgentSessionID: "as-1", PromptSent: true})
		}
		return signals.RunTurnResult{Attempt: n, StopReason: "end_turn"}, nil
	}, activity.RegisterOptions{Name: signals.ActivityRunTurn})
	var finished []signals.TurnFinishedSignal
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, signals.SignalTurnFinished, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			finished = append(finished, arg.(signals.TurnFinishedSignal))
			return nil
		})
	env.ExecuteWorkflow(driveAloneType, signals.TurnInput{
		SessionID: "s1", TurnID: 1, Text: "hi", StartToClose: time.Hour, Heartbeat: 10 * time.Second,
	})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	want := make([]int32, losses+1)
	for i := range want {
		want[i] = int32(i + 1)
	}
	require.Equal(t, want, attempts, "one attempt more per loss, numbered on")
	require.Equal(t, "as-1", resumes[turnAttempts], "a new round resumes from the lost attempt's progress")
	require.Len(t, finished, 1)
	require.Equal(t, "end_turn", finished[0].StopReason)
	require.Empty(t, finished[0].Error)
}

// Reference: contract §7, carried reports: the drive's turn_finished carries what the
// runner's signals did not (the last batch, turn_started), from the activity's result.
func TestTheDrivesReportCarriesWhatTheRunnersSignalsDidNot(t *testing.T) {
	started := &signals.TurnStartedSignal{TurnID: 1, Attempt: 2, HostQueue: "host1"}
	res := signals.RunTurnResult{StopReason: "end_turn", Attempt: 2, Batches: 3, Events: []json.RawMessage{chunk("c")}, Started: started}
	fin := turnFinished(1, res, nil)
	require.Equal(t, int64(3), fin.Batches)
	require.Equal(t, res.Events, fin.Events)
	require.Equal(t, started, fin.Started)
}

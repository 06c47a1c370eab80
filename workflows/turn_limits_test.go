package workflows

import (
	"context"
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

// limitedTurnEnv drives a turn alone (driveAlone) whose first round is limited until an
// hour from the start; it records each RunTurn's input and the signals the drive sends.
type limitedTurnEnv struct {
	env     *testsuite.TestWorkflowEnvironment
	mu      sync.Mutex
	inputs  []signals.RunTurnInput
	queues  []string
	signals []string
}

func newLimitedTurnEnv(t *testing.T, notTakenOnHost bool) *limitedTurnEnv {
	var suite testsuite.WorkflowTestSuite
	e := &limitedTurnEnv{env: suite.NewTestWorkflowEnvironment()}
	e.env.RegisterWorkflowWithOptions(driveAlone, workflow.RegisterOptions{Name: driveAloneType})
	start := e.env.Now()
	e.env.RegisterActivityWithOptions(func(ctx context.Context, in signals.RunTurnInput) (signals.RunTurnResult, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		q := activity.GetInfo(ctx).TaskQueue
		e.queues = append(e.queues, q)
		if notTakenOnHost && q == "host1" && len(e.inputs) > 0 {
			return signals.RunTurnResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
		}
		e.inputs = append(e.inputs, in)
		attempt := in.AttemptBase + activity.GetInfo(ctx).Attempt
		if len(e.inputs) == 1 {
			return signals.RunTurnResult{Attempt: attempt, Host: "host1", AgentSessionID: "a1", Limited: &signals.LimitInfo{
				Reason: signals.LimitRateLimited, RetryAt: start.Add(time.Hour), Backoff: true,
			}}, nil
		}
		return signals.RunTurnResult{Attempt: attempt, Host: "host2", StopReason: "end_turn"}, nil
	}, activity.RegisterOptions{Name: signals.ActivityRunTurn})
	e.env.RegisterActivityWithOptions(func(context.Context, signals.ReleaseAgentRequest) error { return nil }, activity.RegisterOptions{Name: signals.ActivityReleaseAgent})
	e.env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(
		func(_, _, _, name string, arg any) error {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.signals = append(e.signals, name)
			if name == signals.SignalTurnFinished {
				fin := arg.(signals.TurnFinishedSignal)
				e.signals = append(e.signals, "stop:"+fin.StopReason)
			}
			return nil
		})
	return e
}

func (e *limitedTurnEnv) run(t *testing.T) {
	t.Helper()
	e.env.ExecuteWorkflow(driveAloneType, signals.TurnInput{
		SessionID: "s1", TurnID: 2, Text: "hi", HostQueue: "host1",
		StartToClose: time.Minute, Heartbeat: 10 * time.Second,
	})
	require.True(t, e.env.IsWorkflowCompleted())
	require.NoError(t, e.env.GetWorkflowError())
}

// Reference: contract §11, Limits: a limited round is reported (turn_limited), waited out on
// the timer, and the prompt runs again as the turn's next attempt, numbered on, on the host
// that holds the agent first and elsewhere when that host does not take it.
func TestTurn_LimitedRoundWaitsOnTheTimerAndRunsTheNextAttempt(t *testing.T) {
	e := newLimitedTurnEnv(t, true)
	e.run(t)
	require.Len(t, e.inputs, 2)
	second := e.inputs[1]
	require.Equal(t, int32(1), second.AttemptBase, "the next attempt is numbered on from the limited one")
	require.Equal(t, int32(1), second.LimitWaits)
	require.Equal(t, "a1", second.AgentSessionID, "it loads the agent session the limited attempt had")
	require.Nil(t, second.Resume, "the prompt is sent again")
	require.Equal(t, []string{"host1", "host1"}, e.queues[:2], "the limited round and the next one's host attempt")
	require.NotEqual(t, "host1", e.queues[2], "the host did not take it: the session's queue did")
	require.Equal(t, []string{signals.SignalTurnLimited, signals.SignalTurnFinished, "stop:end_turn"}, e.signals)
}

// Reference: contract §11, Limits: retry_now ends the wait at once; cancel ends the turn.
func TestTurn_RetryNowAndCancelEndTheWait(t *testing.T) {
	t.Run("RetryNow", func(t *testing.T) {
		e := newLimitedTurnEnv(t, false)
		var began time.Time
		e.env.RegisterDelayedCallback(func() {
			began = e.env.Now()
			e.env.SignalWorkflow(retryNowSignal, nil)
		}, time.Minute)
		e.run(t)
		require.Len(t, e.inputs, 2)
		require.Less(t, e.env.Now().Sub(began), time.Hour, "the hour's wait was cut short")
	})
	t.Run("Cancel", func(t *testing.T) {
		e := newLimitedTurnEnv(t, false)
		e.env.RegisterDelayedCallback(func() { e.env.CancelWorkflow() }, time.Minute)
		e.env.ExecuteWorkflow(driveAloneType, signals.TurnInput{
			SessionID: "s1", TurnID: 2, Text: "hi", HostQueue: "host1", StartToClose: time.Minute, Heartbeat: 10 * time.Second,
		})
		require.True(t, e.env.IsWorkflowCompleted())
		require.Len(t, e.inputs, 1, "nothing runs after the cancel")
		require.Equal(t, []string{signals.SignalTurnLimited, signals.SignalTurnFinished, "stop:cancelled"}, e.signals)
	})
}

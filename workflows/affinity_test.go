package workflows

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/tacp-dev/tacp/signals"
)

// Reference: DESIGN §10, Affinity. Each row is one rule of afterHostAttempt, in its order.
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
		{"Rule3_HeartbeatLostFallsBackAsAttempt2", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil), hostOutcome{Fallback: true, Base: 1}},
		{"Rule3_HeartbeatLostResumesFromTheLastHeartbeat", temporal.NewHeartbeatTimeoutError(progress), hostOutcome{Fallback: true, Base: 1, Resume: &progress}},
		{"Rule3_StartToCloseFallsBack", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil), hostOutcome{Fallback: true, Base: 1}},
		{"Rule4_AgentErrorIsDone", temporal.NewNonRetryableApplicationError("agent: boom", signals.ErrAgent, nil), hostOutcome{}},
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

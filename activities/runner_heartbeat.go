package activities

// What a turn attempt learns from the attempt before it (its heartbeats, or the session),
// and whether the attempt's context ended by the workflow's cancel.

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/tacp-dev/tacp/signals"
)

// progressBefore is what the attempt before this one knew: the last heartbeat of this
// activity's earlier attempt, or, when that ran in another activity (on the previous host's
// queue), what the session passed on (RunTurnInput.Resume).
func (t *turnRun) progressBefore(ctx context.Context) signals.TurnProgress {
	var before signals.TurnProgress
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &before)
	} else if t.in.Resume != nil {
		before = *t.in.Resume
	}
	if before.AgentSessionID == "" && t.attempt > 1 {
		// The lost attempt's last beats may not have reached the server (the SDK holds a
		// heartbeat back for up to a throttle interval), but its turn_started signal did
		// if it opened an agent session: the session knows which one. Loading it keeps the
		// conversation, or fails and is journaled (agent.context_lost); a new agent session
		// started here without a word would forget it silently. Whether the prompt reached
		// the agent is not known then: it is sent again rather than lost.
		if id := t.sessionsAgentSession(ctx); id != "" {
			before.AgentSessionID = id
		}
	}
	return before
}

// sessionsAgentSession asks the session which agent session it holds ("" when it holds none
// or does not answer).
func (t *turnRun) sessionsAgentSession(ctx context.Context) string {
	wait := 3 * time.Second
	if hb := activity.GetInfo(ctx).HeartbeatTimeout; hb > 0 {
		wait = hb / 3
	}
	qctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	v, err := t.r.Client.QueryWorkflow(qctx, t.in.SessionWorkflowID, "", signals.QueryStatus)
	if err != nil {
		t.log.Warn("status query failed: the retry opens the agent session its input names", "error", err)
		return ""
	}
	var st signals.Status
	if err := v.Get(&st); err != nil {
		return ""
	}
	return st.AgentSessionID
}

// isCancelRequest reports whether an activity context ended because the workflow asked for
// the cancellation (the cancel backstop), rather than because the attempt was lost.
func isCancelRequest(cause error) bool {
	var ce *temporal.CanceledError
	return errors.As(cause, &ce)
}

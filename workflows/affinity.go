package workflows

// Affinity (contract §10): a turn runs on the worker that holds the session's live agent,
// through that worker's host queue, whenever it is alive; only when it does not take the turn
// within a short schedule-to-start bound (or loses it mid-turn) does the turn go to the
// session queue, where any worker takes it. The decision after the host attempt is a pure
// function of how that attempt ended, so a table test states the rules.

import (
	"errors"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/tacp-dev/tacp/signals"
)

// releaseTimeout bounds the ReleaseAgent sent to a host the session left.
const releaseTimeout = 5 * time.Second

// hostOutcome is what a turn's drive does after the attempt on the previous host's queue.
type hostOutcome struct {
	// Fallback: run the turn on the session queue.
	Fallback bool
	// Base is how many attempts ran before the fallback (0: the host never took the turn).
	Base int32
	// Resume is how far the lost host attempt got, from its last heartbeat.
	Resume *signals.TurnProgress
	// Why names the rule that decided, for the workflow's log.
	Why string
}

// afterHostAttempt decides what follows the attempt on the previous host's queue, which ended
// with err (nil: the agent answered). Checked in this order:
//  1. answered, or cancelled by the session: done;
//  2. not taken within the schedule-to-start bound (the host is gone), or refused because the
//     host runs as many turns as it may (signals.TypeHostBusy): fall back, no attempt ran;
//  3. timed out after it started (heartbeat, start-to-close): the host was lost mid-turn;
//     fall back as attempt 2, resuming from its last heartbeat;
//  4. a non-retryable application error (the agent failed, the worker refused the turn):
//     done, as on the session queue;
//  5. any other failure (attempt lost, signals that did not go out): fall back as attempt 2.
func afterHostAttempt(err error) hostOutcome {
	if err == nil || temporal.IsCanceledError(err) {
		return hostOutcome{Why: "done"}
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		if te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
			return hostOutcome{Fallback: true, Why: "the previous host did not take the turn"}
		}
		out := hostOutcome{Fallback: true, Base: 1, Why: "the previous host was lost mid-turn"}
		if te.HasLastHeartbeatDetails() {
			var p signals.TurnProgress
			if te.LastHeartbeatDetails(&p) == nil {
				out.Resume = &p
			}
		}
		return out
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == signals.TypeHostBusy {
		return hostOutcome{Fallback: true, Why: "the previous host has no room for another turn"}
	}
	if errors.As(err, &ae) && ae.NonRetryable() {
		return hostOutcome{Why: "the attempt failed for good"}
	}
	out := hostOutcome{Fallback: true, Base: 1, Why: "the host attempt failed"}
	if ae != nil && ae.HasDetails() {
		var p signals.TurnProgress
		if ae.Details(&p) == nil && p.AgentSessionID != "" {
			out.Resume = &p
		}
	}
	return out
}

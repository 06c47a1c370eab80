package activities

// Adoption (issue 28): a turn attempt outlives the run of the session that scheduled it.
// When the session continues as new mid-turn, the RunTurn activity belongs to a closed run:
// its next heartbeat meets NotFound, the SDK cancels its context with that error as the
// cause, and whatever it returns goes nowhere. So the attempt's body (setup, the turn
// shell, its end) runs on a context of its own, and answers to an owner: the activity that
// answers for the attempt now (its heartbeats, its cancel, its result). An owner whose run
// is gone leaves the attempt held: it keeps running, nobody answering for it, until the new
// run's adopting RunTurn (RunTurnInput.Adopt) on this host's queue becomes its owner, or
// AdoptWait passes and it ends as any attempt whose activity was lost. The agent process,
// its ACP connection, the turn shell, the batcher and every report (they go to the session
// by workflow id, which reaches the current run) carry on untouched through the hand-over.
//
// An attempt's outcome is remembered for AdoptWait after its end, for an adopter that comes
// after it (the session continued as new just as the turn ended).
//
// A run is also gone when an operator terminated the session's workflow: no next run will
// adopt the attempt. So a held attempt asks the server once what became of the session
// (endIfSessionEnded): when its latest run has ended (terminated, or any other end but a
// continue-as-new) the attempt ends at once and the session's agent stops, instead of the
// attempt running on for AdoptWait and the agent for its idle TTL.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/tacp-dev/tacp/signals"
)

// DefaultAdoptWait is how long a held attempt waits for its adopter, and how long an ended
// attempt's outcome is kept for one: the session's next run schedules the adopter in its
// first workflow task, well within it on a loaded worker.
const DefaultAdoptWait = time.Minute

// attemptKey names one attempt of one turn of a session on this host.
type attemptKey struct {
	session string
	turn    int64
	attempt int32
}

// beatTarget is where an attempt's heartbeats go: the context of the activity that answers
// for it now (nil: nobody does, the attempt is held), a channel that is ready when that
// changed, so the new owner's first beat goes out at once, and lostOwner, which a heartbeat's
// answer calls when the server no longer holds that activity (or asked for its cancel).
type beatTarget interface {
	beatCtx() context.Context
	ownerChanged() <-chan struct{}
	lostOwner(owner context.Context, cause error)
}

// attemptOwner is one activity answering for an attempt.
type attemptOwner struct {
	ctx context.Context
	// released is closed once this activity no longer answers for the attempt (another
	// adopted it, or its run is gone and the attempt is held): it returns at once, and what
	// it returns goes nowhere.
	released chan struct{}
}

// ownedAttempt is a turn attempt on this host: running, or ended and remembered.
type ownedAttempt struct {
	key  attemptKey
	wait time.Duration
	log  *slog.Logger
	host *Host
	// ctx is the body's context: it outlives its owners, and is cancelled with the cause
	// of the owner's end (except a run-gone one) or of a hold nobody ended.
	ctx     context.Context
	cancel  context.CancelCauseFunc
	changed chan struct{}

	mu    sync.Mutex
	owner *attemptOwner // nil: held (or ended)
	// unwatch stops watching the owner's context.
	unwatch func() bool
	// holds counts the attempt's holds: the timer of an earlier one does nothing.
	holds int
	hold  *time.Timer
	// ended is closed when the body returned res and err.
	ended chan struct{}
	res   signals.RunTurnResult
	err   error
}

// startAttempt registers an attempt that the activity of ctx answers for, with its
// body's context; the activity waits for it with answer.
func (h *Host) startAttempt(ctx context.Context, key attemptKey, wait time.Duration, log *slog.Logger) (*ownedAttempt, *attemptOwner) {
	h.init()
	a := &ownedAttempt{key: key, wait: wait, log: log, host: h, changed: make(chan struct{}, 1), ended: make(chan struct{})}
	a.ctx, a.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	a.mu.Lock()
	o := a.own(ctx)
	a.mu.Unlock()
	h.mu.Lock()
	h.attempts[key] = a
	h.mu.Unlock()
	return a, o
}

// heldAttempt returns the attempt key names on this host, running or remembered (nil: none).
func (h *Host) heldAttempt(key attemptKey) *ownedAttempt {
	h.init()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.attempts[key]
}

// endAttempt records the attempt's outcome, answers its owner, and forgets the attempt
// AdoptWait later.
func (h *Host) endAttempt(a *ownedAttempt, res signals.RunTurnResult, err error) {
	a.mu.Lock()
	a.res, a.err = res, err
	if a.unwatch != nil {
		a.unwatch()
	}
	if a.hold != nil {
		a.hold.Stop()
	}
	close(a.ended)
	a.mu.Unlock()
	a.cancel(context.Canceled) // releases the body's context
	time.AfterFunc(a.wait, func() {
		h.mu.Lock()
		if h.attempts[a.key] == a {
			delete(h.attempts, a.key)
		}
		h.mu.Unlock()
	})
}

// adopt makes the activity of ctx the attempt's owner. ok is false when the attempt has
// ended already: its outcome is a.res and a.err.
func (a *ownedAttempt) adopt(ctx context.Context) (o *attemptOwner, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-a.ended:
		return nil, false
	default:
	}
	held := a.owner == nil
	o = a.own(ctx)
	// The adopter beats at once: its heartbeat timeout runs from its start, and its details
	// (the attempt's progress) are what the session hands the attempt after it, should this
	// worker be lost.
	select {
	case a.changed <- struct{}{}:
	default:
	}
	a.log.Info("turn attempt adopted by the session's next run", "was_held", held)
	return o, true
}

// own makes the activity of ctx the owner, releasing the one before (a.mu held).
func (a *ownedAttempt) own(ctx context.Context) *attemptOwner {
	if prev := a.owner; prev != nil {
		a.unwatch()
		close(prev.released)
	}
	if a.hold != nil {
		a.hold.Stop()
		a.hold = nil
	}
	o := &attemptOwner{ctx: ctx, released: make(chan struct{})}
	a.owner = o
	a.unwatch = context.AfterFunc(ctx, func() { a.ownerDone(o, context.Cause(o.ctx)) })
	return o
}

// lostOwner ends the owner whose context is owner, with the cause its heartbeat met.
func (a *ownedAttempt) lostOwner(owner context.Context, cause error) {
	a.mu.Lock()
	o := a.owner
	a.mu.Unlock()
	if o != nil && o.ctx == owner {
		a.ownerDone(o, cause)
	}
}

// ownerDone takes the end of owner o (its context's, or its heartbeat's answer): a run-gone
// end holds the attempt, any other cancels the body with the same cause (a cancel request
// cancels the turn, a lost context loses the attempt). An owner that no longer answers for
// the attempt is ignored.
func (a *ownedAttempt) ownerDone(o *attemptOwner, cause error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.owner != o {
		return
	}
	select {
	case <-a.ended:
		return
	default:
	}
	if !runGone(cause) {
		a.cancel(cause)
		return
	}
	a.owner = nil
	close(o.released)
	a.holds++
	gen := a.holds
	a.log.Info("the session's run is gone: the turn attempt waits for its next run to adopt it", "wait", a.wait)
	a.hold = time.AfterFunc(a.wait, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.owner != nil || a.holds != gen {
			return
		}
		a.log.Warn("no run of the session adopted the turn attempt: it ends as lost", "wait", a.wait)
		a.cancel(cause)
	})
	go a.endIfSessionEnded(gen)
}

// endIfSessionEnded ends the attempt held as hold gen, and stops the session's agent, when
// the session's workflow has ended without a next run (an operator terminated it): no run
// will adopt the attempt. Asked once; a server that does not answer leaves the hold to its
// timer.
func (a *ownedAttempt) endIfSessionEnded(gen int) {
	h := a.host
	if h == nil || h.Client == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	how, ended := h.sessionEnded(ctx, a.key.session)
	if !ended {
		return
	}
	a.mu.Lock()
	if a.owner != nil || a.holds != gen {
		a.mu.Unlock()
		return // adopted meanwhile, or held again
	}
	a.hold.Stop()
	a.log.Warn("the session's workflow "+how+" without a next run: the turn attempt ends and the session's agent stops", "session", a.key.session)
	a.cancel(fmt.Errorf("the session's workflow %s", how))
	a.mu.Unlock()
	_ = h.ReleaseAgent(ctx, signals.ReleaseAgentRequest{SessionID: a.key.session, Closed: true})
}

// sessionEnded reports whether the latest run of the session's workflow has ended without
// a next run, and how ("was terminated"). A run that continued as new, or a server that does
// not answer, is not an end.
func (h *Host) sessionEnded(ctx context.Context, sessionID string) (string, bool) {
	d, err := h.Client.DescribeWorkflowExecution(ctx, signals.SessionWorkflowID(sessionID), "")
	if err != nil {
		return "", false
	}
	switch d.GetWorkflowExecutionInfo().GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "was terminated", true
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "was cancelled", true
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed", true
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed out", true
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "completed", true
	default: // running, continued as new
		return "", false
	}
}

// answer waits for the attempt's outcome as its owner o. An owner released before the end
// answers at once with activity.ErrResultPending: its result would go nowhere (its run is
// gone, or another activity answers for the attempt), so the SDK is told to send none,
// and the worker logs no failure for a hand-over.
func (a *ownedAttempt) answer(o *attemptOwner) (signals.RunTurnResult, error) {
	select {
	case <-o.released:
	case <-a.ended:
		select {
		case <-o.released:
		default:
			return a.res, a.err
		}
	}
	a.log.Info("turn attempt handed over: another activity answers for it now", "attempt", a.key.attempt)
	return signals.RunTurnResult{Attempt: a.key.attempt}, activity.ErrResultPending
}

func (a *ownedAttempt) beatCtx() context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.owner == nil {
		return nil
	}
	return a.owner.ctx
}

func (a *ownedAttempt) ownerChanged() <-chan struct{} { return a.changed }

// runGone reports whether an activity context ended because the server no longer knows the
// activity: its run closed (the session continued as new), and the SDK cancelled the
// context with the heartbeat's NotFound as the cause.
func runGone(cause error) bool {
	var nf *serviceerror.NotFound
	return errors.As(cause, &nf)
}

// adopt answers an adopting RunTurn: the attempt in.AttemptBase of the turn, running here or
// remembered, or a retryable TypeNothingToAdopt.
func (r *Runner) adopt(ctx context.Context, in signals.RunTurnInput) (signals.RunTurnResult, error) {
	key := attemptKey{in.SessionID, in.TurnID, in.AttemptBase}
	a := r.Host.heldAttempt(key)
	if a == nil {
		return signals.RunTurnResult{}, temporal.NewApplicationError(fmt.Sprintf(
			"nothing to adopt: attempt %d of turn %d of session %s is not running on host %s, nor did it end here lately",
			in.AttemptBase, in.TurnID, in.SessionID, r.Host.Queue), signals.TypeNothingToAdopt)
	}
	o, ok := a.adopt(ctx)
	if !ok {
		return a.res, a.err
	}
	return a.answer(o)
}

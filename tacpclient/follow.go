package tacpclient

// Following a session: a viewer runs the events query when the session's workflow history has
// grown, not on a clock. A Follower long-polls that history (GetWorkflowExecutionHistory with
// WaitNewEvent, which the server answers without a worker task, for as long as nothing
// happens), follows continue-as-new from run to run, and tells its viewer when a query may
// find something the last one did not. The query stays the only source of the journal: a
// history event only says "ask now", so nothing reaches a viewer before the workflow has
// journaled it. A slow safety poll (Client.SafetyPoll) stays as the fallback, so a wake-up
// that never comes costs latency, never events.
//
// Which history needs a query: the journal changes only inside workflow tasks, and a query
// that reaches the server while a workflow task is scheduled or running is answered after
// that task (Temporal's queries are consistent with every event recorded before them). So
// a query issued once the follower had seen a task's WorkflowTaskScheduled covers that
// task's WorkflowTaskStarted, its WorkflowTaskCompleted and the events its commands wrote;
// everything else (a signal, an activity's or a child's result, a timer, a task that failed,
// the run's end) asks for a query. A streaming turn's batch is then one query: the signal
// wakes the viewer, its query waits for the task that journals the batch, and that task's
// own events wake nobody.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tacp-dev/tacp/signals"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// DefaultSafetyPoll is the default of Client.SafetyPoll: how long a follower goes without a
// query when the session's history wakes nothing. It bounds what a missed wake-up costs.
const DefaultSafetyPoll = 30 * time.Second

// quietBackoff bounds how far the safety poll stretches while nothing happens. A safety
// poll whose query the history did not ask for doubles the next interval, up to
// quietBackoff times Client.SafetyPoll; the history waking the follower brings it back.
// An idle session a person holds open then costs about 180 events queries a day at the
// default (30 s, 1, 2, 4 and 8 min, then every 8 min) instead of 2,880, and a wake-up that
// never comes costs at most 8 min of latency while the session is idle, never an event.
// A session that streams wakes its followers every batch, so its interval stays at the
// shortest.
const quietBackoff = 16

// historySource is the part of the Temporal client a Follower reads.
type historySource interface {
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
	GetWorkflowHistory(ctx context.Context, workflowID, runID string, isLongPoll bool, filterType enumspb.HistoryEventFilterType) client.HistoryEventIterator
}

// Follower tells one viewer of one session when to run the events query. Call Querying
// just before each query and the func it returns once the query has returned, and query when
// Ready is ready; the Follower stops when the context given to Follow ends.
//
// While a query is out the Follower sends no new long poll: what the history gains meanwhile
// (the started and completed events of the task the query waits for, and any new signal)
// comes back in one answer when the query is done, and the viewer could not have queried
// earlier anyway. Every batch of a stream costs two long-poll answers instead of three.
type Follower struct {
	ctx   context.Context
	c     *Client
	id    string
	ready chan struct{} // capacity 1: "query now"
	every time.Duration
	timer *time.Timer // the safety poll

	// quiet is the safety poll's interval now: every, doubled by each safety poll the
	// history did not ask for (quietBackoff); byPoll: the last wake was the safety poll's.
	quiet  time.Duration
	byPoll bool

	// queried is when the viewer last said it was querying (or the Follower started): the
	// safety poll wakes the viewer only once its interval has passed since. A timer that
	// fired just before Querying reset it would otherwise wake the viewer early.
	queried time.Time

	mu       sync.Mutex
	cov      cover
	ended    bool          // the workflow closed and no run follows it
	inFlight int           // the viewer's queries not yet returned
	idle     chan struct{} // capacity 1: a query returned
}

// Follow starts following session sessionID's history until ctx ends. Start following
// before the first query: history already written when Follow returns is covered by any
// query issued after it.
func (c *Client) Follow(ctx context.Context, sessionID string) *Follower {
	return newFollower(ctx, c, c.Temporal, sessionID)
}

func newFollower(ctx context.Context, c *Client, src historySource, sessionID string) *Follower {
	f := &Follower{ctx: ctx, c: c, id: sessionID, ready: make(chan struct{}, 1), idle: make(chan struct{}, 1), every: c.SafetyPoll}
	if f.every <= 0 {
		f.every = DefaultSafetyPoll
	}
	f.queried, f.quiet = time.Now(), f.every
	f.timer = time.AfterFunc(f.every, f.safetyPoll)
	context.AfterFunc(ctx, func() { f.timer.Stop() })
	wid := signals.SessionWorkflowID(sessionID)
	// Where the history stands now: what a query issued after Follow returns has seen, so
	// reading up to it wakes nobody.
	run := ""
	if d, err := src.DescribeWorkflowExecution(ctx, wid, ""); err == nil {
		info := d.GetWorkflowExecutionInfo()
		if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			run = info.GetExecution().GetRunId()
			f.cov.seen = info.GetHistoryLength()
		}
	}
	go f.follow(ctx, src, wid, run)
	return f
}

// Ready is ready when the viewer should run the events query: history arrived that its last
// query may not have seen, or the safety poll's interval passed since that query.
func (f *Follower) Ready() <-chan struct{} { return f.ready }

// Querying tells f that the viewer is about to run the events query: it covers every history
// event f has seen so far. It restarts the safety poll's interval. The viewer calls done when
// the query has returned (or failed).
func (f *Follower) Querying() (done func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.ready:
	default:
	}
	f.cov.querying()
	f.inFlight++
	f.queried = time.Now()
	if f.byPoll {
		f.quiet = min(2*f.quiet, quietBackoff*f.every)
		f.byPoll = false
	}
	if f.ended || f.ctx.Err() != nil {
		f.timer.Stop() // a closed workflow journals nothing more
	} else {
		f.timer.Reset(f.quiet)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.inFlight--
			f.mu.Unlock()
			select {
			case f.idle <- struct{}{}:
			default:
			}
		})
	}
}

// waitQueries waits until the viewer has no query out; false: ctx ended.
func (f *Follower) waitQueries(ctx context.Context) bool {
	for {
		f.mu.Lock()
		n := f.inFlight
		f.mu.Unlock()
		if n == 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-f.idle:
		}
	}
}

// Ended reports whether the session's workflow has closed, with no run after it, and the
// viewer has queried since: nothing more will be journaled, and its last query saw it all.
func (f *Follower) Ended() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ended && !f.cov.stale()
}

// safetyPoll is the timer's callback: it wakes the viewer if the interval has passed since
// its last query. One that fired while Querying reset the timer finds it has not, and the
// timer Querying reset fires again in time.
func (f *Follower) safetyPoll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.queried) >= f.quiet {
		f.byPoll = true
		f.wake()
	}
}

func (f *Follower) wake() {
	select {
	case f.ready <- struct{}{}:
	default:
	}
}

// update applies fn to the cover and wakes the viewer if a query is due.
func (f *Follower) update(fn func(*cover)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.cov)
	if f.cov.stale() {
		f.quiet, f.byPoll = f.every, false
		f.wake()
	}
}

// Watch calls fn with every event after afterSeq, in order, until fn returns false, ctx
// ends, a query fails, or the session's workflow has closed and every event was handed over
// (then it returns nil). It queries when f says so. A gap (events dropped by retention) is
// reported to fn as an event of kind "gap".
func (f *Follower) Watch(ctx context.Context, afterSeq int64, fn func(signals.Event) bool) error {
	retry := followRetryFirst
	for {
		done := f.Querying()
		res, err := f.c.Events(ctx, f.id, afterSeq, 0)
		done()
		if err != nil {
			// A session's refusal (unknown, failed) and the caller's own end are answers; a
			// query cut short by the server (the worker that held the session's sticky
			// queue died under it, a restart) is not: a viewer outlives its workers.
			if ctx.Err() != nil || !transientQueryError(err) {
				return err
			}
			t := time.NewTimer(retry)
			retry = min(2*retry, followRetryMost)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
			continue
		}
		retry = followRetryFirst
		if res.Gap {
			if !fn(signals.Event{Seq: res.FirstRetainedSeq - 1, Kind: "gap"}) {
				return nil
			}
		}
		for _, ev := range res.Events {
			afterSeq = ev.Seq
			if !fn(ev) {
				return nil
			}
		}
		if len(res.Events) > 0 && afterSeq < res.LastSeq {
			continue // a page of a longer journal: read on
		}
		if f.Ended() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.ready:
		}
	}
}

// transientQueryError reports whether a failed query may answer if asked again: the server
// cut it short or could not reach a worker, not a refusal or an answer that does not decode.
func transientQueryError(err error) bool {
	var rej *signals.Rejection
	if errors.As(err, &rej) {
		return false
	}
	var canceled *serviceerror.Canceled
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	return errors.As(err, &canceled) || errors.As(err, &unavailable) || errors.As(err, &deadline) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Watch follows session sessionID (Follow) and calls fn with every event after afterSeq, as
// Follower.Watch does.
func (c *Client) Watch(ctx context.Context, sessionID string, afterSeq int64, fn func(signals.Event) bool) error {
	if err := signals.ValidateSessionID(sessionID); err != nil {
		return signals.Reject(signals.RejectInvalidRequest, "%v", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return c.Follow(ctx, sessionID).Watch(ctx, afterSeq, fn)
}

// Backoff of the history long poll after a failure (the server restarting, the network).
const (
	followRetryFirst = 100 * time.Millisecond
	followRetryMost  = 5 * time.Second
)

// follow reads the session's history, run after run, until ctx ends or the last run closed.
// run is the current run when Follow looked ("" when it does not know it).
func (f *Follower) follow(ctx context.Context, src historySource, wid, run string) {
	retry := followRetryFirst
	backOff := func() bool {
		t := time.NewTimer(retry)
		defer t.Stop()
		retry = min(2*retry, followRetryMost)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	read := "" // the run whose events the cover counts from its base
	for ctx.Err() == nil {
		if run == "" {
			d, err := src.DescribeWorkflowExecution(ctx, wid, "")
			if err != nil {
				if !backOff() {
					return
				}
				continue
			}
			info := d.GetWorkflowExecutionInfo()
			if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				f.end()
				return
			}
			run = info.GetExecution().GetRunId()
		}
		if run != read {
			if read != "" {
				f.update((*cover).nextRun)
			}
			read = run
		} else {
			f.update((*cover).reread)
		}
		next, err := f.readRun(ctx, src, wid, run)
		switch {
		case err != nil:
			// The run is read again from its start (its events already seen wake nobody).
			if !backOff() {
				return
			}
			run = ""
		case next != "":
			retry = followRetryFirst
			run = next
		default:
			// The run closed with no run after it (or its history ended without a close
			// event): the current run says whether the session goes on (a reset starts a
			// new one) or has ended.
			retry = followRetryFirst
			run = ""
		}
	}
}

// readRun long-polls one run's history until it closes; it returns the run that follows it
// (continue-as-new), if any.
func (f *Follower) readRun(ctx context.Context, src historySource, wid, run string) (next string, err error) {
	it := src.GetWorkflowHistory(ctx, wid, run, true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for {
		if !f.waitQueries(ctx) {
			return "", ctx.Err()
		}
		if !it.HasNext() {
			break
		}
		ev, err := it.Next()
		if err != nil {
			return "", err
		}
		f.update(func(c *cover) { c.event(ev) })
		if n, ok := closeOf(ev); ok {
			next = n
		}
	}
	return next, nil
}

// end records that the workflow closed for good: one last query is due.
func (f *Follower) end() {
	f.update(func(c *cover) {
		f.ended = true
		c.closed()
	})
}

// closeOf reports whether ev closes its run, and the run that follows it (continue-as-new, or
// a retry or cron run).
func closeOf(ev *historypb.HistoryEvent) (next string, ok bool) {
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
		return ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId(), true
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
		return ev.GetWorkflowExecutionCompletedEventAttributes().GetNewExecutionRunId(), true
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
		return ev.GetWorkflowExecutionFailedEventAttributes().GetNewExecutionRunId(), true
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
		return ev.GetWorkflowExecutionTimedOutEventAttributes().GetNewExecutionRunId(), true
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
		return "", true
	}
	return "", false
}

// cover is the follower's pure core. Fed a session's history events in order, run after
// run, it knows whether a query issued at some point has seen every change they stand for.
// Events are numbered by ordinal: a run's event id plus the run's base, the ordinal of the
// last event before it, so ordinals only grow along the chain of runs.
type cover struct {
	base    int64 // ordinal of the current run's event 0
	seen    int64 // the newest ordinal seen
	need    int64 // a query issued once this ordinal was seen covers every event seen
	queried int64 // seen when the viewer last started a query
	// result: the events since the last WorkflowTaskCompleted are what its commands wrote,
	// and resultOf is that task's WorkflowTaskScheduled ordinal.
	result   bool
	resultOf int64
}

// commandResults are the events a workflow task's completion writes for its commands and
// messages, right after its WorkflowTaskCompleted.
var commandResults = map[enumspb.EventType]bool{
	enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:                              true,
	enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED:                       true,
	enumspb.EVENT_TYPE_TIMER_STARTED:                                        true,
	enumspb.EVENT_TYPE_TIMER_CANCELED:                                       true,
	enumspb.EVENT_TYPE_MARKER_RECORDED:                                      true,
	enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:             true,
	enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:         true,
	enumspb.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: true,
	enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:                    true,
	enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:                         true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:                   true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:                  true,
	enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED:                            true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:                         true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:                            true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:                          true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:                  true,
}

// event takes the next history event of the current run.
func (c *cover) event(ev *historypb.HistoryEvent) {
	o := c.base + ev.GetEventId()
	need := o
	switch t := ev.GetEventType(); {
	case t == enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
		need = c.base + ev.GetWorkflowTaskStartedEventAttributes().GetScheduledEventId()
		c.result = false
	case t == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
		need = c.base + ev.GetWorkflowTaskCompletedEventAttributes().GetScheduledEventId()
		c.result, c.resultOf = true, need
	case c.result && commandResults[t]:
		need = c.resultOf
	default:
		c.result = false
	}
	c.seen = max(c.seen, o)
	c.need = max(c.need, need)
}

// nextRun starts the next run of the chain: its events come after everything seen.
func (c *cover) nextRun() {
	c.base, c.result = c.seen, false
}

// reread starts the current run again from its first event (after a failed long poll).
func (c *cover) reread() { c.result = false }

// closed records the chain's end, which asks for one last query.
func (c *cover) closed() {
	c.seen++
	c.need = c.seen
}

// querying records a query issued now.
func (c *cover) querying() { c.queried = c.seen }

// stale reports whether history seen since the last query asks for another.
func (c *cover) stale() bool { return c.need > c.queried }

package tacpclient

// Tests of following a session's history (follow.go): the cover core as tables of history
// events, and the Follower over a fake history source that long-polls the way the server
// does (an iterator that blocks until the run has more events or closes).

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// History events as the session workflow writes them.

func signaled(id int64) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventId: id, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED}
}

func taskScheduled(id int64) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventId: id, EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED}
}

func taskStarted(id, scheduled int64) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventId: id, EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED,
		Attributes: &historypb.HistoryEvent_WorkflowTaskStartedEventAttributes{
			WorkflowTaskStartedEventAttributes: &historypb.WorkflowTaskStartedEventAttributes{ScheduledEventId: scheduled}}}
}

func taskCompleted(id, scheduled int64) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventId: id, EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
		Attributes: &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{
			WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{ScheduledEventId: scheduled}}}
}

func ofType(id int64, t enumspb.EventType) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventId: id, EventType: t}
}

func continuedAsNew(id int64, next string) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventId: id, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionContinuedAsNewEventAttributes{
			WorkflowExecutionContinuedAsNewEventAttributes: &historypb.WorkflowExecutionContinuedAsNewEventAttributes{NewExecutionRunId: next}}}
}

// A turn_events batch: the signal and its workflow task, which journals the batch.
func batch(first int64) []*historypb.HistoryEvent {
	return []*historypb.HistoryEvent{signaled(first), taskScheduled(first + 1), taskStarted(first+2, first+1), taskCompleted(first+3, first+1)}
}

func TestCoverAskForAQueryOnlyForHistoryAQueryHasNotSeen(t *testing.T) {
	type step struct {
		events   []*historypb.HistoryEvent
		query    bool // the viewer queries after these events
		newRun   bool // the events are of the next run
		wantStal bool // a query is due after the events (before the step's own query)
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a signal asks for a query", []step{
			{events: batch(1)[:2], wantStal: true},
		}},
		{"the task of a batch a query waits for asks for nothing more", []step{
			{events: batch(1)[:2], wantStal: true, query: true},
			{events: batch(1)[2:3]},
			{events: batch(1)[3:]},
		}},
		{"a task scheduled after the query asks for another", []step{
			{events: []*historypb.HistoryEvent{signaled(1)}, wantStal: true, query: true},
			{events: []*historypb.HistoryEvent{taskScheduled(2)}, wantStal: true},
		}},
		{"what a task's commands wrote is covered with it", []step{
			{events: []*historypb.HistoryEvent{signaled(1), taskScheduled(2)}, wantStal: true, query: true},
			{events: []*historypb.HistoryEvent{taskStarted(3, 2), taskCompleted(4, 2),
				ofType(5, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
				ofType(6, enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED),
				ofType(7, enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES),
				ofType(8, enumspb.EVENT_TYPE_TIMER_STARTED)}},
		}},
		{"a signal written with a task's completion is new input", []step{
			{events: batch(1)[:2], wantStal: true, query: true},
			{events: []*historypb.HistoryEvent{taskStarted(3, 2), taskCompleted(4, 2), signaled(5), taskScheduled(6)}, wantStal: true},
		}},
		{"an update accepted by a task nobody saw scheduled asks for a query", []step{
			{events: batch(1), wantStal: true, query: true},
			// A speculative task is written only when it completes.
			{events: []*historypb.HistoryEvent{taskScheduled(5), taskStarted(6, 5), taskCompleted(7, 5),
				ofType(8, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED),
				ofType(9, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED)}, wantStal: true},
		}},
		{"results of other work ask for a query", []step{
			{events: batch(1), wantStal: true, query: true},
			{events: []*historypb.HistoryEvent{ofType(5, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)}, wantStal: true, query: true},
			{events: []*historypb.HistoryEvent{ofType(6, enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED)}, wantStal: true, query: true},
			{events: []*historypb.HistoryEvent{ofType(7, enumspb.EVENT_TYPE_TIMER_FIRED)}, wantStal: true, query: true},
			{events: []*historypb.HistoryEvent{ofType(8, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED)}, wantStal: true},
		}},
		{"a command result not right after its task's completion asks for a query", []step{
			{events: append(batch(1), signaled(5)), wantStal: true, query: true},
			{events: []*historypb.HistoryEvent{ofType(6, enumspb.EVENT_TYPE_TIMER_STARTED)}, wantStal: true},
		}},
		{"the next run's events come after the last run's", []step{
			{events: append(batch(1), continuedAsNew(5, "b")), wantStal: true, query: true},
			{newRun: true, events: []*historypb.HistoryEvent{ofType(1, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED)}, wantStal: true, query: true},
			{events: []*historypb.HistoryEvent{taskScheduled(2)}, wantStal: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c cover
			for i, s := range tc.steps {
				if s.newRun {
					c.nextRun()
				}
				for _, ev := range s.events {
					c.event(ev)
				}
				require.Equal(t, s.wantStal, c.stale(), "step %d", i+1)
				if s.query {
					c.querying()
					require.False(t, c.stale(), "step %d: a query covers everything seen", i+1)
				}
			}
		})
	}
}

func TestCoverRereadingARunWakesNobodyForWhatWasQueried(t *testing.T) {
	var c cover
	for _, ev := range batch(1) {
		c.event(ev)
	}
	c.querying()
	c.reread()
	for _, ev := range batch(1) {
		c.event(ev)
	}
	require.False(t, c.stale(), "events read again after a failed long poll")
	c.event(signaled(5))
	require.True(t, c.stale())
}

func TestCoverTheEndAsksForOneLastQuery(t *testing.T) {
	var c cover
	for _, ev := range batch(1) {
		c.event(ev)
	}
	c.querying()
	c.closed()
	require.True(t, c.stale())
	c.querying()
	require.False(t, c.stale())
}

// --- a fake history source ---

// fakeRun is one run's history as the server holds it.
type fakeRun struct {
	events []*historypb.HistoryEvent
	closed bool
}

// fakeHistory serves runs of one workflow: Describe names the current run, and a run's
// iterator long-polls it (HasNext blocks until the run has an event the iterator has not
// returned, or has closed).
type fakeHistory struct {
	mu      sync.Mutex
	changed *sync.Cond
	runs    map[string]*fakeRun
	current string
	fail    int // the next iterators' reads that fail
	blocked int // times an iterator waited with everything read (the follower took all)
}

func newFakeHistory(run string, events ...*historypb.HistoryEvent) *fakeHistory {
	h := &fakeHistory{runs: map[string]*fakeRun{run: {events: events}}, current: run}
	h.changed = sync.NewCond(&h.mu)
	return h
}

func (h *fakeHistory) append(events ...*historypb.HistoryEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.runs[h.current]
	r.events = append(r.events, events...)
	h.changed.Broadcast()
}

// continueAsNew closes the current run with ContinuedAsNew and starts next.
func (h *fakeHistory) continueAsNew(next string, events ...*historypb.HistoryEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.runs[h.current]
	r.events = append(r.events, continuedAsNew(int64(len(r.events)+1), next))
	r.closed = true
	h.runs[next] = &fakeRun{events: events}
	h.current = next
	h.changed.Broadcast()
}

// reset terminates the current run and starts next, as a workflow reset does (the closed
// run names no run after it).
func (h *fakeHistory) reset(next string, events ...*historypb.HistoryEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.runs[h.current]
	r.events = append(r.events, ofType(int64(len(r.events)+1), enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED))
	r.closed = true
	h.runs[next] = &fakeRun{events: events}
	h.current = next
	h.changed.Broadcast()
}

func (h *fakeHistory) close(ev *historypb.HistoryEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.runs[h.current]
	r.events = append(r.events, ev)
	r.closed = true
	h.changed.Broadcast()
}

func (h *fakeHistory) failNext(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fail += n
	h.changed.Broadcast()
}

// waitBlocked waits until an iterator has waited with everything read more than n times in
// all, and returns how many times it has.
func (h *fakeHistory) waitBlocked(t *testing.T, n int) int {
	t.Helper()
	var got int
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		got = h.blocked
		return got > n
	}, 5*time.Second, time.Millisecond)
	return got
}

func (h *fakeHistory) blockedCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.blocked
}

func (h *fakeHistory) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.runs[h.current]
	status := enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	if r.closed {
		status = enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{RunId: h.current}, Status: status, HistoryLength: int64(len(r.events)),
	}}, nil
}

func (h *fakeHistory) GetWorkflowHistory(ctx context.Context, _, run string, _ bool, _ enumspb.HistoryEventFilterType) client.HistoryEventIterator {
	it := &fakeIterator{h: h, ctx: ctx, run: run}
	context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.changed.Broadcast()
	})
	return it
}

var errLongPoll = errors.New("long poll failed")

type fakeIterator struct {
	h    *fakeHistory
	ctx  context.Context
	run  string
	next int
	err  error
}

func (it *fakeIterator) HasNext() bool {
	h := it.h
	h.mu.Lock()
	defer h.mu.Unlock()
	waited := false
	for {
		r := h.runs[it.run]
		switch {
		case it.ctx.Err() != nil:
			it.err = it.ctx.Err()
			return true
		case h.fail > 0:
			h.fail--
			it.err = errLongPoll
			return true
		case it.next < len(r.events):
			return true
		case r.closed:
			return false
		}
		if !waited {
			h.blocked++
			waited = true
		}
		h.changed.Wait()
	}
}

func (it *fakeIterator) Next() (*historypb.HistoryEvent, error) {
	if it.err != nil {
		return nil, it.err
	}
	h := it.h
	h.mu.Lock()
	defer h.mu.Unlock()
	ev := h.runs[it.run].events[it.next]
	it.next++
	return ev, nil
}

func readyNow(f *Follower) bool {
	select {
	case <-f.Ready():
		return true
	default:
		return false
	}
}

func waitReady(t *testing.T, f *Follower) {
	t.Helper()
	select {
	case <-f.Ready():
	case <-time.After(5 * time.Second):
		t.Fatal("the follower never said to query")
	}
}

// quietClient has a safety poll no test waits for.
var quietClient = &Client{SafetyPoll: time.Hour}

// followingRun is a follower of run "a" (its first batch in history) whose viewer has made
// its first query, blocked on its long poll: n is the long polls it has sent.
func followingRun(t *testing.T) (f *Follower, h *fakeHistory, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h = newFakeHistory("a", batch(1)...)
	f = newFollower(ctx, quietClient, h, "s")
	f.Querying()() // the viewer's first query
	return f, h, h.waitBlocked(t, 0)
}

// The tests below wait, after each change of the history, until the follower has read all
// of it (its iterator blocks for more), and only then look at Ready.

func TestFollowerWakesOnNewHistoryAndNotForWhatItsViewerHasSeen(t *testing.T) {
	f, h, n := followingRun(t)
	require.False(t, readyNow(f), "history written before the first query wakes nobody")

	h.append(batch(5)[:2]...) // a turn_events signal
	n = h.waitBlocked(t, n)
	require.True(t, readyNow(f))
	f.Querying()()
	h.append(batch(5)[2:]...) // the task that journals it, which the query waited for
	n = h.waitBlocked(t, n)
	require.False(t, readyNow(f), "the batch's own workflow task asks for no second query")

	h.append(signaled(9), taskScheduled(10))
	h.waitBlocked(t, n)
	require.True(t, readyNow(f))
}

func TestFollowerSendsNoLongPollWhileAQueryIsOut(t *testing.T) {
	f, h, n := followingRun(t)
	h.append(batch(5)[:2]...) // a signal
	n = h.waitBlocked(t, n)
	require.True(t, readyNow(f))
	done := f.Querying()      // the query waits for the signal's task...
	h.append(batch(5)[2:]...) // ...which starts and completes meanwhile
	h.append(signaled(9), taskScheduled(10))
	require.Never(t, func() bool { return h.blockedCount() > n }, 50*time.Millisecond, 5*time.Millisecond,
		"the follower reads nothing while the query is out")
	require.False(t, readyNow(f))
	done()
	h.waitBlocked(t, n) // it reads all of it at once
	require.True(t, readyNow(f), "the signal that came during the query asks for the next one")
}

func TestFollowerFollowsContinueAsNewToTheNextRun(t *testing.T) {
	f, h, n := followingRun(t)
	for _, run := range []string{"b", "c", "d"} {
		h.continueAsNew(run, ofType(1, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED), taskScheduled(2))
		n = h.waitBlocked(t, n)
		require.True(t, readyNow(f), "run %s started", run)
		f.Querying()()
		h.append(taskStarted(3, 2), taskCompleted(4, 2))
		n = h.waitBlocked(t, n)
		require.False(t, readyNow(f), "run %s: the task its query waited for", run)
		h.append(batch(5)...)
		n = h.waitBlocked(t, n)
		require.True(t, readyNow(f), "run %s: a batch", run)
		f.Querying()()
	}
	require.False(t, f.Ended())
}

func TestFollowerFollowsARunThatANamelessCloseLeadsTo(t *testing.T) {
	f, h, n := followingRun(t)
	h.reset("b", batch(1)...)
	n = h.waitBlocked(t, n)
	require.True(t, readyNow(f))
	f.Querying()()
	require.False(t, f.Ended(), "the session goes on in the new run")
	h.append(batch(5)[:2]...)
	h.waitBlocked(t, n)
	require.True(t, readyNow(f))
}

func TestFollowerEndsWhenTheLastRunCloses(t *testing.T) {
	f, h, _ := followingRun(t)
	h.close(ofType(5, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED))
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.ended
	}, 5*time.Second, time.Millisecond)
	require.True(t, readyNow(f))
	require.False(t, f.Ended(), "not before the viewer's last query")
	f.Querying()()
	require.True(t, f.Ended())
}

func TestFollowerOfAClosedSessionAsksForOneQueryAndEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newFakeHistory("a", batch(1)...)
	h.close(ofType(5, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED))
	f := newFollower(ctx, quietClient, h, "s")
	f.Querying()()
	waitReady(t, f)
	f.Querying()()
	require.True(t, f.Ended())
}

func TestFollowerReadsTheRunAgainAfterAFailedLongPoll(t *testing.T) {
	f, h, n := followingRun(t)
	h.failNext(1)
	n = h.waitBlocked(t, n) // read again from the run's start, after its back-off
	require.False(t, readyNow(f), "events read again wake nobody")
	h.append(batch(5)[:2]...)
	h.waitBlocked(t, n)
	require.True(t, readyNow(f))
}

func TestFollowerSafetyPollAsksForAQueryWhenNothingHappens(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newFakeHistory("a", batch(1)...)
	f := newFollower(ctx, &Client{SafetyPoll: 20 * time.Millisecond}, h, "s")
	for range 3 {
		start := time.Now() // before Querying: the interval starts inside it
		f.Querying()()
		waitReady(t, f)
		require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond, "not before the interval")
	}
	require.Equal(t, 1, h.blockedCount(), "the history did not move")
}

// While nothing happens each safety poll doubles the next interval, up to quietBackoff
// times the shortest; history that wakes the follower brings the shortest back.
func TestFollowerSafetyPollStretchesWhileNothingHappens(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newFakeHistory("a", batch(1)...)
	every := 5 * time.Millisecond
	f := newFollower(ctx, &Client{SafetyPoll: every}, h, "s")
	interval := func() time.Duration {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.quiet
	}
	f.Querying()()
	h.waitBlocked(t, 0)
	var got []time.Duration
	for range 6 {
		waitReady(t, f) // the safety poll's wake: the history did not move
		f.Querying()()
		got = append(got, interval())
	}
	require.Equal(t, []time.Duration{2 * every, 4 * every, 8 * every, 16 * every, 16 * every, 16 * every}, got)
	h.append(batch(5)[:2]...) // a signal: the history asks for a query
	require.Eventually(t, func() bool { return interval() == every }, time.Minute, time.Millisecond,
		"the history woke the follower: the shortest interval again")
	waitReady(t, f)
	f.Querying()()
	require.Equal(t, every, interval(), "a query the history asked for stretches nothing")
}

// A safety poll's timer that fired just before the viewer's query reset it (its callback
// still on its way, as on a loaded machine) must not wake the viewer early.
func TestFollowerSafetyPollThatFiredBeforeAQueryWakesNobody(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newFakeHistory("a", batch(1)...)
	f := newFollower(ctx, &Client{SafetyPoll: time.Hour}, h, "s")
	f.Querying()()
	f.safetyPoll() // the callback of a timer that fired before Querying reset it
	require.False(t, readyNow(f), "the interval has not passed since the query")
	f.mu.Lock()
	f.queried = time.Now().Add(-time.Hour)
	f.mu.Unlock()
	f.safetyPoll()
	require.True(t, readyNow(f), "the interval has passed since the query")
}

func TestFollowerStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h := newFakeHistory("a", batch(1)...)
	f := newFollower(ctx, &Client{SafetyPoll: 10 * time.Millisecond}, h, "s")
	f.Querying()()
	h.waitBlocked(t, 0)
	cancel()
	f.Querying()() // drains anything pending
	require.Never(t, func() bool { return readyNow(f) }, 50*time.Millisecond, 5*time.Millisecond,
		"no safety poll after the context ended")
}

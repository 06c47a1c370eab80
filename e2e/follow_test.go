package e2e

// Viewers that wake on history (tacpclient.Follower, issue 18): a viewer long-polls the
// session's workflow history and runs the events query only when the history grew. These
// tests prove the two halves: every event of a stream reaches such a viewer exactly once
// while the session continues as new several times (with a safety poll too slow to help),
// and a watched session that does nothing is not queried at all, while its history long
// poll expires and is sent again.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/grpc"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

// seqRecorder collects the events one viewer was handed.
type seqRecorder struct {
	mu     sync.Mutex
	events []signals.Event
}

func (r *seqRecorder) add(ev signals.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *seqRecorder) got() []signals.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]signals.Event(nil), r.events...)
}

func (r *seqRecorder) has(match func(signals.Event) bool) bool {
	for _, ev := range r.got() {
		if match(ev) {
			return true
		}
	}
	return false
}

func TestFollowingViewersSeeEveryEventOnceAcrossContinueAsNew(t *testing.T) {
	t.Parallel()
	id := session(t)
	const n = 400
	// A tiny run budget forces several continue-as-new while the turn streams.
	cfg := signals.SessionConfig{SessionID: id, MaxRunEvents: 80}
	_, err := sc.Start(ctxFor(t, 30*time.Second), cfg, signals.AttachRequest{})
	require.NoError(t, err)

	// Both viewers have a safety poll far beyond the test: what they see, the history's
	// wake-ups brought them.
	ctx := ctxFor(t, 2*time.Minute)
	isEnd := func(ev signals.Event) bool { return ev.TurnID == 1 && signals.IsTerminal(ev.Kind) }
	viewer := &tacpclient.Client{Temporal: tc, TaskQueue: sc.TaskQueue, SafetyPoll: time.Hour}
	var watched seqRecorder
	watchErr := make(chan error, 1)
	go func() {
		watchErr <- viewer.Watch(ctx, id, 0, func(ev signals.Event) bool {
			watched.add(ev)
			return !isEnd(ev)
		})
	}()

	// starter tail --follow, the CLI's viewer, in its own process.
	tctx, stopTail := context.WithCancel(ctx)
	defer stopTail()
	tail := starterCmd(tctx, "tail", "--session", id, "--follow", "--json")
	tail.Env = append(tail.Env, "TACP_SAFETY_POLL=1h")
	stdout, err := tail.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, tail.Start())
	var tailed seqRecorder
	tailDone := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev signals.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				tailDone <- fmt.Errorf("tail printed %q: %w", sc.Text(), err)
				return
			}
			tailed.add(ev)
		}
		tailDone <- sc.Err()
	}()

	// Both follow the session before the turn starts.
	started := func(ev signals.Event) bool { return ev.Kind == signals.EventSessionStarted }
	require.Eventually(t, func() bool { return watched.has(started) && tailed.has(started) }, time.Minute, 10*time.Millisecond)
	prompt(t, cfg, fmt.Sprintf("/chunks %d every 10ms", n))

	select {
	case err := <-watchErr:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatalf("the viewer never saw the turn end; it saw %d events", len(watched.got()))
	}
	require.Eventually(t, func() bool { return tailed.has(isEnd) }, time.Minute, 10*time.Millisecond,
		"tail --follow sees the turn end")
	stopTail()
	<-tailDone

	st, err := sc.Status(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	require.Greater(t, st.Run, 2, "the session continued as new several times while it streamed")
	var want []string
	for i := 1; i <= n; i++ {
		want = append(want, fmt.Sprintf("chunk %d\n", i))
	}
	for name, evs := range map[string][]signals.Event{"Watch": watched.got(), "tail --follow": tailed.got()} {
		end := 0
		for end < len(evs) && !isEnd(evs[end]) {
			end++
		}
		require.Less(t, end, len(evs), "%s: saw the turn end", name)
		evs = evs[:end+1]
		checkInvariants(t, evs) // seq contiguous from 1: none lost, none twice
		require.Equal(t, want, agentTexts(t, evs, 1), "%s: every chunk once, in order, across %d runs", name, st.Run)
	}
	t.Logf("%d chunks in %d runs", n, st.Run)
}

// queryCounter is a worker interceptor that counts the queries one workflow id is asked.
type queryCounter struct {
	interceptor.InterceptorBase
	workflowID string
	events     atomic.Int64 // events queries
	all        atomic.Int64 // queries of any type
}

func (q *queryCounter) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &queryCounting{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, q: q}
}

type queryCounting struct {
	interceptor.WorkflowInboundInterceptorBase
	q *queryCounter
}

func (c *queryCounting) HandleQuery(ctx workflow.Context, in *interceptor.HandleQueryInput) (any, error) {
	if workflow.GetInfo(ctx).WorkflowExecution.ID == c.q.workflowID {
		c.q.all.Add(1)
		if in.QueryType == signals.QueryEvents {
			c.q.events.Add(1)
		}
	}
	return c.Next.HandleQuery(ctx, in)
}

// longPollCounter counts a client's history long polls of one workflow id, and when the
// last one was sent.
type longPollCounter struct {
	workflowID string
	mu         sync.Mutex
	n          int
	last       time.Time
}

func (l *longPollCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if r, ok := req.(*workflowservice.GetWorkflowExecutionHistoryRequest); ok && r.GetWaitNewEvent() && r.GetExecution().GetWorkflowId() == l.workflowID {
		l.mu.Lock()
		l.n++
		l.last = time.Now()
		l.mu.Unlock()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (l *longPollCounter) count() (int, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, l.last
}

func TestAnIdleFollowedSessionIsNotQueried(t *testing.T) {
	t.Parallel()
	// The server answers a history long poll with nothing after 20 s (Temporal's
	// history.longPollExpirationInterval) and the follower sends it again. The safety poll
	// is longer: in between, a watched idle session must cost no query at all, for a minute
	// (three long polls) here.
	const safety, idleFor = 75 * time.Second, time.Minute
	id := session(t)
	wid := signals.SessionWorkflowID(id)
	ctx := ctxFor(t, 4*time.Minute)

	// A worker of its own, counting the queries its session is asked.
	queries := &queryCounter{workflowID: wid}
	wc, err := srv.NewClient(ctx, client.Options{Interceptors: []interceptor.ClientInterceptor{queries}})
	require.NoError(t, err)
	defer wc.Close()
	queue := "tacp-e2e-idle-" + signals.NewID()[:8]
	w, err := tacpworker.Start(wc, tacpworker.Options{
		TaskQueue: queue,
		Agent:     fmt.Sprintf("%s -transcripts %s", testagent, filepath.Join(dataDir, "transcripts-idle")),
		DataDir:   filepath.Join(dataDir, "idle"),
	})
	require.NoError(t, err)
	defer w.Stop()
	own := tacpclient.NewClient(wc, queue)
	cfg := signals.SessionConfig{SessionID: id}
	_, err = own.Prompt(ctx, cfg, signals.PromptRequest{Text: "/chunks 2", ClientMessageID: signals.NewID()})
	require.NoError(t, err)
	// Idle for the server too: the turn ended, no activity or task pending, history still.
	turnEnd(t, id, 1)
	require.Eventually(t, func() bool {
		d, err := wc.DescribeWorkflowExecution(ctx, wid, "")
		return err == nil && d.GetPendingWorkflowTask() == nil && len(d.GetPendingChildren()) == 0 && len(d.GetPendingActivities()) == 0
	}, time.Minute, 20*time.Millisecond)

	// The viewer, on a connection that counts its history long polls.
	polls := &longPollCounter{workflowID: wid}
	vc, err := srv.NewClient(ctx, client.Options{ConnectionOptions: client.ConnectionOptions{
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(polls.intercept)},
	}})
	require.NoError(t, err)
	defer vc.Close()
	viewer := &tacpclient.Client{Temporal: vc, TaskQueue: queue, SafetyPoll: safety}
	var seen seqRecorder
	go func() {
		_ = viewer.Watch(ctx, id, 0, func(ev signals.Event) bool { seen.add(ev); return true })
	}()
	isEnd := func(ev signals.Event) bool { return ev.TurnID == 1 && signals.IsTerminal(ev.Kind) }
	require.Eventually(t, func() bool { return seen.has(isEnd) }, time.Minute, 10*time.Millisecond, "the viewer caught up")
	caughtUp := time.Now()
	// The follower has read the history and waits: its long poll is out.
	require.Eventually(t, func() bool { n, _ := polls.count(); return n >= 2 }, time.Minute, 10*time.Millisecond)
	before, allBefore := queries.events.Load(), queries.all.Load()
	eventsBefore := len(seen.got())
	nBefore, _ := polls.count()

	// Idle for a minute: the long poll expires and is sent again, and no query is asked
	// meanwhile.
	require.Eventually(t, func() bool { n, last := polls.count(); return n > nBefore && last.Sub(caughtUp) >= idleFor }, safety, 100*time.Millisecond,
		"the history long poll expired and was sent again for a minute")
	_, again := polls.count()
	require.Equal(t, allBefore, queries.all.Load(), "no query of any kind")
	require.Equal(t, before, queries.events.Load(), "no events query while nothing happened (%s idle, long poll sent again)", again.Sub(caughtUp).Round(time.Second))
	require.Less(t, again.Sub(caughtUp), safety, "the window is shorter than the safety poll")
	require.Len(t, seen.got(), eventsBefore)

	// The counter counts: the safety poll's query arrives once its interval has passed.
	require.Eventually(t, func() bool { return queries.events.Load() == before+1 }, safety, 100*time.Millisecond,
		"the safety poll queries")
	require.GreaterOrEqual(t, time.Since(caughtUp), safety-time.Second, "…and not before its interval")
	require.Equal(t, allBefore+1, queries.all.Load(), "one query: the safety poll's")

	// And a session that does something wakes its viewer at once, long before the next
	// safety poll.
	woke := time.Now()
	_, err = own.Prompt(ctx, cfg, signals.PromptRequest{Text: "/chunks 1", ClientMessageID: signals.NewID()})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return seen.has(func(ev signals.Event) bool { return ev.TurnID == 2 && signals.IsTerminal(ev.Kind) })
	}, safety/2, 10*time.Millisecond, "a new turn reaches the viewer through the history, not the safety poll")
	t.Logf("idle window %s with no query; the new turn reached the viewer in %s", again.Sub(caughtUp).Round(time.Second), time.Since(woke).Round(time.Millisecond))
	closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = own.Close(closeCtx, id, signals.CloseRequest{})
}

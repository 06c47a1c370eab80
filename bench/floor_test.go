package bench

// Two instruments of the event-path figures: the floor of "journaled before anyone sees it"
// (one signal, the workflow task that records it, one query that reads it, on a plain SDK
// client against a workflow that does nothing else), and a count of the queries the bench's
// workers answer, by workflow id (a worker interceptor), which tells what a viewer costs.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
)

const (
	floorSignal = "floor"
	floorQuery  = "floor"
	floorPrompt = "prompt"
	// floorHostQueue is the first-token floor's "agent host": its activity runs on a queue
	// of its own, as a turn runs on its agent's host queue, not its session's.
	floorHostQueue = "bench-floor-host"
)

// FloorWorkflow counts the floor signals it gets; its query returns the count.
func FloorWorkflow(ctx workflow.Context) error {
	n := 0
	if err := workflow.SetQueryHandler(ctx, floorQuery, func() (int, error) { return n, nil }); err != nil {
		return err
	}
	ch := workflow.GetSignalChannel(ctx, floorSignal)
	for {
		ch.Receive(ctx, nil)
		n++
	}
}

// measureFloor starts a FloorWorkflow and times n rounds of: signal, then query until the
// query shows it (the first query nearly always does: it waits for the pending task).
func measureFloor(ctx context.Context, c client.Client, n int) ([]time.Duration, error) {
	id := "bench-floor-" + signals.NewID()
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: noopQueue}, FloorWorkflow); err != nil {
		return nil, err
	}
	defer func() { _ = c.TerminateWorkflow(context.Background(), id, "", "bench done") }()
	var out []time.Duration
	for i := 1; i <= n+1; i++ { // the first round, which waits for the first task, is untimed
		start := time.Now()
		if err := c.SignalWorkflow(ctx, id, "", floorSignal, nil); err != nil {
			return nil, err
		}
		for {
			v, err := c.QueryWorkflow(ctx, id, "", floorQuery)
			if err != nil {
				return nil, fmt.Errorf("floor query: %w", err)
			}
			var got int
			if err := v.Get(&got); err != nil {
				return nil, err
			}
			if got >= i {
				break
			}
		}
		if i > 1 {
			out = append(out, time.Since(start))
		}
	}
	return out, nil
}

// FirstTokenFloorWorkflow is the shape of a first token through tacp and nothing else: an
// update (the prompt) whose workflow task schedules an activity on another queue (the turn
// on its agent's host), whose first act is a signal (the first chunk's batch), recorded by
// a workflow task, read by a query. Its query returns the signals counted.
func FirstTokenFloorWorkflow(ctx workflow.Context) error {
	chunks, prompts, started := 0, 0, 0
	if err := workflow.SetQueryHandler(ctx, floorQuery, func() (int, error) { return chunks, nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, floorPrompt, func(workflow.Context) (int, error) {
		prompts++
		return prompts, nil
	}); err != nil {
		return err
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		ch := workflow.GetSignalChannel(ctx, floorSignal)
		for {
			ch.Receive(ctx, nil)
			chunks++
		}
	})
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: floorHostQueue, StartToCloseTimeout: time.Minute})
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	for {
		if err := workflow.Await(ctx, func() bool { return prompts > started }); err != nil {
			return err
		}
		started++
		f := workflow.ExecuteActivity(actx, (*floorHost).FloorTurn, id)
		workflow.Go(ctx, func(ctx workflow.Context) { _ = f.Get(ctx, nil) })
	}
}

// floorHost runs the first-token floor's turn: it signals its workflow at once.
type floorHost struct{ c client.Client }

func (h *floorHost) FloorTurn(ctx context.Context, workflowID string) error {
	return h.c.SignalWorkflow(ctx, workflowID, "", floorSignal, nil)
}

// ttftFloor is a FirstTokenFloorWorkflow measured round by round, beside the rounds of a
// real agent (firsttoken_test.go).
type ttftFloor struct {
	c      client.Client
	id     string
	rounds int
}

// startTTFTFloor starts a FirstTokenFloorWorkflow and runs its first round untimed (it
// waits for the workflow's first task).
func startTTFTFloor(ctx context.Context, c client.Client) (*ttftFloor, error) {
	f := &ttftFloor{c: c, id: "bench-floor-ttft-" + signals.NewID()}
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: f.id, TaskQueue: noopQueue}, FirstTokenFloorWorkflow); err != nil {
		return nil, err
	}
	if _, err := f.round(ctx); err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

func (f *ttftFloor) close() {
	_ = f.c.TerminateWorkflow(context.Background(), f.id, "", "bench done")
}

// round times one first token at the floor: the prompt update, then the query until it
// shows the round's signal (asked again at once: a viewer could not learn sooner).
func (f *ttftFloor) round(ctx context.Context) (time.Duration, error) {
	f.rounds++
	start := time.Now()
	h, err := f.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: f.id, UpdateName: floorPrompt, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err != nil {
		return 0, err
	}
	if err := h.Get(ctx, nil); err != nil {
		return 0, err
	}
	for {
		v, err := f.c.QueryWorkflow(ctx, f.id, "", floorQuery)
		if err != nil {
			return 0, fmt.Errorf("first-token floor query: %w", err)
		}
		var got int
		if err := v.Get(&got); err != nil {
			return 0, err
		}
		if got >= f.rounds {
			return time.Since(start), nil
		}
	}
}

// queryCounter is a worker interceptor (through the client's interceptors) that counts the
// queries each workflow id is asked, by query type.
type queryCounter struct {
	interceptor.InterceptorBase
	mu sync.Mutex
	n  map[string]map[string]int64 // workflow id → query type → count
}

func newQueryCounter() *queryCounter { return &queryCounter{n: map[string]map[string]int64{}} }

func (q *queryCounter) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &countingInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, q: q}
}

// count returns how many queries of type typ the sessions ids were asked.
func (q *queryCounter) count(typ string, ids ...string) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	var n int64
	for _, id := range ids {
		n += q.n[signals.SessionWorkflowID(id)][typ]
	}
	return n
}

// all returns how many queries of any type session id was asked.
func (q *queryCounter) all(id string) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	var n int64
	for _, c := range q.n[signals.SessionWorkflowID(id)] {
		n += c
	}
	return n
}

type countingInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	q *queryCounter
}

func (c *countingInbound) HandleQuery(ctx workflow.Context, in *interceptor.HandleQueryInput) (any, error) {
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	c.q.mu.Lock()
	if c.q.n[id] == nil {
		c.q.n[id] = map[string]int64{}
	}
	c.q.n[id][in.QueryType]++
	c.q.mu.Unlock()
	return c.Next.HandleQuery(ctx, in)
}

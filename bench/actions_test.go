package bench

// Temporal Cloud's billable actions of tacp's workflows, counted from their real histories
// (issue 28): what a short prompt, a minute of a streaming reply and an idle day of a
// session cost, and the price that implies at a rate per million actions.
//
// What counts as an action is Temporal Cloud's published list, read off each history event
// by tacpclient.ActionCounter (the rule `starter status --actions` counts by). Besides:
//
//   - activity heartbeats that reach the server: not in any history, counted as the worker's
//     RecordActivityHeartbeat calls (a gRPC interceptor on its client);
//   - queries: the published list bills every query a worker receives; the events queries a
//     viewer sends are counted by the bench's worker interceptor and shown apart.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/grpc"

	"github.com/tacp-dev/tacp/internal/testkit/fakemodel"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

// defaultPricePerM is the price per million actions the table uses unless
// TACP_BENCH_PRICE_PER_M says otherwise: Temporal Cloud's published list price of its first
// tier (USD).
const defaultPricePerM = 50.0

// actionCount is the history and the actions of some span of a session.
type actionCount struct {
	events                    float64 // the session's history events
	starts, signals, updates  float64
	timers, activities, other float64 // other: upserts, side effects, local activities
	heartbeats, queries       float64
	signalsByName             map[string]float64
	eventsByType              map[string]float64
}

func (a actionCount) billedNoQueries() float64 {
	return a.starts + a.signals + a.updates + a.timers + a.activities + a.other + a.heartbeats
}

func (a actionCount) billed() float64 { return a.billedNoQueries() + a.queries }

// scale is a with every count times k (per prompt, per minute, per day).
func (a actionCount) scale(k float64) actionCount {
	b := a
	for _, p := range []*float64{&b.events, &b.starts, &b.signals, &b.updates, &b.timers, &b.activities, &b.other, &b.heartbeats, &b.queries} {
		*p *= k
	}
	b.signalsByName, b.eventsByType = map[string]float64{}, map[string]float64{}
	for k2, v := range a.signalsByName {
		b.signalsByName[k2] = v * k
	}
	for k2, v := range a.eventsByType {
		b.eventsByType[k2] = v * k
	}
	return b
}

func (a actionCount) div(n float64) actionCount { return a.scale(1 / n) }

// minus is a − b, count by count (a streaming turn beyond a short one).
func (a actionCount) minus(b actionCount) actionCount {
	c := a
	for _, p := range []struct {
		x *float64
		y float64
	}{
		{&c.events, b.events}, {&c.starts, b.starts}, {&c.signals, b.signals},
		{&c.updates, b.updates}, {&c.timers, b.timers}, {&c.activities, b.activities}, {&c.other, b.other},
		{&c.heartbeats, b.heartbeats}, {&c.queries, b.queries},
	} {
		*p.x -= p.y
	}
	return c
}

// countEvents reads one workflow's history from event afterID of runID on (following
// continue-as-new) into a.
func countEvents(ctx context.Context, a *actionCount, workflowID, runID string, afterID int64) error {
	if a.signalsByName == nil {
		a.signalsByName, a.eventsByType = map[string]float64{}, map[string]float64{}
	}
	// runID "" reads the current run of a workflow that does not continue as new.
	for {
		next := ""
		var n tacpclient.ActionCounter
		n.NextRun()
		it := env.c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return fmt.Errorf("history of %s: %w", workflowID, err)
			}
			if ev.GetEventId() <= afterID {
				continue
			}
			n.Add(ev)
			a.eventsByType[strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_")]++
			if c := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); c != nil {
				next = c.GetNewExecutionRunId()
			}
		}
		a.events += float64(n.HistoryEvents)
		a.starts += float64(n.Starts)
		a.signals += float64(n.Signals)
		a.updates += float64(n.Updates)
		a.timers += float64(n.Timers)
		a.activities += float64(n.Activities)
		a.other += float64(n.Other)
		for name, k := range n.SignalsByName {
			a.signalsByName[name] += float64(k)
		}
		if runID == "" || next == "" {
			return nil
		}
		runID, afterID = next, 0
	}
}

// costSince is the history and actions of session s since from, its turns' RunTurn
// activities included (queries and heartbeats are the caller's to fill in).
func costSince(ctx context.Context, s *tacpSession, from runMark) (actionCount, error) {
	var a actionCount
	err := countEvents(ctx, &a, signals.SessionWorkflowID(s.id), from.runID, from.length)
	return a, err
}

// rpcCounter counts a client's gRPC calls by method.
type rpcCounter struct {
	mu sync.Mutex
	n  map[string]int64
}

func (r *rpcCounter) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	r.mu.Lock()
	r.n[method[strings.LastIndexByte(method, '/')+1:]]++
	r.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// heartbeats is the activity heartbeats sent so far.
func (r *rpcCounter) heartbeats() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n["RecordActivityHeartbeat"] + r.n["RecordActivityHeartbeatById"]
}

// countedClient is a client of the bench's server of its own (closed when t ends) that
// counts its gRPC calls and, like the fixture's, the queries its workers answer.
func countedClient(ctx context.Context, t testing.TB) (client.Client, *rpcCounter) {
	t.Helper()
	r := &rpcCounter{n: map[string]int64{}}
	opts := client.Options{
		Logger:            sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		Interceptors:      []interceptor.ClientInterceptor{env.queries},
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(r.unary)}},
	}
	var c client.Client
	var err error
	if addr := os.Getenv("TACP_BENCH_ADDRESS"); addr != "" {
		opts.HostPort, opts.Namespace = addr, orDefault(os.Getenv("TACP_BENCH_NAMESPACE"), "default")
		c, err = client.DialContext(ctx, opts)
	} else {
		c, err = env.srv.NewClient(ctx, opts)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, r
}

// streamCost is a streaming reply through the gateway: its length and its cost beyond a
// short prompt's.
type streamCost struct {
	seconds float64
	chunks  int
	// runs is the session runs the reply crossed into (continue-as-new: the next run adopts
	// the turn's attempt), restarts its turn.restarted events (an attempt that was not
	// adopted started over: its chunks streamed again).
	runs, restarts int
	total          actionCount // the streaming turn
	perMin         actionCount // (total − a short prompt) per minute of streaming
}

// measureStreamCost streams a reply of TACP_BENCH_STREAM_SECONDS (one chunk every
// fm.ChunkDelay: the fake model's `slow:`) through the gateway g and counts what it cost
// beyond a short prompt (perPrompt), per minute of streaming.
func measureStreamCost(ctx context.Context, t *testing.T, s *tacpSession, g *acpPeer, fm *fakemodel.Server, rpcs *rpcCounter, perPrompt actionCount) *streamCost {
	secs := envInt(t, "TACP_BENCH_STREAM_SECONDS", 60)
	c := &streamCost{chunks: int(time.Duration(secs) * time.Second / fm.ChunkDelay)}
	from, err := settleGateway(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	q0, b0, seq0 := env.queries.count(signals.QueryEvents, s.id), rpcs.heartbeats(), s.lastSeq
	start := time.Now()
	if _, err := g.prompt(ctx, fmt.Sprintf("slow: %d tick", c.chunks)); err != nil {
		t.Fatal(err)
	}
	c.seconds = time.Since(start).Seconds()
	if _, err := settleGateway(ctx, s); err != nil {
		t.Fatal(err)
	}
	if c.total, err = costSince(ctx, s, from); err != nil {
		t.Fatal(err)
	}
	c.runs = int(c.total.starts)
	for _, ev := range journalTail(ctx, s, seq0) {
		if ev.Kind == signals.EventTurnRestarted {
			c.restarts++
		}
	}
	c.total.queries = float64(env.queries.count(signals.QueryEvents, s.id) - q0)
	c.total.heartbeats = float64(rpcs.heartbeats() - b0)
	c.perMin = c.total.minus(perPrompt).scale(60 / c.seconds)
	return c
}

// measureIdleCost lets the gateway's session s (its client attached, renewing its viewer
// lease) and a session nobody watches idle for TACP_BENCH_IDLE_SECONDS and scales what they
// cost to a day.
func measureIdleCost(ctx context.Context, t *testing.T, s *tacpSession, sc *tacpclient.Client) *idleCost {
	window := time.Duration(envInt(t, "TACP_BENCH_IDLE_SECONDS", 120)) * time.Second
	alone := &tacpSession{sc: sc, id: "bench-idle-" + signals.NewID()}
	if _, err := sc.Start(ctx, signals.SessionConfig{SessionID: alone.id}, signals.AttachRequest{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sc.Close(context.Background(), alone.id, signals.CloseRequest{Reason: "bench"}) })
	if _, err := sc.Events(ctx, alone.id, 0, 1); err != nil { // its first task has run
		t.Fatal(err)
	}
	fromA, err := settleGateway(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	fromB, err := alone.settle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	qa, qb := env.queries.count(signals.QueryEvents, s.id), env.queries.count(signals.QueryEvents, alone.id)
	start := time.Now()
	sleepCtx(ctx, window)
	took := time.Since(start)
	c := &idleCost{seconds: took.Seconds()}
	if c.attachedObserved, err = costSince(ctx, s, fromA); err != nil {
		t.Fatal(err)
	}
	c.attachedObserved.queries = float64(env.queries.count(signals.QueryEvents, s.id) - qa)
	b, err := costSince(ctx, alone, fromB)
	if err != nil {
		t.Fatal(err)
	}
	b.queries = float64(env.queries.count(signals.QueryEvents, alone.id) - qb)
	day := float64(24*time.Hour) / float64(took)
	c.attached, c.alone = c.attachedObserved.scale(day), b.scale(day)
	return c
}

// idleCost is an idle window of a session with the gateway attached and of one nobody
// watches, scaled to a day.
type idleCost struct {
	seconds          float64
	attached, alone  actionCount // per day
	attachedObserved actionCount // the window itself
}

func printCostTable(t testing.TB, figs []ttftFigures) {
	price := defaultPricePerM
	if v, err := strconv.ParseFloat(os.Getenv("TACP_BENCH_PRICE_PER_M"), 64); err == nil && v > 0 {
		price = v
	}
	fmt.Printf("History and Temporal Cloud billable actions (at $%.0f per million actions, the published list price of the first tier; TACP_BENCH_PRICE_PER_M sets another)\n", price)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "span\tsession events\tstarts\tsignals\tupdates\ttimers\tactivities\tother\theartbeats\tactions w/o queries\tqueries\tactions\tUSD per million spans (w/o queries)")
	row := func(name string, a actionCount) {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f (%.0f)\n", name,
			a.events, a.starts, a.signals, a.updates, a.timers, a.activities, a.other, a.heartbeats,
			a.billedNoQueries(), a.queries, a.billed(), a.billed()*price, a.billedNoQueries()*price)
	}
	for _, f := range figs {
		row("short prompt, "+f.agent, f.perPrompt)
	}
	for _, f := range figs {
		if f.stream != nil {
			row(fmt.Sprintf("streamed minute beyond a prompt, %s (%.0f s, %d chunks, %d continue-as-new, %d restarts)",
				f.agent, f.stream.seconds, f.stream.chunks, f.stream.runs, f.stream.restarts), f.stream.perMin)
		}
		if f.idle != nil {
			row(fmt.Sprintf("idle day, `starter acp` attached (from %.0f s)", f.idle.seconds), f.idle.attached)
			row("idle day, nobody attached", f.idle.alone)
		}
	}
	flushTable(t, tw)
	for _, f := range figs {
		fmt.Printf("short prompt, %s: signals %s; events %s\n", f.agent, formatCounts(f.perPrompt.signalsByName), formatCounts(f.perPrompt.eventsByType))
	}
	fmt.Println()
}

func formatCounts(m map[string]float64) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

package bench

// The control round trip: how long a client waits for tacp's answer to a control request
// (prompt, steer) on a running session, set against the cheapest update Temporal can answer
// (NoopWorkflow's `noop`) on the same in-process server, worker process and client. The ratio
// is tacp's own cost; the absolute figures are mostly the machine's.
//
// TestMain starts one embedded Temporal server (devserver), a tacp worker whose agent is the
// real testagent binary, and a worker for NoopWorkflow. With TACP_BENCH_ADDRESS set it dials
// that Temporal frontend instead of starting devserver (bench/cluster points it at a
// multi-service cluster); the workers still run in this process. Two sessions are kept busy with a
// `/sleep 10m` turn from the start (one for prompts, one for steers), so every operation,
// noop included, is measured under the same background load: a turn streaming an event
// batch every 100 ms into its session.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/devserver"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
	"github.com/tacp-dev/tacp/workflows/session"
)

const (
	noopQueue  = "bench-noop"
	noopUpdate = "noop"
	// noopRunUpdates rotates NoopWorkflow well before Temporal's per-run update budget (2,000).
	noopRunUpdates = 500
	// busyPrompt keeps a turn running for the whole benchmark, so prompts only queue and
	// steers find a live turn.
	busyPrompt = "/sleep 10m"
	opTimeout  = 30 * time.Second
)

// env is the shared fixture; nil when nothing in this run needs the server.
var env *fixture

// noopP50 is the noop round trip's p50 (ms) measured by the noop_update sub-benchmark, the
// denominator of the other sub-benchmarks' ratio_p50.
var noopP50 float64

type fixture struct {
	srv         *devserver.Server
	queries     *queryCounter // the queries every bench worker answers, by workflow id
	c           client.Client
	sc          *tacpclient.Client
	workers     []interface{ Stop() }
	noop        *noopTarget
	prompt      *promptTarget
	steer       *steerTarget
	steerStale  *steerTarget
	permission  *permissionTarget
	sessions    []string // every session started, closed at the end
	tmp         string
	agentBinary string
}

// NoopWorkflow is the baseline: one update that returns its argument, behind a validator that
// accepts everything, on a workflow that never ends by itself.
func NoopWorkflow(ctx workflow.Context) error {
	err := workflow.SetUpdateHandlerWithOptions(ctx, noopUpdate,
		func(ctx workflow.Context, arg string) (string, error) { return arg, nil },
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, arg string) error { return nil }})
	if err != nil {
		return err
	}
	return workflow.Await(ctx, func() bool { return false })
}

func TestMain(m *testing.M) {
	flag.Parse()
	// Start the server only when a benchmark or the table will use it: `go test ./...` stays fast.
	if flag.Lookup("test.bench").Value.String() == "" && os.Getenv("TACP_BENCH") != "1" {
		os.Exit(m.Run())
	}
	f, err := setup(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench setup:", err)
		if f != nil {
			f.teardown()
		}
		os.Exit(1)
	}
	env = f
	code := m.Run()
	f.teardown()
	os.Exit(code)
}

func setup(ctx context.Context) (*fixture, error) {
	tmp, err := os.MkdirTemp("", "tacp-bench-")
	if err != nil {
		return nil, err
	}
	f := &fixture{tmp: tmp, agentBinary: filepath.Join(tmp, "testagent"), queries: newQueryCounter()}
	// The worker's default agent (the running binary with arg `testagent`) is not an agent
	// inside a test binary: build the real one.
	build := exec.Command("go", "build", "-o", f.agentBinary, "github.com/tacp-dev/tacp/testagent")
	if out, err := build.CombinedOutput(); err != nil {
		return f, fmt.Errorf("build testagent: %v\n%s", err, out)
	}
	quiet := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	if addr := os.Getenv("TACP_BENCH_ADDRESS"); addr != "" {
		if f.c, err = dialExternal(ctx, addr, quiet, f.queries); err != nil {
			return f, err
		}
	} else {
		if f.srv, err = devserver.Start(ctx, devserver.Options{}); err != nil {
			return f, err
		}
		if f.c, err = f.srv.NewClient(ctx, client.Options{Logger: quiet, Interceptors: []interceptor.ClientInterceptor{f.queries}}); err != nil {
			return f, err
		}
	}
	queue := "tacp-bench-" + signals.NewID()[:8]
	f.sc = tacpclient.NewClient(f.c, queue)

	w, err := tacpworker.Start(f.c, tacpworker.Options{
		TaskQueue:     queue,
		DataDir:       filepath.Join(tmp, "data"),
		FlushInterval: benchFlush(),
		// -steering: accepted steers are injected into the running turn, which keeps running.
		Agent: strconv.Quote(f.agentBinary) + " -steering -transcripts " + strconv.Quote(filepath.Join(tmp, "transcripts")),
	})
	if err != nil {
		return f, err
	}
	f.workers = append(f.workers, w)
	nw := worker.New(f.c, noopQueue, worker.Options{})
	nw.RegisterWorkflow(NoopWorkflow)
	nw.RegisterWorkflow(FloorWorkflow)
	nw.RegisterWorkflow(FirstTokenFloorWorkflow)
	if err := nw.Start(); err != nil {
		return f, fmt.Errorf("start noop worker: %w", err)
	}
	f.workers = append(f.workers, nw)
	hw := worker.New(f.c, floorHostQueue, worker.Options{})
	hw.RegisterActivity(&floorHost{c: f.c})
	if err := hw.Start(); err != nil {
		return f, fmt.Errorf("start the floor's host worker: %w", err)
	}
	f.workers = append(f.workers, hw)

	// Both busy sessions exist before anything is timed (see the file comment).
	f.noop = &noopTarget{f: f}
	f.prompt = &promptTarget{f: f}
	if err := f.prompt.rotate(ctx); err != nil {
		return f, err
	}
	steerSession, token, err := f.busySession(ctx)
	if err != nil {
		return f, err
	}
	f.steer = &steerTarget{f: f, session: steerSession, token: token, live: true}
	f.steerStale = &steerTarget{f: f, session: steerSession, token: "0"}
	f.permission = &permissionTarget{f: f}
	return f, nil
}

// dialExternal connects to the Temporal frontend at addr, in namespace TACP_BENCH_NAMESPACE
// (default "default"), and registers tacp's search attributes there if they are missing.
func dialExternal(ctx context.Context, addr string, logger sdklog.Logger, queries *queryCounter) (client.Client, error) {
	ns := cmp.Or(os.Getenv("TACP_BENCH_NAMESPACE"), "default")
	c, err := client.DialContext(ctx, client.Options{HostPort: addr, Namespace: ns, Logger: logger,
		Interceptors: []interceptor.ClientInterceptor{queries}})
	if err != nil {
		return nil, fmt.Errorf("dial TACP_BENCH_ADDRESS=%s: %w", addr, err)
	}
	if _, err := tacpclient.EnsureSearchAttributes(ctx, c, ns); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// recordFigure appends one figure as a JSON line to the file TACP_BENCH_FIGURES names, for
// tools that set runs side by side (bench/cluster); without it, it does nothing.
func recordFigure(t testing.TB, name string, n int, p50, p99 float64) {
	t.Helper()
	recordLine(t, map[string]any{"name": name, "n": n, "p50_ms": p50, "p99_ms": p99})
}

// recordValue appends one figure that is a single value (a count, MiB, seconds) as
// recordFigure does.
func recordValue(t testing.TB, name string, v float64) {
	t.Helper()
	recordLine(t, map[string]any{"name": name, "value": v})
}

func recordLine(t testing.TB, fig map[string]any) {
	t.Helper()
	path := os.Getenv("TACP_BENCH_FIGURES")
	if path == "" {
		return
	}
	line, err := json.Marshal(fig)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// busySession starts a session whose first turn runs busyPrompt and returns once the turn
// is running in the agent, with its steer token.
func (f *fixture) busySession(ctx context.Context) (id, token string, err error) {
	id = "bench-" + signals.NewID()
	f.sessions = append(f.sessions, id)
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if _, err := f.sc.Prompt(ctx, signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: busyPrompt}); err != nil {
		return "", "", fmt.Errorf("start session %s: %w", id, err)
	}
	for {
		st, err := f.sc.Status(ctx, id)
		if err != nil {
			return "", "", fmt.Errorf("status of %s: %w", id, err)
		}
		// AgentSessionID arrives with turn_started: the agent is up and streaming.
		if st.State == signals.StateRunning && st.SteerToken != "" && st.AgentSessionID != "" {
			return id, st.SteerToken, nil
		}
		select {
		case <-ctx.Done():
			return "", "", fmt.Errorf("session %s: turn did not start: %w", id, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// closeSession closes a session and waits for its workflow to end, so that a cancelled turn
// does not linger as load behind the next measurement.
func (f *fixture) closeSession(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if _, err := f.sc.Close(ctx, id, signals.CloseRequest{Reason: "bench"}); err != nil {
		if rej, ok := rejection.As(err); ok && (rej.Type == signals.RejectSessionClosed || rej.Type == signals.RejectUnknownSession) {
			return nil
		}
		return fmt.Errorf("close %s: %w", id, err)
	}
	return f.c.GetWorkflow(ctx, signals.SessionWorkflowID(id), "").Get(ctx, nil)
}

func (f *fixture) teardown() {
	ctx := context.Background()
	for _, id := range f.sessions {
		_ = f.closeSession(ctx, id)
	}
	if f.noop != nil && f.noop.id != "" {
		_ = f.c.TerminateWorkflow(ctx, f.noop.id, "", "bench done")
	}
	for _, w := range slices.Backward(f.workers) {
		w.Stop()
	}
	if f.c != nil {
		f.c.Close()
	}
	if f.srv != nil {
		_ = f.srv.Stop()
	}
	_ = os.RemoveAll(f.tmp)
}

// A target is one kind of control round trip. rotate (untimed) prepares a fresh target when
// due reports that the current one is used up; do is the measured round trip.
type target interface {
	due() bool
	rotate(ctx context.Context) error
	do(ctx context.Context) error
}

// noopTarget sends `noop` to a running NoopWorkflow, started anew every noopRunUpdates.
type noopTarget struct {
	f    *fixture
	id   string
	left int
}

func (t *noopTarget) due() bool { return t.left == 0 }

func (t *noopTarget) rotate(ctx context.Context) error {
	if t.id != "" {
		if err := t.f.c.TerminateWorkflow(ctx, t.id, "", "rotated"); err != nil {
			return err
		}
	}
	t.id = "bench-noop-" + signals.NewID()
	if _, err := t.f.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: t.id, TaskQueue: noopQueue}, NoopWorkflow); err != nil {
		return err
	}
	t.left = noopRunUpdates
	// The first update also waits for the first workflow task: pay it here, untimed.
	return t.do(ctx)
}

func (t *noopTarget) do(ctx context.Context) error {
	t.left--
	arg := signals.NewID()
	h, err := t.f.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   t.id,
		UpdateName:   noopUpdate,
		Args:         []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	var got string
	if err := h.Get(ctx, &got); err != nil {
		return err
	}
	if got != arg {
		return fmt.Errorf("noop returned %q, want %q", got, arg)
	}
	return nil
}

// promptTarget queues prompts behind a busy turn. A session's queue holds
// workflows.DefaultQueueLimit prompts, so a fresh busy session replaces it when full.
type promptTarget struct {
	f       *fixture
	session string
	left    int
}

func (t *promptTarget) due() bool { return t.left == 0 }

func (t *promptTarget) rotate(ctx context.Context) error {
	if t.session != "" {
		if err := t.f.closeSession(ctx, t.session); err != nil {
			return err
		}
	}
	id, _, err := t.f.busySession(ctx)
	if err != nil {
		return err
	}
	t.session, t.left = id, session.DefaultQueueLimit
	return nil
}

func (t *promptTarget) do(ctx context.Context) error {
	t.left--
	req := signals.PromptRequest{Text: "queued behind the busy turn", ClientMessageID: signals.NewID()}
	var res signals.PromptResult
	err := retryNotReady(ctx, "prompt", func() (err error) {
		res, err = t.f.sc.Prompt(ctx, signals.SessionConfig{SessionID: t.session}, req)
		return err
	})
	if err != nil {
		return err
	}
	if res.Position == 0 {
		return fmt.Errorf("prompt was not queued behind a running turn: %+v", res)
	}
	return nil
}

// steerTarget steers the busy turn of one session. With live set it sends the live steer
// token and wants the steer accepted: the busy session's agent (testagent -steering) takes
// it through the _session/steering extension, injected into the running turn, which keeps
// running; each accepted steer swaps the token and the next steer sends the new one. An
// accepted steer journals steer.accepted and schedules its delivery, so it writes history
// as the noop does. Without live it sends a wrong token ("0") and wants the validator's
// stale_turn rejection: a full update round trip that writes no history.
type steerTarget struct {
	f       *fixture
	session string
	token   string
	live    bool
}

func (t *steerTarget) due() bool                    { return false }
func (t *steerTarget) rotate(context.Context) error { return nil }

func (t *steerTarget) do(ctx context.Context) error {
	req := signals.SteerRequest{Text: "steer", ExpectedTurnID: t.token, ClientMsgID: signals.NewID()}
	var res signals.SteerResult
	err := retryNotReady(ctx, "steer", func() (err error) {
		res, err = t.f.sc.Steer(ctx, t.session, req)
		return err
	})
	if !t.live {
		if err == nil {
			return fmt.Errorf("steer with stale token %q was accepted: %+v", t.token, res)
		}
		if rej, ok := rejection.As(err); !ok || rej.Type != signals.RejectStaleTurn {
			return fmt.Errorf("steer with stale token %q: %w, want rejection %s", t.token, err, signals.RejectStaleTurn)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("steer with live token %q: %w", t.token, err)
	}
	// "duplicate": an earlier attempt was accepted before its answer was lost (retryNotReady).
	if (res.Outcome != "accepted" && res.Outcome != "duplicate") || res.NextExpectedTurnID == "" {
		return fmt.Errorf("steer with live token %q: %+v, want accepted with a next token", t.token, res)
	}
	t.token = res.NextExpectedTurnID
	return nil
}

// permissionTarget answers a real waiting permission request: a session with policy
// ask_always runs `/permission edit`, and each round trip is the permission_respond that
// allows it. Starting the next turn and waiting for its request is the untimed rotation.
type permissionTarget struct {
	f       *fixture
	session string
	pending *signals.PendingPermission
}

func (t *permissionTarget) due() bool { return t.pending == nil }

func (t *permissionTarget) rotate(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if t.session == "" {
		t.session = "bench-perm-" + signals.NewID()
		t.f.sessions = append(t.f.sessions, t.session)
	}
	cfg := signals.SessionConfig{SessionID: t.session, Policy: "ask_always"}
	if _, err := t.f.sc.Prompt(ctx, cfg, signals.PromptRequest{Text: "/permission edit"}); err != nil {
		return fmt.Errorf("permission turn: %w", err)
	}
	for {
		st, err := t.f.sc.Status(ctx, t.session)
		if err != nil {
			return err
		}
		if len(st.PendingPermissions) > 0 {
			t.pending = &st.PendingPermissions[0]
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("session %s: no permission request: %w", t.session, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (t *permissionTarget) do(ctx context.Context) error {
	var option string
	for _, o := range t.pending.Options {
		if o.Kind == "allow_once" {
			option = o.OptionID
		}
	}
	res, err := t.f.sc.PermissionRespond(ctx, t.session, signals.PermissionRespondRequest{RequestID: t.pending.RequestID, OptionID: option, ClientMsgID: signals.NewID()})
	if err != nil {
		return fmt.Errorf("permission_respond %s: %w", t.pending.RequestID, err)
	}
	if res.Resolution.Outcome != "selected" || res.Resolution.OptionID != option {
		return fmt.Errorf("permission_respond %s: %+v, want selected %s", t.pending.RequestID, res.Resolution, option)
	}
	t.pending = nil
	return nil
}

// notReady counts, per kind, the round trips that met serviceerror.WorkflowNotReady and
// were sent again. The server answers an update so when the workflow task it rode in
// failed, which happens when the update races the session's continue-as-new (the server
// fails the task that closes the run with UnhandledCommand because new events arrived).
// The retry, with the same client message id, is part of the measured time.
var notReady = map[string]int{}

func retryNotReady(ctx context.Context, kind string, send func() error) error {
	for {
		err := send()
		var nr *serviceerror.WorkflowNotReady
		if !errors.As(err, &nr) || ctx.Err() != nil {
			return err
		}
		notReady[kind]++
	}
}

// roundTrip runs one measured operation, rotating the target first (untimed) when due.
// pause and resume bracket the untimed part (b.StopTimer/StartTimer in a benchmark).
func roundTrip(t target, pause, resume func()) (time.Duration, error) {
	if t.due() {
		pause()
		err := t.rotate(context.Background())
		resume()
		if err != nil {
			return 0, fmt.Errorf("rotate: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	start := time.Now()
	err := t.do(ctx)
	return time.Since(start), err
}

// measure runs n round trips of t outside any benchmark timer.
func measure(t target, n int) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, n)
	for range n {
		d, err := roundTrip(t, func() {}, func() {})
		if err != nil {
			return nil, err
		}
		lat = append(lat, d)
	}
	return lat, nil
}

// percentile is the nearest-rank p-th percentile (0 < p ≤ 1) of lat, in milliseconds.
func percentile(lat []time.Duration, p float64) float64 {
	s := slices.Clone(lat)
	slices.Sort(s)
	i := max(int(math.Ceil(p*float64(len(s))))-1, 0)
	return float64(s[i]) / float64(time.Millisecond)
}

func BenchmarkControlRoundTrip(b *testing.B) {
	if env == nil {
		b.Fatal("no bench fixture (TestMain did not set one up)")
	}
	run := func(name string, t target) {
		b.Run(name, func(b *testing.B) {
			if name != "noop_update" && noopP50 == 0 {
				lat, err := measure(env.noop, 200)
				if err != nil {
					b.Fatalf("noop baseline: %v", err)
				}
				noopP50 = percentile(lat, 0.50)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				d, err := roundTrip(t, b.StopTimer, b.StartTimer)
				if err != nil {
					b.Fatalf("%s: %v", name, err)
				}
				lat = append(lat, d)
			}
			b.StopTimer()
			p50, p99 := percentile(lat, 0.50), percentile(lat, 0.99)
			b.ReportMetric(p50, "p50_ms")
			b.ReportMetric(p99, "p99_ms")
			if name == "noop_update" {
				noopP50 = p50
			} else {
				b.ReportMetric(p50/noopP50, "ratio_p50")
			}
		})
	}
	run("noop_update", env.noop)
	run("prompt", env.prompt)
	run("steer", env.steer)
	run("steer_stale", env.steerStale)
	run("permission_respond", env.permission)
}

// TestControlRoundTripTable prints the figures the README quotes:
//
//	TACP_BENCH=1 go test ./bench -run TestControlRoundTripTable -v
//
// The kinds are interleaved round by round, so drift in the machine's load over the run
// affects them alike.
func TestControlRoundTripTable(t *testing.T) {
	if os.Getenv("TACP_BENCH") != "1" {
		t.Skip("set TACP_BENCH=1 to measure control round trips")
	}
	n := 300
	if s := os.Getenv("TACP_BENCH_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("TACP_BENCH_N=%q: want a positive integer", s)
		}
		n = v
	}
	kinds := []struct {
		name string
		t    target
	}{
		{"noop_update", env.noop},
		{"prompt", env.prompt},
		{"steer", env.steer},
		{"steer_stale", env.steerStale},
		{"permission_respond", env.permission},
	}
	const warmup = 20
	lat := make([][]time.Duration, len(kinds))
	for round := range warmup + n {
		for i, k := range kinds {
			d, err := roundTrip(k.t, func() {}, func() {})
			if err != nil {
				t.Fatalf("%s: %v", k.name, err)
			}
			if round >= warmup {
				lat[i] = append(lat[i], d)
			}
		}
	}

	base50, base99 := percentile(lat[0], 0.50), percentile(lat[0], 0.99)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "operation\tn\tp50 ms\tp99 ms\tp50 / noop\tp99 / noop")
	for i, k := range kinds {
		p50, p99 := percentile(lat[i], 0.50), percentile(lat[i], 0.99)
		recordFigure(t, "control/"+k.name, len(lat[i]), p50, p99)
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\n", k.name, len(lat[i]), p50, p99, p50/base50, p99/base99)
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		if n := notReady[k.name]; n > 0 {
			fmt.Printf("%s: %d round trips met WorkflowNotReady (the update raced the session's continue-as-new) and were sent again; the retry is in their time\n", k.name, n)
		}
	}
}

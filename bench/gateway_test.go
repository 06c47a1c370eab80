package bench

// The event path as an editor sees it: stamped chunks written by the testagent, read by an
// ACP client (acp-go-sdk's client side) of the real `starter acp` process, against the same
// agent binary spoken to directly over its stdio in the same run (the baseline), and against
// the floor of "journaled before anyone sees it" (a signal, its workflow task, a query).
// Besides latency it counts what the gateway's viewer costs: the events queries its sessions
// are asked while they stream and while they are idle.
//
//	TACP_BENCH=1 go test ./bench -run TestGatewayTable -v
//
// TACP_BENCH_GATEWAY_CHUNKS (default 500) sets the chunks of the streaming turn, at 50/s;
// TACP_BENCH_TURNS (50) the first-chunk rounds and warm turns; TACP_BENCH_PAUSES (20) the
// rounds of a chunk after a 1 s pause; TACP_BENCH_IDLE_SESSIONS (50) and
// TACP_BENCH_IDLE_SECONDS (60) the idle watch. TACP_BENCH_STARTER runs another starter
// binary as the gateway (an older build, for a before/after in one session).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

// startGateway starts the real `starter acp` (built once) against the bench's server and
// task queue, as the peer of an ACP client, with a warm session.
func startGateway(ctx context.Context, t testing.TB) *acpPeer {
	t.Helper()
	cmd := starterCmd(t, "acp")
	cmd.Stderr = os.Stderr
	// The editor's cwd must be inside the worker's workspace roots (its data dir's
	// workspaces/ here), or session/new is refused.
	ws := filepath.Join(env.tmp, "data", "workspaces", "gateway")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	g, err := startPeer(ctx, "gateway", cmd, ws)
	if err != nil {
		t.Fatal(err)
	}
	env.sessions = append(env.sessions, string(g.sid))
	return g
}

// starterCmd is the real starter binary (built once) running command with args against
// the bench's server and task queue.
func starterCmd(t testing.TB, command string, args ...string) *exec.Cmd {
	t.Helper()
	return starterCmdOn(t, env.sc.TaskQueue, command, args...)
}

// starterCmdOn is starterCmd against the task queue of another bench worker.
func starterCmdOn(t testing.TB, queue, command string, args ...string) *exec.Cmd {
	t.Helper()
	bin := os.Getenv("TACP_BENCH_STARTER")
	if bin == "" {
		bin = filepath.Join(env.tmp, "starter")
	}
	if _, err := os.Stat(bin); err != nil {
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/tacp-dev/tacp/starter").CombinedOutput(); err != nil {
			t.Fatalf("build starter: %v\n%s", err, out)
		}
	}
	addr := os.Getenv("TACP_BENCH_ADDRESS")
	if addr == "" {
		addr = env.srv.HostPort()
	}
	cmd := exec.Command(bin, append([]string{command, "--address", addr, "--task-queue", queue}, args...)...)
	cmd.Env = append(os.Environ(), "TEMPORAL_NAMESPACE="+orDefault(os.Getenv("TACP_BENCH_NAMESPACE"), "default"))
	return cmd
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// TestGatewayTable prints the chunk latency an ACP client sees through `starter acp` against
// the direct ACP pipe and the floor, the warm zero-work turn both ways, and the events queries
// the gateway's sessions are asked.
func TestGatewayTable(t *testing.T) {
	if os.Getenv("TACP_BENCH") != "1" {
		t.Skip("set TACP_BENCH=1 to measure the gateway")
	}
	chunks := envInt(t, "TACP_BENCH_GATEWAY_CHUNKS", 500)
	rounds := envInt(t, "TACP_BENCH_TURNS", 50)
	pauses := envInt(t, "TACP_BENCH_PAUSES", 20)
	idleSessions := envInt(t, "TACP_BENCH_IDLE_SESSIONS", 50)
	idleWindow := time.Duration(envInt(t, "TACP_BENCH_IDLE_SECONDS", 60)) * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	d, err := startDirect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.close)
	g := startGateway(ctx, t)
	t.Cleanup(g.close)
	gid := string(g.sid)

	floor, err := measureFloor(ctx, env.c, rounds)
	if err != nil {
		t.Fatal(err)
	}

	// Zero-work turns and first chunks of a turn, each way in turn, round by round.
	var warmDirect, warmGateway, firstDirect, firstGateway []time.Duration
	for range rounds {
		for _, p := range []struct {
			peer  *acpPeer
			warm  *[]time.Duration
			first *[]time.Duration
		}{{d, &warmDirect, &firstDirect}, {g, &warmGateway, &firstGateway}} {
			w, err := p.peer.prompt(ctx, zeroWork)
			if err != nil {
				t.Fatal(err)
			}
			lat, err := p.peer.stream(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			*p.warm, *p.first = append(*p.warm, w), append(*p.first, lat[0])
		}
	}

	// The first chunk after a pause inside a turn (an agent that thought for a second): both
	// ways at once, like the streams.
	var pauseDirect, pauseGateway []time.Duration
	for range pauses {
		var wg sync.WaitGroup
		var dl, gl []time.Duration
		var derr, gerr error
		wg.Go(func() { dl, derr = d.streamPrompt(ctx, "/chunks 2 every 1s stamp", 2) })
		wg.Go(func() { gl, gerr = g.streamPrompt(ctx, "/chunks 2 every 1s stamp", 2) })
		wg.Wait()
		if err := errors.Join(derr, gerr); err != nil {
			t.Fatal(err)
		}
		pauseDirect, pauseGateway = append(pauseDirect, dl[1]), append(pauseGateway, gl[1])
	}

	// A steady stream, both ways at once; its first chunk is the burst's and left out.
	var direct, through []time.Duration
	var streamQueries int64
	var streamFor time.Duration
	{
		var wg sync.WaitGroup
		var derr, gerr error
		before := env.queries.count(signals.QueryEvents, gid)
		start := time.Now()
		wg.Go(func() { direct, derr = d.stream(ctx, chunks) })
		wg.Go(func() { through, gerr = g.stream(ctx, chunks) })
		wg.Wait()
		if err := errors.Join(derr, gerr); err != nil {
			t.Fatal(err)
		}
		streamQueries = env.queries.count(signals.QueryEvents, gid) - before
		streamFor = time.Since(start)
		direct, through = direct[1:], through[1:]
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "gateway path (%d first chunks, %d after a pause, %d-chunk stream at 50/s, %d warm turns)\tn\tp50 ms\tp99 ms\tp50 − direct\tp99 − direct\tp50 − floor\n",
		rounds, pauses, chunks, rounds)
	fs := statsOf(floor)
	fmt.Fprintf(tw, "floor: signal → its workflow task → query (plain SDK)\t%d\t%.2f\t%.2f\t\t\t\n", fs.n, fs.p50, fs.p99)
	row := func(name string, base stats, lat []time.Duration, overFloor bool) {
		s := statsOf(lat)
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t", name, s.n, s.p50, s.p99, s.p50-base.p50, s.p99-base.p99)
		if overFloor {
			fmt.Fprintf(tw, "%.2f", s.p50-fs.p50)
		}
		fmt.Fprintln(tw)
	}
	for _, r := range []struct {
		what             string
		direct, gateway  []time.Duration
		overFloor, chunk bool
	}{
		{"first chunk of a turn", firstDirect, firstGateway, true, true},
		{"first chunk after a 1 s pause", pauseDirect, pauseGateway, true, true},
		{"steady-stream chunk", direct, through, true, true},
		{"warm turn", warmDirect, warmGateway, false, false},
	} {
		base := statsOf(r.direct)
		name := map[bool]string{true: "direct ACP pipe", false: "direct session/prompt"}[r.chunk]
		fmt.Fprintf(tw, "%s: %s\t%d\t%.2f\t%.2f\t\t\t\n", r.what, name, base.n, base.p50, base.p99)
		via := map[bool]string{true: "ACP client of starter acp", false: "session/prompt via starter acp"}[r.chunk]
		row(r.what+": "+via, base, r.gateway, r.overFloor)
	}
	flushTable(t, tw)
	fmt.Printf("events queries of the gateway's session while it streamed %d chunks (%.1f s): %d, %.1f/s, %.2f per chunk\n\n",
		chunks, streamFor.Seconds(), streamQueries, float64(streamQueries)/streamFor.Seconds(), float64(streamQueries)/float64(chunks))

	measureIdleWatch(ctx, t, g, idleSessions, idleWindow)
}

// streamPrompt runs one stamped prompt of n chunks and returns each chunk's latency.
func (p *acpPeer) streamPrompt(ctx context.Context, text string, n int) ([]time.Duration, error) {
	p.client.take()
	if _, err := p.prompt(ctx, text); err != nil {
		return nil, err
	}
	lat := p.client.take()
	if len(lat) != n {
		return nil, fmt.Errorf("%s %q: %d stamped chunks seen, want %d", p.name, text, len(lat), n)
	}
	return lat, nil
}

// measureIdleWatch starts n idle sessions and counts the events queries they are asked over
// window: first each watched by an in-process viewer that follows its history (Watch, as
// the deck and starter tail --follow do), then each resumed by the gateway g (which also
// renews its viewer lease, an attach update, every 40 s).
func measureIdleWatch(ctx context.Context, t *testing.T, g *acpPeer, n int, window time.Duration) {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "bench-idle-" + signals.NewID()
		env.sessions = append(env.sessions, ids[i])
		if _, err := env.sc.Start(ctx, signals.SessionConfig{SessionID: ids[i]}, signals.AttachRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int64 { return env.queries.count(signals.QueryEvents, ids...) }
	// A session is settled once its first query was answered (its first workflow task ran).
	for _, id := range ids {
		if _, err := env.sc.Events(ctx, id, 0, 1); err != nil {
			t.Fatal(err)
		}
	}

	type result struct {
		viewer  string
		queries int64
		took    time.Duration
	}
	var results []result

	// In-process followers, one per session, with the default safety poll.
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var caughtUp sync.WaitGroup
	caughtUp.Add(n)
	for _, id := range ids {
		wg.Go(func() {
			first := true
			_ = env.sc.Watch(wctx, id, 0, func(signals.Event) bool {
				if first {
					first = false
					caughtUp.Done()
				}
				return true
			})
		})
	}
	caughtUp.Wait()
	before, start := count(), time.Now()
	sleepCtx(ctx, window)
	results = append(results, result{"Watch (tacpclient.Follower), one per session", count() - before, time.Since(start)})
	stop()
	wg.Wait()

	// The gateway resumes every session: one hub feed each.
	for _, id := range ids {
		if _, err := g.conn.ResumeSession(ctx, acp.ResumeSessionRequest{SessionId: acp.SessionId(id), Cwd: filepath.Join(env.tmp, "data", "workspaces", "gateway")}); err != nil {
			t.Fatalf("resume %s: %v", id, err)
		}
	}
	sleepCtx(ctx, 2*time.Second) // the feeds' first queries
	before, start = count(), time.Now()
	sleepCtx(ctx, window)
	results = append(results, result{"starter acp, every session resumed", count() - before, time.Since(start)})

	safety := tacpclient.DefaultSafetyPoll
	fmt.Printf("Idle: %d watched sessions that do nothing, events queries counted by the worker (safety poll %s: %.2f/s for %d sessions)\n",
		n, safety, float64(n)/safety.Seconds(), n)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "viewer\twindow s\tevents queries\tper second\tper session per minute")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%.0f\t%d\t%.2f\t%.2f\n", r.viewer, r.took.Seconds(), r.queries,
			float64(r.queries)/r.took.Seconds(), float64(r.queries)/float64(n)/r.took.Minutes())
	}
	flushTable(t, tw)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

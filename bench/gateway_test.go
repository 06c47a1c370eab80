package bench

// The event path as an editor sees it: stamped chunks written by the testagent, read by an
// ACP client (acp-go-sdk's client side) of the real `starter acp` process, against the same
// agent binary spoken to directly over its stdio in the same run (the baseline).
//
//	TACP_BENCH=1 go test ./bench -run TestGatewayTable -v
//
// TACP_BENCH_GATEWAY_CHUNKS (default 500) sets the chunks of each streaming turn, at 50/s.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"text/tabwriter"
	"time"
)

// startGateway starts the real `starter acp` (built once) against the bench's server and
// task queue, as the peer of an ACP client, with a warm session.
func startGateway(ctx context.Context, t testing.TB) *acpPeer {
	t.Helper()
	cmd := starterCmd(t, "acp")
	cmd.Stderr = os.Stderr
	g, err := startPeer(ctx, "gateway", cmd, env.tmp)
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
	bin := filepath.Join(env.tmp, "starter")
	if _, err := os.Stat(bin); err != nil {
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/tacp-dev/tacp/starter").CombinedOutput(); err != nil {
			t.Fatalf("build starter: %v\n%s", err, out)
		}
	}
	addr := os.Getenv("TACP_BENCH_ADDRESS")
	if addr == "" {
		addr = env.srv.HostPort()
	}
	cmd := exec.Command(bin, append([]string{command, "--address", addr, "--task-queue", env.sc.TaskQueue}, args...)...)
	cmd.Env = append(os.Environ(), "TEMPORAL_NAMESPACE="+orDefault(os.Getenv("TACP_BENCH_NAMESPACE"), "default"))
	return cmd
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// TestGatewayTable prints the chunk latency an ACP client sees through `starter acp`
// against the direct ACP pipe, and the warm zero-work turn both ways.
func TestGatewayTable(t *testing.T) {
	if os.Getenv("TACP_BENCH") != "1" {
		t.Skip("set TACP_BENCH=1 to measure the gateway")
	}
	chunks := envInt(t, "TACP_BENCH_GATEWAY_CHUNKS", 500)
	rounds := envInt(t, "TACP_BENCH_TURNS", 50)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	d, err := startDirect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.close)
	g := startGateway(ctx, t)
	t.Cleanup(g.close)

	var warmDirect, warmGateway []time.Duration
	for range rounds {
		dt, err := d.prompt(ctx, zeroWork)
		if err != nil {
			t.Fatal(err)
		}
		gt, err := g.prompt(ctx, zeroWork)
		if err != nil {
			t.Fatal(err)
		}
		warmDirect, warmGateway = append(warmDirect, dt), append(warmGateway, gt)
	}
	direct, err := d.stream(ctx, chunks)
	if err != nil {
		t.Fatal(err)
	}
	through, err := g.stream(ctx, chunks)
	if err != nil {
		t.Fatal(err)
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "gateway path (%d chunks at 50/s; %d warm turns)\tp50 ms\tp99 ms\tp50/direct\tp99/direct\n", chunks, rounds)
	ds, gs := statsOf(direct), statsOf(through)
	fmt.Fprintf(tw, "chunk: direct ACP pipe\t%.2f\t%.2f\t1.00\t1.00\n", ds.p50, ds.p99)
	fmt.Fprintf(tw, "chunk: ACP client of starter acp\t%.2f\t%.2f\t%.1f\t%.1f\n", gs.p50, gs.p99, gs.p50/ds.p50, gs.p99/ds.p99)
	wd, wg := statsOf(warmDirect), statsOf(warmGateway)
	fmt.Fprintf(tw, "warm turn: direct session/prompt\t%.2f\t%.2f\t1.00\t1.00\n", wd.p50, wd.p99)
	fmt.Fprintf(tw, "warm turn: session/prompt via starter acp\t%.2f\t%.2f\t%.1f\t%.1f\n", wg.p50, wg.p99, wg.p50/wd.p50, wg.p99/wd.p99)
	flushTable(t, tw)
}

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
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"text/tabwriter"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// gatewayClient is an ACP client of a `starter acp` process.
type gatewayClient struct {
	cmd    *exec.Cmd
	conn   *acp.ClientSideConnection
	client *stampClient
	sid    acp.SessionId
	close  func()
}

func startGateway(ctx context.Context, t testing.TB) *gatewayClient {
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
	cmd := exec.Command(bin, "acp", "--address", addr, "--task-queue", env.sc.TaskQueue)
	cmd.Env = append(os.Environ(), "TEMPORAL_NAMESPACE="+orDefault(os.Getenv("TACP_BENCH_NAMESPACE"), "default"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &gatewayClient{cmd: cmd, client: &stampClient{}}
	g.close = func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	gate := make(chan struct{})
	g.conn = acp.NewClientSideConnection(g.client, stdin, gatedReader{r: stdout, open: gate})
	g.conn.SetLogger(slog.New(slog.DiscardHandler))
	close(gate)
	if _, err := g.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		g.close()
		t.Fatalf("initialize: %v", err)
	}
	res, err := g.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: env.tmp, McpServers: []acp.McpServer{}})
	if err != nil {
		g.close()
		t.Fatalf("session/new: %v", err)
	}
	g.sid = res.SessionId
	env.sessions = append(env.sessions, string(g.sid))
	if _, err := g.prompt(ctx, zeroWork); err != nil { // warm the agent
		g.close()
		t.Fatal(err)
	}
	return g
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (g *gatewayClient) prompt(ctx context.Context, text string) (time.Duration, error) {
	start := time.Now()
	res, err := g.conn.Prompt(ctx, acp.PromptRequest{SessionId: g.sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
	if err != nil {
		return 0, fmt.Errorf("gateway prompt %q: %w", text, err)
	}
	if res.StopReason != acp.StopReasonEndTurn {
		return 0, fmt.Errorf("gateway prompt %q: stop reason %q", text, res.StopReason)
	}
	return time.Since(start), nil
}

// stream runs a stamped n-chunk turn through the gateway and returns each chunk's latency.
func (g *gatewayClient) stream(ctx context.Context, n int) ([]time.Duration, error) {
	g.client.take()
	if _, err := g.prompt(ctx, streamPrompt(n)); err != nil {
		return nil, err
	}
	lat := g.client.take()
	if len(lat) != n {
		return nil, fmt.Errorf("gateway stream: %d stamped chunks seen, want %d", len(lat), n)
	}
	return lat, nil
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

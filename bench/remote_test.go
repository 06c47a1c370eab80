package bench

// Remote ACP: the event path as a remote editor sees it, over the deck's /acp WebSocket
// (`starter web`, its own process, like `starter acp`), beside the stdio `starter acp`
// in the same run; and how long a client that lost its socket waits, from its first dial,
// for the first event it missed.
//
//	TACP_BENCH=1 go test ./bench -run TestRemoteTable -v
//
// TACP_BENCH_GATEWAY_CHUNKS (default 500) sets the chunks of each streaming turn, at 50/s;
// TACP_BENCH_RECONNECTS (default 30) the reconnections timed each way.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/coder/websocket"

	"github.com/tacp-dev/tacp/internal/wsline"
	"github.com/tacp-dev/tacp/signals"
)

// benchDeck is `starter web` as a child process.
type benchDeck struct {
	cmd   *exec.Cmd
	url   string // ws://host:port/acp
	token string
}

var deckAddr = regexp.MustCompile(`deck on http://([^/]+)/`)

func startDeck(t testing.TB) *benchDeck {
	t.Helper()
	d := &benchDeck{token: "bench-" + signals.NewID()}
	var addr string
	d.cmd, addr = serveDeck(t, "--token", d.token)
	d.url = "ws://" + addr + "/acp"
	return d
}

// serveDeck starts `starter web` on a free loopback port with args and returns it and the
// address it serves on, once it says so.
func serveDeck(t testing.TB, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := starterCmd(t, "web", append([]string{"--listen", "127.0.0.1:0", "--log.level", "warn"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	addr := ""
	for lines.Scan() {
		if m := deckAddr.FindStringSubmatch(lines.Text()); m != nil {
			addr = m[1]
			break
		}
	}
	if addr == "" {
		t.Fatal("starter web did not start")
	}
	go func() { _, _ = io.Copy(os.Stderr, stderr) }()
	return cmd, addr
}

func (d *benchDeck) stop() {
	_ = d.cmd.Process.Signal(os.Interrupt)
	_ = d.cmd.Wait()
}

// dialDeck opens a WebSocket to the deck's /acp and returns it as a line stream.
func (d *benchDeck) dial(ctx context.Context) (*websocket.Conn, *wsline.Stream, context.CancelFunc, error) {
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+d.token)
	ws, _, err := websocket.Dial(ctx, d.url, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		return nil, nil, nil, err
	}
	life, cancel := context.WithCancel(context.Background())
	return ws, wsline.New(life, ws), cancel, nil
}

// startRemote connects an ACP client to the deck's /acp, with a warm session.
func startRemote(ctx context.Context, t testing.TB, d *benchDeck) *acpPeer {
	t.Helper()
	ws, st, cancel, err := d.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := &acpPeer{name: "remote", closer: func() { _ = ws.Close(websocket.StatusNormalClosure, ""); cancel() }}
	if _, err := p.open(ctx, st, st, &stampClient{}, "/", zeroWork); err != nil {
		t.Fatal(err)
	}
	env.sessions = append(env.sessions, string(p.sid))
	return p
}

// seqClient records when the first update after a seq arrives.
type seqClient struct {
	*stampClient
	after int64
	first chan time.Time // gets the arrival of the first update with seq > after
	once  sync.Once
}

func (c *seqClient) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	now := time.Now()
	if m, err := signals.ACPMetaOf(n.Meta); err == nil && m.Seq > c.after {
		c.once.Do(func() { c.first <- now })
	}
	return nil
}

// reconnect is one way of coming back: it connects, resumes session id after seq and
// returns when the first update after seq arrived, with what to close.
type reconnect func(ctx context.Context, id string, after int64) (closeIt func(), err error)

// timeReconnects cuts a client off a long streaming turn rounds times and times, from the
// moment it starts coming back, until the first event it missed reaches it.
func timeReconnects(ctx context.Context, t testing.TB, rounds int, come reconnect) []time.Duration {
	t.Helper()
	id := "bench-reconnect-" + signals.NewID()
	env.sessions = append(env.sessions, id)
	// Long enough for every round: 50 chunks a second.
	if _, err := env.sc.Prompt(ctx, signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: streamPrompt(rounds * 100), ClientMessageID: signals.NewID()}); err != nil {
		t.Fatal(err)
	}
	var out []time.Duration
	for range rounds {
		// What the client saw when its socket dropped: the journal's end now. Then events
		// it misses arrive.
		st, err := env.sc.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		last := st.Journal.LastSeq
		if err := env.sc.Watch(ctx, id, last, func(ev signals.Event) bool { return ev.Kind != signals.EventAgentUpdate }); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		closeIt, err := come(ctx, id, last)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, time.Since(start))
		closeIt()
	}
	if _, err := env.sc.Cancel(ctx, id, signals.CancelRequest{}); err != nil {
		t.Fatal(err)
	}
	return out
}

// resumeAfter loads id after seq on conn and waits for the first update after it.
func resumeAfter(ctx context.Context, conn *acp.ClientSideConnection, c *seqClient, id string, after int64) error {
	if _, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		return err
	}
	if _, err := conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: acp.SessionId(id), Cwd: "/", McpServers: []acp.McpServer{}, Meta: signals.ACPMeta{AfterSeq: &after}.Map()}); err != nil {
		return err
	}
	select {
	case <-c.first:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return errors.New("no update after the resumption point")
	}
}

func TestRemoteTable(t *testing.T) {
	if os.Getenv("TACP_BENCH") != "1" {
		t.Skip("set TACP_BENCH=1 to measure remote ACP")
	}
	chunks := envInt(t, "TACP_BENCH_GATEWAY_CHUNKS", 500)
	rounds := envInt(t, "TACP_BENCH_RECONNECTS", 30)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	deck := startDeck(t)
	t.Cleanup(deck.stop)
	g := startGateway(ctx, t)
	t.Cleanup(g.close)
	r := startRemote(ctx, t, deck)
	t.Cleanup(r.close)

	// Two streaming turns each, interleaved, so that neither side has the quieter minute.
	var stdio, remote []time.Duration
	for range 2 {
		lat, err := g.stream(ctx, chunks)
		if err != nil {
			t.Fatal(err)
		}
		stdio = append(stdio, lat...)
		if lat, err = r.stream(ctx, chunks); err != nil {
			t.Fatal(err)
		}
		remote = append(remote, lat...)
	}

	overSocket := timeReconnects(ctx, t, rounds, func(ctx context.Context, id string, after int64) (func(), error) {
		ws, st, cancel, err := deck.dial(ctx)
		if err != nil {
			return nil, err
		}
		c := &seqClient{stampClient: &stampClient{}, after: after, first: make(chan time.Time, 1)}
		err = resumeAfter(ctx, newClientConn(c, st, st), c, id, after)
		return func() { _ = ws.CloseNow(); cancel() }, err
	})
	// The stdio face has no socket to redial: an editor that lost its `starter acp`
	// starts it again (a process and a Temporal connection) and loads the session.
	restarted := timeReconnects(ctx, t, rounds, func(ctx context.Context, id string, after int64) (func(), error) {
		cmd := starterCmd(t, "acp")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		c := &seqClient{stampClient: &stampClient{}, after: after, first: make(chan time.Time, 1)}
		err = resumeAfter(ctx, newClientConn(c, stdin, stdout), c, id, after)
		return func() { _ = stdin.Close(); _ = cmd.Wait() }, err
	})

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "remote ACP (%d chunks at 50/s, twice each way; %d reconnections each way)\tp50 ms\tp99 ms\tmax ms\tp50/stdio\tp99/stdio\n", chunks, rounds)
	ss, rs := statsOf(stdio), statsOf(remote)
	fmt.Fprintf(tw, "chunk: ACP client of starter acp (stdio)\t%.2f\t%.2f\t%.2f\t1.00\t1.00\n", ss.p50, ss.p99, ss.max)
	fmt.Fprintf(tw, "chunk: ACP client over the deck's /acp WebSocket\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\n", rs.p50, rs.p99, rs.max, rs.p50/ss.p50, rs.p99/ss.p99)
	ws, rs2 := statsOf(overSocket), statsOf(restarted)
	fmt.Fprintf(tw, "reconnect → first missed event: new WebSocket, load after_seq\t%.2f\t%.2f\t%.2f\t\t\n", ws.p50, ws.p99, ws.max)
	fmt.Fprintf(tw, "reconnect → first missed event: new starter acp process, load after_seq\t%.2f\t%.2f\t%.2f\t\t\n", rs2.p50, rs2.p99, rs2.max)
	flushTable(t, tw)
}

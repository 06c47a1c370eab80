package e2e

// Slow is not dead (issue 35, docs/operators.md "When a worker counts as lost"): a worker that
// is alive but starved — every round trip to the server slowed by a delaying proxy, the
// process stopped outright for seconds, burners ahead of it on the CPU — keeps its turn.
// The turn completes once, on that worker, and every chunk is journaled once.

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// delayProxy forwards TCP connections to target, holding every chunk of bytes for delay in
// each direction: a frontend whose every round trip takes 2×delay longer, bytes in order.
type delayProxy struct {
	ln     net.Listener
	target string
	delay  time.Duration
	mu     sync.Mutex
	conns  []net.Conn
}

func startDelayProxy(t *testing.T, target string, delay time.Duration) *delayProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &delayProxy{ln: ln, target: target, delay: delay}
	t.Cleanup(p.close)
	go p.serve()
	return p
}

func (p *delayProxy) addr() string { return p.ln.Addr().String() }

func (p *delayProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go p.pump(in, out)
		go p.pump(out, in)
	}
}

// pump copies src to dst, each chunk delay after it was read.
func (p *delayProxy) pump(src, dst net.Conn) {
	type chunk struct {
		due  time.Time
		data []byte
	}
	queue := make(chan chunk, 4096)
	go func() {
		defer close(queue)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				queue <- chunk{time.Now().Add(p.delay), buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range queue {
		time.Sleep(time.Until(c.due))
		if _, err := dst.Write(c.data); err != nil {
			break
		}
	}
	_ = dst.Close()
	_, _ = io.Copy(io.Discard, src)
}

func (p *delayProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// burnCPU runs n busy processes ahead of the worker (the worker runs at nice 19), until t
// ends or stop is called.
func burnCPU(t *testing.T, n int) (stop func()) {
	t.Helper()
	var cmds []*exec.Cmd
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		require.NoError(t, cmd.Start())
		cmds = append(cmds, cmd)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			for _, c := range cmds {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func TestAStarvedWorkerKeepsItsTurn(t *testing.T) {
	t.Parallel()
	const chunks = 100
	queue := "tacp-starved-" + signals.NewID()[:8]
	qc := signals.NewClient(tc, queue)
	// Every round trip of the worker to the server takes 1.4 s longer than it would:
	// longer than the SDK's own heartbeat allowed itself before it gave an attempt up.
	proxy := startDelayProxy(t, srv.HostPort(), 700*time.Millisecond)
	w := startWorkerProcess(t, queue, "TEMPORAL_ADDRESS="+proxy.addr())
	require.NoError(t, syscall.Setpriority(syscall.PRIO_PROCESS, w.Process.Pid, 19))

	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	ctx := ctxFor(t, 3*time.Minute)
	_, err := qc.Prompt(ctx, cfg, signals.PromptRequest{Text: fmt.Sprintf("/chunks %d every 50ms", chunks), ClientMessageID: "turn-1"})
	require.NoError(t, err)
	waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventAgentUpdate })

	// Burners ahead of the worker on every core, and the worker stopped for a few seconds:
	// its heartbeats are late, not absent for the heartbeat timeout.
	stopBurn := burnCPU(t, 2)
	require.NoError(t, w.Process.Signal(syscall.SIGSTOP))
	time.Sleep(4 * time.Second) // the pause under test, not a wait for a condition
	require.NoError(t, w.Process.Signal(syscall.SIGCONT))

	evs := turnEnd(t, id, 1)
	stopBurn()
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind, "%v", data)
	require.Equal(t, "end_turn", data["stop_reason"])
	require.Empty(t, restarts(t, evs), "the starved worker's attempt was never taken for lost")
	texts := agentTexts(t, evs, 1)
	require.Len(t, texts, chunks, "every chunk journaled once")
	for i, text := range texts {
		require.Equal(t, fmt.Sprintf("chunk %d\n", i+1), text)
	}
	checkInvariants(t, allEvents(t, id))
}

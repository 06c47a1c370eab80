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
	"github.com/tacp-dev/tacp/tacpclient"
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
	qc := tacpclient.NewClient(tc, queue)
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

// Backpressure (issue 35): a worker that runs as many turns as it may (-turns.max) takes no
// more. A turn sent to it — by affinity, to the worker that holds its session's agent — goes
// back to the session queue at once and waits there, scheduled, while status says it waits
// for a worker with room; it runs when the running turn ends, once, nothing restarted.
func TestAFullWorkerLeavesNewTurnsWaitingInTheQueue(t *testing.T) {
	t.Parallel()
	queue := "tacp-full-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	startWorkerProcess(t, queue, "TACP_E2E_MAX_TURNS=1")
	ctx := ctxFor(t, 2*time.Minute)

	waiting := signals.SessionConfig{SessionID: session(t) + "-waiting"}
	_, err := qc.Prompt(ctx, waiting, signals.PromptRequest{Text: "/chunks 1", ClientMessageID: "w-1"})
	require.NoError(t, err)
	turnEnd(t, waiting.SessionID, 1) // its agent now lives on the worker: the next turn goes there first

	busy := signals.SessionConfig{SessionID: session(t) + "-busy"}
	_, err = qc.Prompt(ctx, busy, signals.PromptRequest{Text: "/chunks 100 every 50ms", ClientMessageID: "b-1"})
	require.NoError(t, err)
	waitRunning(t, busy.SessionID, 1)

	_, err = qc.Prompt(ctx, waiting, signals.PromptRequest{Text: "/chunks 3", ClientMessageID: "w-2"})
	require.NoError(t, err)
	var wait *signals.WorkerWait
	require.Eventually(t, func() bool {
		st, err := qc.Status(ctx, waiting.SessionID)
		require.NoError(t, err)
		wait = st.WaitingWorker
		return wait != nil
	}, time.Minute, 50*time.Millisecond, "status says the turn waits for a worker with room")
	require.Equal(t, int64(2), wait.TurnID)
	st, err := qc.Status(ctx, busy.SessionID)
	require.NoError(t, err)
	require.Equal(t, signals.StateRunning, st.State, "the waiting turn waits while the worker's one turn runs")
	require.Nil(t, st.WaitingWorker, "the running turn does not wait")

	for _, c := range []struct {
		id   string
		turn int64
	}{{busy.SessionID, 1}, {waiting.SessionID, 2}} {
		evs := turnEnd(t, c.id, c.turn)
		kind, data := terminalData(t, evs)
		require.Equal(t, signals.EventTurnEnded, kind, "%s: %v", c.id, data)
		require.Empty(t, restarts(t, evs), "%s: nothing restarted", c.id)
		checkInvariants(t, allEvents(t, c.id))
	}
	require.Equal(t, []string{"chunk 1\n", "chunk 2\n", "chunk 3\n"}, agentTexts(t, allEvents(t, waiting.SessionID), 2))
}

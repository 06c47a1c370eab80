package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/workflows/session"
)

// TestFailoverCostTable prints what a turn that fails over to another worker costs in
// billable actions. Two worker processes poll one task queue. In each round a session's
// turn streams to its end, then another session's same turn streams until its viewer sees
// the first chunk, and the worker that runs it (status's agent host) is killed (SIGKILL) and
// replaced. The killed turn restarts on the other worker once its heartbeat times out, and
// its session's actions, read from history, are set beside the turn that ran undisturbed.
// Each turn is one chunk every 50 ms for 3 s, followed by a viewer as a person would.
//
//	TACP_BENCH=1 go test ./bench -run TestFailoverCostTable -v
func TestFailoverCostTable(t *testing.T) {
	if os.Getenv("TACP_BENCH") != "1" {
		t.Skip("set TACP_BENCH=1 to measure what a failover costs")
	}
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("TACP_BENCH_FAILOVER_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	const text = "/chunks 60 every 50ms"
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*2*time.Minute)
	defer cancel()

	queue := "tacp-bench-failover-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(env.c, queue)
	var procs []*workerProc
	t.Cleanup(func() {
		for _, p := range procs {
			p.stop()
		}
	})
	var sessions []string
	t.Cleanup(func() { // before the workers stop: a session closes while a worker polls
		for _, id := range sessions {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			_, _ = qc.Close(ctx, id, signals.CloseRequest{Reason: "bench"})
			cancel()
		}
	})
	start := func() *workerProc {
		p := startWorkerProcOn(t, "failover", queue, len(procs)+1, 0, 0)
		procs = append(procs, p)
		waitPollerPID(t, queue, p)
		return p
	}

	// turn runs text in a new session and follows it to its end; at its first agent update it
	// calls atFirst (nil: nothing). It returns the session's actions and the turn's events.
	turn := func(name string, atFirst func()) (tacpclient.Actions, []signals.Event) {
		id := fmt.Sprintf("bench-failover-%s-%s", name, signals.NewID()[:8])
		sessions = append(sessions, id)
		res, err := qc.Prompt(ctx, signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: text, ClientMessageID: signals.NewID()})
		require.NoError(t, err)
		var evs []signals.Event
		err = qc.Watch(ctx, id, 0, func(ev signals.Event) bool {
			if ev.TurnID != res.TurnID {
				return true
			}
			evs = append(evs, ev)
			if ev.Kind == signals.EventAgentUpdate && atFirst != nil {
				atFirst()
				atFirst = nil
			}
			return !signals.IsTerminal(ev.Kind)
		})
		require.NoError(t, err)
		require.Equal(t, signals.EventTurnEnded, evs[len(evs)-1].Kind, "the turn ends, on whichever worker")
		a, err := qc.Actions(ctx, id)
		require.NoError(t, err)
		return a, evs
	}

	var plain, failed []tacpclient.Actions
	var restartAfter []time.Duration
	workers := []*workerProc{start(), start()}
	for range rounds {
		a, _ := turn("plain", nil)
		plain = append(plain, a)
		var killed time.Time
		var id string
		a, evs := turn("killed", func() {
			id = sessions[len(sessions)-1]
			st, err := qc.Status(ctx, id)
			require.NoError(t, err)
			for i, p := range workers {
				if strings.Contains(st.AgentHost, fmt.Sprintf("-%d-", p.pid)) {
					killed = time.Now()
					require.NoError(t, syscall.Kill(p.pid, syscall.SIGKILL))
					<-p.done
					workers[i] = start()
					return
				}
			}
			t.Fatalf("session %s runs on %q, none of the workers", id, st.AgentHost)
		})
		restarted := false
		for _, ev := range evs {
			if ev.Kind == signals.EventTurnRestarted {
				restarted = true
				restartAfter = append(restartAfter, ev.At.Sub(killed))
				break
			}
		}
		require.True(t, restarted, "the killed worker's turn restarts on the other")
		failed = append(failed, a)
	}

	fmt.Printf("\nA turn that fails over to another worker, in billable actions from the session's history (%d rounds, %q, heartbeat timeout %v; load %s)\n",
		rounds, text, session.TurnHeartbeat, loadAvg())
	fmt.Printf("| a session's first turn | on one worker | its worker killed after the first chunk | the failover |\n|---|---|---|---|\n")
	printBeside(plain, failed, actionRows{
		{"turn_events signals", func(a tacpclient.Actions) int64 { return a.SignalsByName[signals.SignalTurnEvents] }},
		{"all signals", func(a tacpclient.Actions) int64 { return a.Signals }},
		{"updates", func(a tacpclient.Actions) int64 { return a.Updates }},
		{"timers", func(a tacpclient.Actions) int64 { return a.Timers }},
		{"activities and their retries", func(a tacpclient.Actions) int64 { return a.Activities }},
		{"upserts, side effects, local activities", func(a tacpclient.Actions) int64 { return a.Other }},
		{"**actions in history**", func(a tacpclient.Actions) int64 { return a.Total }},
		{"history events", func(a tacpclient.Actions) int64 { return a.HistoryEvents }},
	})
	var sum time.Duration
	for _, d := range restartAfter {
		sum += d
	}
	fmt.Printf("(kill → turn.restarted: %v on average; the turn reruns whole on the other worker, so what streamed before the kill streams again; heartbeats and the viewer's queries are not in history)\n",
		(sum / time.Duration(len(restartAfter))).Round(10*time.Millisecond))
}

// waitPollerPID returns once worker p polls queue's workflow tasks: the SDK names a poller
// "<pid>@<host>@", and a worker killed a moment ago stays in the list of pollers for a while,
// so a count of pollers would not tell.
func waitPollerPID(t testing.TB, queue string, p *workerProc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prefix := strconv.Itoa(p.pid) + "@"
	for {
		if gone, log := p.exited(); gone {
			out, _ := os.ReadFile(log)
			t.Fatalf("worker process exited before it polled (%s):\n%s", log, out)
		}
		res, err := env.c.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		if err == nil {
			for _, pl := range res.GetPollers() {
				if strings.HasPrefix(pl.GetIdentity(), prefix) {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("worker process %d does not poll %s (last: %v)", p.pid, queue, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

package bench

// Affinity (contract §10): what running a session's turns on the worker that holds its agent
// costs and saves, on workers in this process that share a task queue but have data and
// transcript directories of their own, as separate machines have (workspace roots shared, as
// the README asks of a multi-machine deployment):
//
//   - Warm turn. A zero-work turn on a warm session of a 3-worker cluster (the turn goes
//     through the holder's host queue) against the same turn on a single worker (the
//     session queue, where the activity can start eagerly), round by round, side by side.
//   - Agent starts. 100 turns across 20 sessions (5 each, the sessions at once) on the
//     3 workers: agent processes started (target: one per session) and sessions whose agent
//     is alive on more than one worker afterwards (target: none).
//   - Fallback. The holder's worker is stopped; the session's next zero-work turn waits for
//     the host queue (the affinity bound, 3 s by default), then runs on another worker,
//     whose agent cannot load the session (agent.context_lost, the transcript carried over).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/testagent/agent"
	"github.com/tacp-dev/tacp/worker/tacpworker"
	"github.com/tacp-dev/tacp/workflows/session"
)

// benchCluster is workers in this process on one task queue, each with its own data and
// transcript directories, sharing the workspace roots; their agents leave one file per
// start in starts.
type benchCluster struct {
	t       testing.TB
	name    string
	queue   string
	sc      *tacpclient.Client
	starts  string
	seq     int
	workers map[string]*tacpworker.Worker // by host queue
}

func startBenchCluster(t testing.TB, name string, n int) *benchCluster {
	c := &benchCluster{
		t: t, name: name, queue: "tacp-bench-" + name + "-" + signals.NewID()[:8],
		starts: filepath.Join(env.tmp, name+"-starts"), workers: map[string]*tacpworker.Worker{},
	}
	c.sc = tacpclient.NewClient(env.c, c.queue)
	// One cleanup for every worker, replacements included, registered before any session's
	// close: the sessions close while their workers still poll.
	t.Cleanup(func() {
		for _, w := range c.workers {
			w.Stop()
		}
	})
	for range n {
		c.add()
	}
	return c
}

// add starts one more worker.
func (c *benchCluster) add() {
	c.seq++
	dir := filepath.Join(env.tmp, fmt.Sprintf("%s-%d", c.name, c.seq))
	w, err := tacpworker.Start(env.c, tacpworker.Options{
		TaskQueue:      c.queue,
		DataDir:        filepath.Join(dir, "data"),
		WorkspaceRoots: []string{filepath.Join(env.tmp, c.name+"-workspaces")},
		// Room for every session's agent: evictions would be agent starts affinity did not cause.
		MaxAgents: 32,
		Profiles: []activities.Profile{{
			Name:    activities.DefaultProfile,
			Command: strconv.Quote(env.agentBinary) + " -transcripts " + strconv.Quote(filepath.Join(dir, "transcripts")),
			Env:     map[string]string{agent.StartsDirEnv: c.starts},
		}},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.workers[w.Host.Queue] = w
}

// stop stops the worker on host queue host (its agents die with it).
func (c *benchCluster) stop(host string) {
	w, ok := c.workers[host]
	if !ok {
		c.t.Fatalf("no worker on %q", host)
	}
	w.Stop()
	delete(c.workers, host)
}

// agentStarts is how many agent processes the cluster's workers started so far.
func (c *benchCluster) agentStarts() int {
	entries, err := os.ReadDir(c.starts)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return len(entries)
}

// holders is how many workers hold a live agent of session id.
func (c *benchCluster) holders(id string) int {
	n := 0
	for _, w := range c.workers {
		if w.Host.AgentPID(id) != 0 {
			n++
		}
	}
	return n
}

// fallbackTurn is one turn after its holder's worker was stopped.
type fallbackTurn struct {
	holders int // workers holding a live agent of the session before the stop (target 1)
	lost    bool
	moved   time.Duration // prompt → the new host's turn_started journaled (agent.context_lost `at`)
	total   time.Duration // prompt → turn.ended visible
}

// fallback stops the worker holding s's agent, starts another in its place (untimed), and
// times s's next zero-work turn.
func (c *benchCluster) fallback(ctx context.Context, s *tacpSession) (fallbackTurn, error) {
	var f fallbackTurn
	if _, err := s.settle(ctx); err != nil {
		return f, err
	}
	st, err := s.sc.Status(ctx, s.id)
	if err != nil {
		return f, err
	}
	if _, ok := c.workers[st.AgentHost]; !ok {
		return f, fmt.Errorf("session %s: its agent's host %q is not a live worker", s.id, st.AgentHost)
	}
	f.holders = c.holders(s.id)
	c.stop(st.AgentHost)
	c.add()
	from := s.lastSeq
	r, err := s.turn(ctx, zeroWork)
	if err != nil {
		return f, err
	}
	f.total = r.visible.Sub(r.start)
	var lost time.Time
	err = s.sc.Watch(ctx, s.id, from, func(ev signals.Event) bool {
		if ev.TurnID == r.turnID && ev.Kind == signals.EventAgentContextLost {
			lost = ev.At
		}
		return !(ev.TurnID == r.turnID && ev.Kind == signals.EventTurnEnded)
	})
	if err != nil {
		return f, err
	}
	// No agent.context_lost: the turn found a live agent of the session on another worker.
	if f.lost = !lost.IsZero(); f.lost {
		f.moved = lost.Sub(r.start)
	}
	after, err := s.sc.Status(ctx, s.id)
	if err != nil {
		return f, err
	}
	if after.AgentHost == st.AgentHost {
		return f, fmt.Errorf("turn %d of %s ran on the stopped worker", r.turnID, s.id)
	}
	return f, nil
}

// TestAffinityTable prints the affinity figures the README quotes:
//
//	TACP_BENCH=1 go test ./bench -run TestAffinityTable -v
//
// TACP_BENCH_TURNS (default 100) sets the warm-turn rounds, TACP_BENCH_FALLBACKS (default 5)
// the fallbacks timed.
func TestAffinityTable(t *testing.T) {
	if os.Getenv("TACP_BENCH") != "1" {
		t.Skip("set TACP_BENCH=1 to measure affinity")
	}
	rounds := envInt(t, "TACP_BENCH_TURNS", 100)
	fallbacks := envInt(t, "TACP_BENCH_FALLBACKS", 5)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	single := startBenchCluster(t, "aff-single", 1)
	three := startBenchCluster(t, "aff-three", 3)
	var sessions []*tacpSession
	t.Cleanup(func() {
		for _, s := range sessions {
			if err := s.close(); err != nil {
				t.Error(err)
			}
		}
	})
	open := func(c *benchCluster) *tacpSession {
		s, err := newTacpSession(ctx, c.sc)
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
		return s
	}

	// Warm turns, one worker and three, round by round.
	const warmup = 5
	one, aff := open(single), open(three)
	var warmOne, warmAff []time.Duration
	for i := range warmup + rounds {
		for _, w := range []struct {
			s   *tacpSession
			out *[]time.Duration
		}{{one, &warmOne}, {aff, &warmAff}} {
			if _, err := w.s.settle(ctx); err != nil {
				t.Fatal(err)
			}
			r, err := w.s.turn(ctx, zeroWork)
			if err != nil {
				t.Fatal(err)
			}
			if i >= warmup {
				*w.out = append(*w.out, r.visible.Sub(r.start))
			}
		}
	}
	warmStarts := three.agentStarts()
	t.Logf("warm turns done")

	// 100 turns across 20 sessions on the three workers, the sessions at once.
	const nSessions, perSession = 20, 5
	before := three.agentStarts()
	many := make([]*tacpSession, nSessions)
	errs := make([]error, nSessions)
	var wg sync.WaitGroup
	for i := range many {
		many[i] = &tacpSession{sc: three.sc, id: "bench-aff-" + signals.NewID()}
		sessions = append(sessions, many[i])
		wg.Go(func() {
			for range perSession {
				if _, err := many[i].turn(ctx, zeroWork); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	starts := three.agentStarts() - before
	t.Logf("20 sessions done")
	spread := 0
	for _, s := range many {
		if three.holders(s.id) > 1 {
			spread++
		}
	}

	// Fallback: a fresh warm session's holder stopped (and replaced), its next turn.
	var moved, total []time.Duration
	doubled := 0
	for range fallbacks {
		s := open(three)
		if _, err := s.turn(ctx, zeroWork); err != nil {
			t.Fatal(err)
		}
		f, err := three.fallback(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if f.lost {
			moved = append(moved, f.moved)
		}
		if f.holders > 1 {
			doubled++
		}
		total = append(total, f.total)
		t.Logf("fallback %d: %s (holders before %d, context lost %v)", len(total), f.total, f.holders, f.lost)
	}

	fmt.Printf("Affinity: warm zero-work turn, prompt → turn.ended visible (%d rounds side by side)\n", rounds)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "setup\tn\tp50 ms\tp99 ms\tmax ms")
	for _, row := range []struct {
		name, key string
		lat       []time.Duration
	}{
		{"1 worker (session queue)", "affinity/warm_1_worker", warmOne},
		{"3 workers, affinity (the holder's host queue)", "affinity/warm_3_workers", warmAff},
	} {
		s := statsOf(row.lat)
		recordFigure(t, row.key, s.n, s.p50, s.p99)
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\n", row.name, s.n, s.p50, s.p99, s.max)
	}
	flushTable(t, tw)
	fmt.Printf("Agent starts: the warm session's %d+%d turns started %d agent; %d turns across %d sessions on 3 workers started %d agents (target %d), %d sessions with live agents on more than one worker\n\n",
		1, warmup+rounds, warmStarts, nSessions*perSession, nSessions, starts, nSessions, spread)
	fmt.Printf("Fallback: the holder's worker stopped, the next zero-work turn (%d times; affinity bound %s, the new worker's agent cannot load the session; %d sessions had a live agent on a second worker)\n", fallbacks, session.DefaultAffinityWait, doubled)
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "segment\tn\tp50 ms\tp99 ms\tmax ms")
	for _, row := range []struct {
		name, key string
		lat       []time.Duration
	}{
		{"prompt → turn started on another worker (agent.context_lost journaled)", "affinity/fallback_moved", moved},
		{"prompt → turn.ended visible", "affinity/fallback_total", total},
	} {
		s := statsOf(row.lat)
		recordFigure(t, row.key, s.n, s.p50, s.p99)
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\n", row.name, s.n, s.p50, s.p99, s.max)
	}
	flushTable(t, tw)
}

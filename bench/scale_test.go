package bench

// Scale: one worker carrying many idle sessions while many turns stream at once.
//
// A fresh tacp worker (tacpworker.Start, in this process, on a task queue of its own) gets
// TACP_BENCH_SCALE_SESSIONS sessions (default 1,000). Each is created by a zero-work prompt
// (`/chunks 0`) whose turn has finished, so it is idle the way a real session is between
// turns: a journal, a closed TurnWorkflow, an agent session id, and an agent process that was
// started and, past the worker's cap on live agents, evicted again. Then
// TACP_BENCH_SCALE_TURNS of them (default 50) stream `/chunks N every 20ms stamp` at once
// (N: TACP_BENCH_SCALE_CHUNKS, default 250), each watched by its own viewer that runs the
// events query when its session's history grows (signals.Follower; TACP_BENCH_SCALE_POLL_MS
// makes the viewers poll on a clock instead, as they did before). A chunk's latency is the
// time its viewer's query returned it minus the agent's stamp.
//
// The baseline is the same stream through one session alone on the same worker, before the
// idle sessions exist. One session streaming alone among the idle ones separates what idle
// sessions cost from what concurrency costs.
//
// Memory is the whole test process's (/proc/self/status VmRSS, VmHWM; runtime.MemStats):
// besides the scale worker it holds the in-process Temporal server, the fixture's worker
// with its two busy sessions, and the test's clients and viewers. Agent processes are
// separate processes, counted and measured apart.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/internal/tacpworker"
	"github.com/tacp-dev/tacp/signals"
)

// scalePoll, when set (TACP_BENCH_SCALE_POLL_MS), is how often each viewer of the scale
// test polls the events query, as viewers did before they woke on history; 0 (the default):
// each viewer queries when its session's history grows (signals.Follower).
var scalePoll time.Duration

const (
	// scaleMemEvery is how often memory is sampled during a stream.
	scaleMemEvery = 250 * time.Millisecond
)

// scaleBench is the scale test's worker and its sessions.
type scaleBench struct {
	sc     *signals.Client
	worker *tacpworker.Worker
	chunks int
}

// scaleSession is one session and how far its viewer has read its journal.
type scaleSession struct {
	id      string
	lastSeq int64
}

// errTally counts failures of any kind by kind, keeping the first of each as an example.
type errTally struct {
	mu    sync.Mutex
	n     map[string]int
	first map[string]string
}

func newErrTally() *errTally { return &errTally{n: map[string]int{}, first: map[string]string{}} }

func (e *errTally) add(kind string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n[kind]++
	if _, ok := e.first[kind]; !ok && err != nil {
		e.first[kind] = err.Error()
	}
}

func (e *errTally) total() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.n {
		n += c
	}
	return n
}

func (e *errTally) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(e.n)) {
		parts = append(parts, fmt.Sprintf("%s ×%d (first: %s)", k, e.n[k], e.first[k]))
	}
	return strings.Join(parts, "; ")
}

// follow reads s's journal, when the session's history grows (or every scalePoll), until
// turn's terminal event is visible and returns the stamped chunks of that turn as its
// viewer saw them. A failed query is tallied and asked again; ok is false when the turn
// failed or could not be followed to its end.
func (b *scaleBench) follow(ctx context.Context, s *scaleSession, turn int64, errs *errTally) (seen []seenChunk, ok bool) {
	var next <-chan time.Time
	var fl *signals.Follower
	if scalePoll > 0 {
		tick := time.NewTicker(scalePoll)
		defer tick.Stop()
		next = tick.C
	} else {
		fctx, stop := context.WithCancel(ctx)
		defer stop()
		fl = b.sc.Follow(fctx, s.id)
	}
	for {
		done := func() {}
		if fl != nil {
			done = fl.Querying()
		}
		res, err := b.sc.Events(ctx, s.id, s.lastSeq, 0)
		done()
		now := time.Now()
		if err != nil && ctx.Err() == nil {
			errs.add("events query failed", err)
		}
		if err == nil {
			if res.Gap {
				errs.add("journal gap", fmt.Errorf("session %s: events after %d dropped by retention", s.id, s.lastSeq))
			}
			for _, ev := range res.Events {
				s.lastSeq = ev.Seq
				if ev.TurnID != turn {
					continue
				}
				switch ev.Kind {
				case signals.EventAgentUpdate:
					if i, at, ok := stampOf(ev.Data); ok {
						seen = append(seen, seenChunk{index: i, stamp: at, journaled: ev.At, visible: now})
					}
				case signals.EventTurnRestarted:
					errs.add("turn restarted", fmt.Errorf("session %s turn %d: %s", s.id, turn, ev.Data))
				case signals.EventTurnFailed:
					errs.add("turn failed", fmt.Errorf("session %s turn %d: %s", s.id, turn, ev.Data))
					return seen, false
				case signals.EventTurnEnded:
					return seen, true
				}
			}
			if res.LastSeq > s.lastSeq {
				continue // a full page: read on at once
			}
		}
		var woken <-chan struct{}
		if fl != nil {
			woken = fl.Ready()
			if err != nil { // a failed query is asked again after a pause, not at once
				woken = nil
				next = time.After(50 * time.Millisecond)
			}
		}
		select {
		case <-ctx.Done():
			errs.add("turn not seen to its end", fmt.Errorf("session %s turn %d: %w", s.id, turn, ctx.Err()))
			return seen, false
		case <-next:
		case <-woken:
		}
	}
}

// create starts session id with a zero-work turn and returns once its turn.ended is
// visible. It waits for the TurnWorkflow to close (a long poll) before it polls the
// journal, so that creating many sessions at once does not flood the server with queries.
func (b *scaleBench) create(ctx context.Context, id string, errs *errTally) (*scaleSession, bool) {
	s := &scaleSession{id: id}
	res, err := b.sc.Prompt(ctx, signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: zeroWork})
	if err != nil {
		errs.add("prompt failed", fmt.Errorf("session %s: %w", id, err))
		return s, false
	}
	// The TurnWorkflow's own result does not matter here: follow reads the turn's outcome
	// from the journal. The child may not have started yet when the prompt is answered.
	for {
		err := b.sc.Temporal.GetWorkflow(ctx, signals.TurnWorkflowID(id, res.TurnID), "").Get(ctx, nil)
		var notFound *serviceerror.NotFound
		if !errors.As(err, &notFound) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, ok := b.follow(ctx, s, res.TurnID, errs)
	return s, ok
}

// streamOne runs one stamped streaming turn on s and checks that every chunk was seen
// exactly once.
func (b *scaleBench) streamOne(ctx context.Context, s *scaleSession, errs *errTally) []seenChunk {
	res, err := b.sc.Prompt(ctx, signals.SessionConfig{SessionID: s.id}, signals.PromptRequest{Text: streamPrompt(b.chunks)})
	if err != nil {
		errs.add("prompt failed", fmt.Errorf("session %s: %w", s.id, err))
		return nil
	}
	seen, _ := b.follow(ctx, s, res.TurnID, errs)
	got := map[int]int{}
	for _, c := range seen {
		got[c.index]++
	}
	for i := 1; i <= b.chunks; i++ {
		switch n := got[i]; {
		case n == 0:
			errs.add("chunk missing", fmt.Errorf("session %s turn %d: chunk %d never seen", s.id, res.TurnID, i))
		case n > 1:
			errs.add("chunk seen twice", fmt.Errorf("session %s turn %d: chunk %d seen %d times", s.id, res.TurnID, i, n))
		}
	}
	return seen
}

// memSample is the test process's memory at one moment.
type memSample struct {
	rss, hwm   int64 // bytes, /proc/self/status
	heapInuse  uint64
	goroutines int
}

func readMem() memSample {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	rss, hwm := procMem("self")
	return memSample{rss: rss, hwm: hwm, heapInuse: m.HeapInuse, goroutines: runtime.NumGoroutine()}
}

// procMem reads VmRSS and VmHWM of a process (pid or "self") in bytes; 0 when unreadable.
func procMem(pid string) (rss, hwm int64) {
	f, err := os.Open(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			continue
		}
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	return rss, hwm
}

// memWatch samples memory every scaleMemEvery and keeps the maxima.
type memWatch struct {
	stop chan struct{}
	done chan memSample
}

func watchMem() *memWatch {
	w := &memWatch{stop: make(chan struct{}), done: make(chan memSample, 1)}
	go func() {
		peak := readMem()
		t := time.NewTicker(scaleMemEvery)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				m := readMem()
				peak.rss, peak.hwm = max(peak.rss, m.rss), max(peak.hwm, m.hwm)
				peak.heapInuse, peak.goroutines = max(peak.heapInuse, m.heapInuse), max(peak.goroutines, m.goroutines)
				w.done <- peak
				return
			case <-t.C:
				m := readMem()
				peak.rss, peak.heapInuse, peak.goroutines = max(peak.rss, m.rss), max(peak.heapInuse, m.heapInuse), max(peak.goroutines, m.goroutines)
			}
		}
	}()
	return w
}

func (w *memWatch) end() memSample {
	close(w.stop)
	return <-w.done
}

// scalePhase is one streaming phase: some sessions streaming at once on the scale worker.
type scalePhase struct {
	name     string
	sessions int // sessions on the worker
	turns    int
	sent     int
	chunks   []seenChunk
	errs     *errTally
	took     time.Duration
	peak     memSample // maxima during the stream
	heapLive uint64    // after the stream and a GC
	agents   int       // live agent processes of the scale worker after the stream
	agentRSS int64
}

// stream streams on every session of streaming at once, with the memory watched, and
// counts the scale worker's live agents among all afterwards.
func (b *scaleBench) stream(ctx context.Context, name string, streaming, all []*scaleSession) scalePhase {
	p := scalePhase{name: name, sessions: len(all), turns: len(streaming), sent: b.chunks * len(streaming), errs: newErrTally()}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	w := watchMem()
	start := time.Now()
	for _, s := range streaming {
		wg.Go(func() {
			seen := b.streamOne(ctx, s, p.errs)
			mu.Lock()
			p.chunks = append(p.chunks, seen...)
			mu.Unlock()
		})
	}
	wg.Wait()
	p.took = time.Since(start)
	p.peak = w.end()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	p.heapLive = m.HeapAlloc
	p.agents, p.agentRSS = b.liveAgents(all)
	return p
}

// liveAgents counts the agent processes the scale worker keeps for sessions, and their RSS.
func (b *scaleBench) liveAgents(sessions []*scaleSession) (n int, rss int64) {
	for _, s := range sessions {
		if pid := b.worker.Host.AgentPID(s.id); pid != 0 {
			n++
			r, _ := procMem(strconv.Itoa(pid))
			rss += r
		}
	}
	return n, rss
}

// creation is the creation of the idle sessions.
type creation struct {
	n, parallel int
	took        time.Duration
	each        []time.Duration
	errs        *errTally
}

// createAll creates n idle sessions, at most parallel at a time.
func (b *scaleBench) createAll(ctx context.Context, prefix string, n, parallel int) ([]*scaleSession, creation) {
	c := creation{n: n, parallel: parallel, errs: newErrTally()}
	sessions := make([]*scaleSession, n)
	each := make([]time.Duration, n)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t0 := time.Now()
			sessions[i], _ = b.create(ctx, fmt.Sprintf("%s-%04d", prefix, i), c.errs)
			each[i] = time.Since(t0)
		})
	}
	wg.Wait()
	c.took, c.each = time.Since(start), each
	return sessions, c
}

// closeAll closes sessions, at most parallel at a time, and waits for their workflows.
func closeAll(sessions []*scaleSession, parallel int) (time.Duration, *errTally) {
	errs := newErrTally()
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	start := time.Now()
	for _, s := range sessions {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := env.closeSession(context.Background(), s.id); err != nil {
				errs.add("close failed", fmt.Errorf("%w%s", err, taskFailures(s.id)))
			}
		})
	}
	wg.Wait()
	return time.Since(start), errs
}

// taskFailures describes the failed and timed-out workflow tasks in a session's history
// (every run), which is what an update answered "unexpected workflow task failure" saw.
func taskFailures(sessionID string) string {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var (
		n     int
		first string
	)
	it := env.c.GetWorkflowHistory(ctx, signals.SessionWorkflowID(sessionID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return fmt.Sprintf(" (history: %v)", err)
		}
		if a := ev.GetWorkflowTaskFailedEventAttributes(); a != nil {
			n++
			if first == "" {
				first = fmt.Sprintf("failed, %s: %s", a.GetCause(), a.GetFailure().GetMessage())
			}
		}
		if a := ev.GetWorkflowTaskTimedOutEventAttributes(); a != nil {
			n++
			if first == "" {
				first = fmt.Sprintf("timed out (%s)", a.GetTimeoutType())
			}
		}
	}
	if n == 0 {
		return " (no failed workflow task in its history)"
	}
	return fmt.Sprintf(" (%d failed workflow tasks in its history; first %s)", n, first)
}

// TestScaleTable prints the scale figures the README quotes:
//
//	TACP_BENCH=1 go test ./bench -run TestScaleTable -v
//
// TACP_BENCH_SCALE_SESSIONS (default 1000) sets the idle sessions, TACP_BENCH_SCALE_TURNS
// (default 50) the turns streaming at once, TACP_BENCH_SCALE_CHUNKS (default 250) the
// chunks of each, and TACP_BENCH_SCALE_PARALLEL (default 32) how many sessions are created
// at a time.
func TestScaleTable(t *testing.T) {
	if os.Getenv("TACP_BENCH") != "1" {
		t.Skip("set TACP_BENCH=1 to measure tacp at scale")
	}
	nSessions := envInt(t, "TACP_BENCH_SCALE_SESSIONS", 1000)
	nTurns := envInt(t, "TACP_BENCH_SCALE_TURNS", 50)
	chunks := envInt(t, "TACP_BENCH_SCALE_CHUNKS", 250)
	parallel := envInt(t, "TACP_BENCH_SCALE_PARALLEL", 32)
	if os.Getenv("TACP_BENCH_SCALE_POLL_MS") != "" {
		scalePoll = time.Duration(envInt(t, "TACP_BENCH_SCALE_POLL_MS", 50)) * time.Millisecond
	}
	if nSessions <= nTurns {
		t.Fatalf("TACP_BENCH_SCALE_SESSIONS=%d: want more sessions than TACP_BENCH_SCALE_TURNS=%d", nSessions, nTurns)
	}
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
		defer cancel()
	}
	before := readMem()

	// The cap on live agents past which the least recently used idle one is stopped: at
	// least every streaming turn's agent plus the two single streams' (the default, 64, fits
	// the default 50 turns; more turns raise it).
	maxAgents := max(activities.DefaultMaxAgents, nTurns+2)
	w, sc := startBenchWorker(t, "scale", tacpworker.Options{MaxAgents: maxAgents, FlushMaxRate: float64(envInt(t, "TACP_BENCH_SCALE_FLUSH_RATE", 0))})
	b := &scaleBench{sc: sc, worker: w, chunks: chunks}
	prefix := "bench-scale-" + signals.NewID()[:8]
	var sessions []*scaleSession
	closed := false
	t.Cleanup(func() { // a test that stopped early still closes what it started
		if !closed {
			_, _ = closeAll(sessions, parallel)
		}
	})

	// The baseline: one session alone on the worker.
	alone, aloneCreate := b.createAll(ctx, prefix+"-alone", 1, 1)
	sessions = append(sessions, alone...)
	if aloneCreate.errs.total() > 0 {
		t.Fatalf("baseline session: %s", aloneCreate.errs)
	}
	base := b.stream(ctx, "1 session alone (baseline)", alone, alone)

	idle, created := b.createAll(ctx, prefix, nSessions, parallel)
	sessions = append(sessions, idle...)
	all := append(slices.Clone(alone), idle...)
	idleMem := readMem()
	idleAgents, idleAgentRSS := b.liveAgents(all)

	// The streaming sessions are spread over the creation order, so that most of their
	// agents were evicted and start again; the single one is the first session not among them.
	chosen := map[int]bool{}
	var streaming []*scaleSession
	for i := range nTurns {
		chosen[i*nSessions/nTurns] = true
		streaming = append(streaming, idle[i*nSessions/nTurns])
	}
	single := 0
	for chosen[single] {
		single++
	}
	oneIdle := b.stream(ctx, fmt.Sprintf("1 session among %d idle", nSessions), idle[single:single+1], all)
	many := b.stream(ctx, fmt.Sprintf("%d sessions among %d idle", nTurns, nSessions), streaming, all)

	closeTook, closeErrs := closeAll(sessions, parallel)
	closed = true

	printScaleTable(t, scaleFigures{
		chunks: chunks, maxAgents: maxAgents, before: before,
		idleMem: idleMem, idleAgents: idleAgents, idleAgentRSS: idleAgentRSS,
		aloneCreate: aloneCreate, created: created,
		closed: len(sessions), closeTook: closeTook, closeErrs: closeErrs,
		phases: []scalePhase{base, oneIdle, many},
	})
	for _, p := range []scalePhase{base, oneIdle, many} {
		if p.errs.total() > 0 {
			t.Logf("%s: errors: %s", p.name, p.errs)
		}
	}
	if created.errs.total() > 0 {
		t.Logf("creating %d sessions: errors: %s", nSessions, created.errs)
	}
	if closeErrs.total() > 0 {
		t.Logf("closing %d sessions: errors: %s", len(sessions), closeErrs)
	}
}

type scaleFigures struct {
	chunks, maxAgents    int
	before, idleMem      memSample
	idleAgents           int
	idleAgentRSS         int64
	aloneCreate, created creation
	closed               int
	closeTook            time.Duration
	closeErrs            *errTally
	phases               []scalePhase // baseline first, the concurrent stream last
}

func mib[T int64 | uint64](n T) float64 { return float64(n) / (1 << 20) }

func printScaleTable(t testing.TB, f scaleFigures) {
	viewers := "a viewer woken by its history"
	if scalePoll > 0 {
		viewers = "an events poller every " + scalePoll.String()
	}
	fmt.Printf("Scale: %d idle sessions on one worker, then %d turns streaming at once (%d chunks each at %d/s, each watched by %s; targets: no errors, p99 ≤ 1 s)\n",
		f.created.n, f.phases[len(f.phases)-1].turns, f.chunks, int(time.Second/chunkEvery), viewers)
	fmt.Printf("memory is the test process's: the in-process Temporal server, the fixture's worker (2 busy sessions) and the test besides the scale worker; before the scale worker: RSS %.0f MiB, Go heap in use %.0f MiB, %d goroutines\n",
		mib(f.before.rss), mib(f.before.heapInuse), f.before.goroutines)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "figure")
	for _, p := range f.phases {
		fmt.Fprintf(tw, "\t%s", p.name)
	}
	fmt.Fprintln(tw, "\tratio (last / baseline)")
	base, last := f.phases[0], f.phases[len(f.phases)-1]
	row := func(name string, val func(p scalePhase) float64, format string, ratio bool) {
		fmt.Fprint(tw, name)
		for _, p := range f.phases {
			fmt.Fprintf(tw, "\t"+format, val(p))
		}
		if ratio && val(base) != 0 {
			fmt.Fprintf(tw, "\t%.2f", val(last)/val(base))
		} else {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprintln(tw)
	}
	lat := func(p scalePhase) (total, toJournal, toViewer stats) {
		var a, j, v []time.Duration
		for _, c := range p.chunks {
			a = append(a, c.latency())
			j = append(j, c.journaled.Sub(c.stamp))
			v = append(v, c.visible.Sub(c.journaled))
		}
		return statsOf(a), statsOf(j), statsOf(v)
	}
	row("sessions on the worker", func(p scalePhase) float64 { return float64(p.sessions) }, "%.0f", false)
	row("turns streaming at once", func(p scalePhase) float64 { return float64(p.turns) }, "%.0f", false)
	fmt.Fprint(tw, "stamped chunks seen / sent")
	for _, p := range f.phases {
		fmt.Fprintf(tw, "\t%d / %d", len(p.chunks), p.sent)
	}
	fmt.Fprintln(tw, "\t")
	row("errors (any kind)", func(p scalePhase) float64 { return float64(p.errs.total()) }, "%.0f", false)
	row("event path p50 ms (stamp → visible to the viewer)", func(p scalePhase) float64 { s, _, _ := lat(p); return s.p50 }, "%.1f", true)
	row("event path p99 ms", func(p scalePhase) float64 { s, _, _ := lat(p); return s.p99 }, "%.1f", true)
	row("event path max ms", func(p scalePhase) float64 { s, _, _ := lat(p); return s.max }, "%.1f", true)
	row("  stamp → journaled p99 ms (flush, signal, session task start)", func(p scalePhase) float64 { _, s, _ := lat(p); return s.p99 }, "%.1f", true)
	row("  journaled → visible p99 ms (task completes, wake-up or poll, query)", func(p scalePhase) float64 { _, _, s := lat(p); return s.p99 }, "%.1f", true)
	row("stream wall time s (prompts → last turn.ended seen)", func(p scalePhase) float64 { return p.took.Seconds() }, "%.1f", true)
	row("process RSS MiB, max during the stream", func(p scalePhase) float64 { return mib(p.peak.rss) }, "%.0f", true)
	row("process VmHWM MiB (peak so far)", func(p scalePhase) float64 { return mib(p.peak.hwm) }, "%.0f", false)
	row("Go heap in use MiB, max during the stream", func(p scalePhase) float64 { return mib(p.peak.heapInuse) }, "%.0f", true)
	row("Go heap live MiB after the stream (after GC)", func(p scalePhase) float64 { return mib(p.heapLive) }, "%.0f", true)
	row("goroutines, max during the stream", func(p scalePhase) float64 { return float64(p.peak.goroutines) }, "%.0f", true)
	fmt.Fprintf(tw, "live agent processes after the stream (their RSS MiB; cap %d)", f.maxAgents)
	for _, p := range f.phases {
		fmt.Fprintf(tw, "\t%d (%.0f)", p.agents, mib(p.agentRSS))
	}
	fmt.Fprintln(tw, "\t")
	each := func(c creation) string {
		s := statsOf(c.each)
		return fmt.Sprintf("%.1f s (%d at a time; each p50 %.0f / p99 %.0f ms)", c.took.Seconds(), c.parallel, s.p50, s.p99)
	}
	fmt.Fprintf(tw, "time to create the sessions (prompt `%s` → turn.ended seen)\t%s\t%s\t\t\n", zeroWork, each(f.aloneCreate), each(f.created))
	fmt.Fprintf(tw, "errors while creating\t%d\t%d\t\t\n", f.aloneCreate.errs.total(), f.created.errs.total())
	fmt.Fprintf(tw, "closing all %d sessions afterwards: time, errors\t\t%.1f s, %d\t\t\n", f.closed, f.closeTook.Seconds(), f.closeErrs.total())
	fmt.Fprintf(tw, "idle: process RSS / Go heap in use MiB, goroutines, live agents (RSS MiB)\t\t%.0f / %.0f, %d, %d (%.0f)\t\t\n",
		mib(f.idleMem.rss), mib(f.idleMem.heapInuse), f.idleMem.goroutines, f.idleAgents, mib(f.idleAgentRSS))
	flushTable(t, tw)
}

package bench

// Scale: workers carrying many idle sessions while many turns stream at once.
//
// A fresh tacp worker (tacpworker.Start, in this process, on a task queue of its own) — or,
// with TACP_BENCH_WORKERS=N, N worker processes sharing one (scaleworkers_test.go) — gets
// TACP_BENCH_SCALE_SESSIONS sessions (default 1,000). Each is created by a zero-work prompt
// (`/chunks 0`) whose turn has finished, so it is idle the way a real session is between
// turns: a journal, a closed RunTurn activity, an agent session id, and an agent process that was
// started and, past the worker's cap on live agents, evicted again. Then
// TACP_BENCH_SCALE_TURNS of them (default 50) stream `/chunks N every 20ms stamp` at once
// (N: TACP_BENCH_SCALE_CHUNKS, default 250), each watched by its own viewer that runs the
// events query when its session's history grows (tacpclient.Follower; TACP_BENCH_SCALE_POLL_MS
// makes the viewers poll on a clock instead, as they did before). A chunk's latency is the
// time its viewer's query returned it minus the agent's stamp.
//
// The baseline is the same stream through one session alone on the same worker, before the
// idle sessions exist. One session streaming alone among the idle ones separates what idle
// sessions cost from what concurrency costs.
//
// Memory is the whole test process's (/proc/self/status VmRSS, VmHWM; runtime.MemStats):
// besides an in-process scale worker it holds the in-process Temporal server (unless
// TACP_BENCH_ADDRESS names another), the fixture's worker with its two busy sessions, and
// the test's clients and viewers. Worker processes are measured each on its own, and so are
// the Temporal services named in TACP_BENCH_SERVER_PIDS (bench/cluster sets it). Agent
// processes are separate processes, counted and measured apart. A session's history events
// are its session workflow's history length (Describe): the session schedules its turns'
// RunTurn activities itself, so a turn writes no other history.

import (
	"bufio"
	"context"
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

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

// scalePoll, when set (TACP_BENCH_SCALE_POLL_MS), is how often each viewer of the scale
// test polls the events query, as viewers did before they woke on history; 0 (the default):
// each viewer queries when its session's history grows (tacpclient.Follower).
var scalePoll time.Duration

const (
	// scaleMemEvery is how often memory is sampled during a stream.
	scaleMemEvery = 250 * time.Millisecond
)

// scaleBench is the scale test's worker and its sessions.
type scaleBench struct {
	sc     *tacpclient.Client
	worker *tacpworker.Worker // the in-process worker; nil with worker processes
	procs  []*workerProc
	// servers are the Temporal services' processes by name (TACP_BENCH_SERVER_PIDS).
	servers map[string]int
	chunks  int
}

// scaleSession is one session and how far its viewer has read its journal.
type scaleSession struct {
	id       string
	lastSeq  int64
	lastTurn int64 // the turn its last prompt started
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
	var fl *tacpclient.Follower
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
// visible. It waits for the turn's RunTurn activity to close (a long poll on the session's
// history) before it polls the journal, so that creating many sessions at once does not
// flood the server with queries.
func (b *scaleBench) create(ctx context.Context, id string, errs *errTally) (*scaleSession, bool) {
	s := &scaleSession{id: id}
	res, err := b.sc.Prompt(ctx, signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: zeroWork})
	if err != nil {
		errs.add("prompt failed", fmt.Errorf("session %s: %w", id, err))
		return s, false
	}
	s.lastTurn = res.TurnID
	// How the activity closed does not matter here: follow reads the turn's outcome from the
	// journal, and reports a failed long poll as the turn not seen to its end.
	_ = awaitRunTurn(ctx, b.sc.Temporal, id)
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
	s.lastTurn = res.TurnID
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

// memSample is the test process's memory at one moment, and its worker processes' and
// Temporal services' when there are.
type memSample struct {
	rss, hwm   int64 // bytes, /proc/self/status
	heapInuse  uint64
	goroutines int
	workers    []int64 // RSS of each worker process, bytes
	servers    int64   // RSS of the Temporal services together, bytes
}

// readMem reads the test process's memory, its worker processes' and the services'.
func (b *scaleBench) readMem() memSample {
	m := readMem()
	for _, p := range b.procs {
		rss, _ := procMem(strconv.Itoa(p.pid))
		m.workers = append(m.workers, rss)
	}
	for _, pid := range b.servers {
		rss, _ := procMem(strconv.Itoa(pid))
		m.servers += rss
	}
	return m
}

// peakOf keeps the maxima of a and m (VmHWM only when takeHWM: it is read at the end).
func peakOf(a, m memSample, takeHWM bool) memSample {
	a.rss, a.heapInuse, a.goroutines = max(a.rss, m.rss), max(a.heapInuse, m.heapInuse), max(a.goroutines, m.goroutines)
	if takeHWM {
		a.hwm = max(a.hwm, m.hwm)
	}
	a.servers = max(a.servers, m.servers)
	for i, w := range m.workers {
		if i < len(a.workers) {
			a.workers[i] = max(a.workers[i], w)
		}
	}
	return a
}

// sum is the RSS of the worker processes together.
func (m memSample) sum() int64 {
	var n int64
	for _, w := range m.workers {
		n += w
	}
	return n
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

func (b *scaleBench) watchMem() *memWatch {
	w := &memWatch{stop: make(chan struct{}), done: make(chan memSample, 1)}
	go func() {
		peak := b.readMem()
		t := time.NewTicker(scaleMemEvery)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				w.done <- peakOf(peak, b.readMem(), true)
				return
			case <-t.C:
				peak = peakOf(peak, b.readMem(), false)
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
	peak     memSample  // maxima during the stream
	heapLive uint64     // after the stream and a GC
	agents   agentCount // live agent processes of the scale workers after the stream
	load     string     // the load average when the streams ended
	// history is the history events each streaming turn wrote: its session workflow's
	// (the growth of its history length), the mean over the turns.
	history historyCount
}

// agentCount is the live agent processes of the scale workers and their RSS.
type agentCount struct {
	n         int
	rss       int64
	perWorker []int // with worker processes: each one's
}

func (a agentCount) String() string {
	s := fmt.Sprintf("%d (%.0f)", a.n, mib(a.rss))
	if len(a.perWorker) > 1 {
		var each []string
		for _, n := range a.perWorker {
			each = append(each, strconv.Itoa(n))
		}
		s += " = " + strings.Join(each, " + ")
	}
	return s
}

// historyCount is the history events of some sessions' turns, the mean per turn.
type historyCount struct {
	session float64
	n       int  // turns counted
	newRun  bool // a session continued as new meanwhile: its growth is not counted
}

// histories reads, once each session's last turn is over for the server too (its RunTurn
// activity closed, the session's history no longer growing), the history length of its
// session workflow, 32 sessions at a time; a session that does not settle within
// opTimeout is left out (a zero mark).
func histories(ctx context.Context, sessions []*scaleSession) []runMark {
	session := make([]runMark, len(sessions))
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i, s := range sessions {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(ctx, opTimeout)
			defer cancel()
			session[i] = settled(ctx, s)
		})
	}
	wg.Wait()
	return session
}

// settled waits as tacpSession.settle does and returns the session's history mark (a zero
// mark: it did not settle).
func settled(ctx context.Context, s *scaleSession) runMark {
	if s.lastTurn > 0 {
		if err := awaitRunTurn(ctx, env.c, s.id); err != nil {
			return runMark{}
		}
	}
	var prev runMark
	for {
		d, err := env.c.DescribeWorkflowExecution(ctx, signals.SessionWorkflowID(s.id), "")
		if err != nil {
			return runMark{}
		}
		info := d.GetWorkflowExecutionInfo()
		m := runMark{runID: info.GetExecution().GetRunId(), length: info.GetHistoryLength()}
		if m == prev && quiet(d) {
			return m
		}
		prev = m
		select {
		case <-ctx.Done():
			return runMark{}
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// historyOf is the history events of each session's last turn: its session workflow's
// growth since before (nil: the whole history).
func historyOf(before, after []runMark) historyCount {
	var h historyCount
	var sessionSum int64
	for i, a := range after {
		if a.length == 0 {
			continue
		}
		grown := a.length
		if before != nil {
			if before[i].runID != a.runID {
				h.newRun = true
				continue
			}
			grown -= before[i].length
		}
		sessionSum += grown
		h.n++
	}
	if h.n > 0 {
		h.session = float64(sessionSum) / float64(h.n)
	}
	return h
}

func (h historyCount) String() string {
	if h.n == 0 {
		return "–"
	}
	s := fmt.Sprintf("%.1f", h.session)
	if h.newRun {
		s += " (a session continued as new: left out)"
	}
	return s
}

// stream streams on every session of streaming at once, with the memory watched, and
// counts the scale worker's live agents among all afterwards.
func (b *scaleBench) stream(ctx context.Context, name string, streaming, all []*scaleSession) scalePhase {
	p := scalePhase{name: name, sessions: len(all), turns: len(streaming), sent: b.chunks * len(streaming), errs: newErrTally()}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	before := histories(ctx, streaming)
	w := b.watchMem()
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
	p.load = loadAvg()
	p.peak = w.end()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	p.heapLive = m.HeapAlloc
	p.agents = b.liveAgents(all)
	p.history = historyOf(before, histories(ctx, streaming))
	return p
}

// liveAgents counts the agent processes the scale workers keep for sessions, and their RSS:
// the in-process worker's by session, the worker processes' by their children.
func (b *scaleBench) liveAgents(sessions []*scaleSession) agentCount {
	var a agentCount
	count := func(pid int) {
		a.n++
		r, _ := procMem(strconv.Itoa(pid))
		a.rss += r
	}
	if b.worker != nil {
		for _, s := range sessions {
			if pid := b.worker.Host.AgentPID(s.id); pid != 0 {
				count(pid)
			}
		}
		return a
	}
	var parents []int
	for _, p := range b.procs {
		parents = append(parents, p.pid)
	}
	children := agentChildren(parents)
	for _, p := range b.procs {
		for _, pid := range children[p.pid] {
			count(pid)
		}
		a.perWorker = append(a.perWorker, len(children[p.pid]))
	}
	return a
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
// at a time. TACP_BENCH_WORKERS=N runs the sessions on N worker processes sharing one task
// queue instead of one worker in this process; TACP_BENCH_ADDRESS points everything at
// another frontend (bench/cluster: `go run ./bench/cluster scale`), and
// TACP_BENCH_SERVER_PIDS (name=pid,…) names its services' processes, whose memory the
// table adds.
func TestScaleTable(t *testing.T) {
	if os.Getenv("TACP_BENCH") != "1" {
		t.Skip("set TACP_BENCH=1 to measure tacp at scale")
	}
	nSessions := envInt(t, "TACP_BENCH_SCALE_SESSIONS", 1000)
	nTurns := envInt(t, "TACP_BENCH_SCALE_TURNS", 50)
	chunks := envInt(t, "TACP_BENCH_SCALE_CHUNKS", 250)
	parallel := envInt(t, "TACP_BENCH_SCALE_PARALLEL", 32)
	nWorkers := 0 // the in-process worker
	if os.Getenv("TACP_BENCH_WORKERS") != "" {
		nWorkers = envInt(t, "TACP_BENCH_WORKERS", 1)
	}
	servers, err := parsePIDs(os.Getenv("TACP_BENCH_SERVER_PIDS"))
	if err != nil {
		t.Fatalf("TACP_BENCH_SERVER_PIDS: %v", err)
	}
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
	b := &scaleBench{servers: servers, chunks: chunks}
	before := b.readMem()
	burners := startBurn(t)

	// The cap on live agents past which the least recently used idle one is stopped, on
	// each worker: at least every streaming turn's agent plus the two single streams' (the
	// default, 64, fits the default 50 turns; more turns raise it), so that all streaming
	// sessions fit on any one worker however the turns spread.
	maxAgents := max(activities.DefaultMaxAgents, nTurns+2)
	flushRate := 0
	if os.Getenv("TACP_BENCH_SCALE_FLUSH_RATE") != "" {
		flushRate = envInt(t, "TACP_BENCH_SCALE_FLUSH_RATE", 1)
	}
	if nWorkers == 0 {
		b.worker, b.sc = startBenchWorker(t, "scale", tacpworker.Options{MaxAgents: maxAgents, FlushMaxRate: float64(flushRate)})
	} else {
		b.procs, b.sc = startWorkerProcs(t, "scale", nWorkers, maxAgents, flushRate)
		t.Cleanup(func() {
			for i, p := range b.procs {
				if gone, log := p.exited(); gone {
					t.Errorf("worker process %d exited during the test; see %s", i+1, log)
				}
			}
		})
	}
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

	runtime.GC()
	beforeIdle := b.readMem()
	idle, created := b.createAll(ctx, prefix, nSessions, parallel)
	sessions = append(sessions, idle...)
	all := append(slices.Clone(alone), idle...)
	runtime.GC()
	idleMem := b.readMem()
	idleAgents := b.liveAgents(all)
	idleHistory := historyOf(nil, histories(ctx, idle))

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
		chunks: chunks, maxAgents: maxAgents, workers: nWorkers, servers: len(servers) > 0, before: before,
		beforeIdle: beforeIdle, idleMem: idleMem, idleAgents: idleAgents, idleHistory: idleHistory,
		aloneCreate: aloneCreate, created: created,
		closed: len(sessions), closeTook: closeTook, closeErrs: closeErrs,
		phases: []scalePhase{base, oneIdle, many}, burners: burners,
	})
	for _, p := range []scalePhase{base, oneIdle, many} {
		fmt.Printf("%s: load average %s when the streams ended\n", p.name, p.load)
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
	chunks, maxAgents int
	burners           int  // busy processes beside the test (TACP_BENCH_BURN)
	workers           int  // worker processes (0: one worker in the test process)
	servers           bool // the services' memory is measured (TACP_BENCH_SERVER_PIDS)
	// before: before the scale worker; beforeIdle: after the baseline, before the idle
	// sessions (after a GC); idleMem: with them (after a GC).
	before, beforeIdle, idleMem memSample
	idleAgents                  agentCount
	idleHistory                 historyCount
	aloneCreate, created        creation
	closed                      int
	closeTook                   time.Duration
	closeErrs                   *errTally
	phases                      []scalePhase // baseline first, the concurrent stream last
}

func mib[T int64 | uint64](n T) float64 { return float64(n) / (1 << 20) }

func printScaleTable(t testing.TB, f scaleFigures) {
	viewers := "a viewer woken by its history"
	if scalePoll > 0 {
		viewers = "an events poller every " + scalePoll.String()
	}
	server := "the in-process Temporal server"
	if addr := os.Getenv("TACP_BENCH_ADDRESS"); addr != "" {
		server = "the Temporal frontend at " + addr
	}
	workers, inTest := "one worker in the test process", "the scale worker, "
	if f.workers > 0 {
		workers, inTest = fmt.Sprintf("%d worker processes on one task queue", f.workers), ""
	}
	fmt.Printf("Scale: %d idle sessions on %s (%s; agent cap %d per worker), then %d turns streaming at once (%d chunks each at %d/s, each watched by %s; targets: no errors, p99 ≤ 1 s)\n",
		f.created.n, workers, server, f.maxAgents, f.phases[len(f.phases)-1].turns, f.chunks, int(time.Second/chunkEvery), viewers)
	fmt.Printf("machine: %d cores, %d busy processes beside the test (TACP_BENCH_BURN), load average at the end %s\n",
		runtime.NumCPU(), f.burners, loadAvg())
	inProcessServer := ""
	if os.Getenv("TACP_BENCH_ADDRESS") == "" {
		inProcessServer = "the in-process Temporal server, "
	}
	fmt.Printf("process memory is the test process's: %s%sthe fixture's worker (2 busy sessions), the clients and viewers; before the scale worker: RSS %.0f MiB, Go heap in use %.0f MiB, %d goroutines\n",
		inTest, inProcessServer, mib(f.before.rss), mib(f.before.heapInuse), f.before.goroutines)
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
	if f.workers > 0 {
		fmt.Fprint(tw, "worker processes: RSS MiB of each, max during the stream")
		for _, p := range f.phases {
			fmt.Fprintf(tw, "\t%s", eachMiB(p.peak.workers))
		}
		fmt.Fprintln(tw, "\t")
	}
	if f.servers {
		row("Temporal services' RSS MiB together, max during the stream", func(p scalePhase) float64 { return mib(p.peak.servers) }, "%.0f", true)
	}
	fmt.Fprintf(tw, "live agent processes after the stream (their RSS MiB; cap %d per worker)", f.maxAgents)
	for _, p := range f.phases {
		fmt.Fprintf(tw, "\t%s", p.agents)
	}
	fmt.Fprintln(tw, "\t")
	fmt.Fprint(tw, "history events per streaming turn (the session's)")
	for _, p := range f.phases {
		fmt.Fprintf(tw, "\t%s", p.history)
	}
	fmt.Fprintln(tw, "\t")
	each := func(c creation) string {
		s := statsOf(c.each)
		return fmt.Sprintf("%.1f s (%d at a time; each p50 %.0f / p99 %.0f ms)", c.took.Seconds(), c.parallel, s.p50, s.p99)
	}
	fmt.Fprintf(tw, "time to create the sessions (prompt `%s` → turn.ended seen)\t%s\t%s\t\t\n", zeroWork, each(f.aloneCreate), each(f.created))
	fmt.Fprintf(tw, "errors while creating\t%d\t%d\t\t\n", f.aloneCreate.errs.total(), f.created.errs.total())
	fmt.Fprintf(tw, "closing all %d sessions afterwards: time, errors\t\t%.1f s, %d\t\t\n", f.closed, f.closeTook.Seconds(), f.closeErrs.total())
	fmt.Fprintf(tw, "idle: process RSS / Go heap in use MiB, goroutines, live agents (RSS MiB)\t\t%.0f / %.0f, %d, %s\t\t\n",
		mib(f.idleMem.rss), mib(f.idleMem.heapInuse), f.idleMem.goroutines, f.idleAgents)
	perIdle := func(a, b int64) string {
		return fmt.Sprintf("%.0f → %.0f MiB: %.2f MiB per idle session", mib(a), mib(b), mib(b-a)/float64(f.created.n))
	}
	if f.workers > 0 {
		fmt.Fprintf(tw, "idle: worker processes' RSS MiB (each)\t\t%s\t\t\n", eachMiB(f.idleMem.workers))
		fmt.Fprintf(tw, "idle: worker processes' RSS together, before → with the idle sessions\t\t%s\t\t\n", perIdle(f.beforeIdle.sum(), f.idleMem.sum()))
	} else {
		fmt.Fprintf(tw, "idle: process RSS (%sthe worker), before → with the idle sessions\t\t%s\t\t\n", inProcessServer, perIdle(f.beforeIdle.rss, f.idleMem.rss))
	}
	if f.servers {
		fmt.Fprintf(tw, "idle: Temporal services' RSS together, before → with the idle sessions\t\t%s\t\t\n", perIdle(f.beforeIdle.servers, f.idleMem.servers))
	}
	fmt.Fprintf(tw, "history events per idle session (its one zero-work turn's included)\t\t%s\t\t\n", f.idleHistory)
	flushTable(t, tw)
	recordScaleFigures(t, f)
}

// eachMiB prints byte counts as MiB, separated by " / ".
func eachMiB(rss []int64) string {
	var each []string
	for _, r := range rss {
		each = append(each, fmt.Sprintf("%.0f", mib(r)))
	}
	return strings.Join(each, " / ")
}

// recordScaleFigures writes the table's headline figures to TACP_BENCH_FIGURES, for
// bench/cluster's side-by-side.
func recordScaleFigures(t testing.TB, f scaleFigures) {
	for i, key := range []string{"scale/alone", "scale/one_among_idle", "scale/many"} {
		p := f.phases[i]
		var a []time.Duration
		for _, c := range p.chunks {
			a = append(a, c.latency())
		}
		s := statsOf(a)
		recordFigure(t, key, p.turns, s.p50, s.p99)
		recordValue(t, key+"/errors", float64(p.errs.total()))
		recordValue(t, key+"/wall_s", p.took.Seconds())
		recordValue(t, key+"/history", p.history.session)
	}
	last := f.phases[len(f.phases)-1]
	recordValue(t, "scale/idle_sessions", float64(f.created.n))
	recordValue(t, "scale/create_s", f.created.took.Seconds())
	recordValue(t, "scale/create_errors", float64(f.created.errs.total()))
	recordValue(t, "scale/idle_history", f.idleHistory.session)
	recordValue(t, "scale/idle_agents", float64(f.idleAgents.n))
	recordValue(t, "scale/process_rss_idle_mib", mib(f.idleMem.rss))
	recordValue(t, "scale/process_rss_peak_mib", mib(last.peak.rss))
	if f.workers > 0 {
		for i := range f.idleMem.workers {
			recordValue(t, fmt.Sprintf("scale/worker%d_rss_idle_mib", i+1), mib(f.idleMem.workers[i]))
			recordValue(t, fmt.Sprintf("scale/worker%d_rss_peak_mib", i+1), mib(last.peak.workers[i]))
		}
		recordValue(t, "scale/workers_mib_per_idle", mib(f.idleMem.sum()-f.beforeIdle.sum())/float64(f.created.n))
	} else {
		recordValue(t, "scale/process_mib_per_idle", mib(f.idleMem.rss-f.beforeIdle.rss)/float64(f.created.n))
	}
	if f.servers {
		recordValue(t, "scale/servers_rss_idle_mib", mib(f.idleMem.servers))
		recordValue(t, "scale/servers_rss_peak_mib", mib(last.peak.servers))
		recordValue(t, "scale/servers_mib_per_idle", mib(f.idleMem.servers-f.beforeIdle.servers)/float64(f.created.n))
	}
}

// parsePIDs reads name=pid,… (empty: none).
func parsePIDs(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		name, v, ok := strings.Cut(part, "=")
		pid, err := strconv.Atoi(v)
		if !ok || err != nil || pid <= 0 {
			return nil, fmt.Errorf("%q: want name=pid", part)
		}
		out[name] = pid
	}
	return out, nil
}

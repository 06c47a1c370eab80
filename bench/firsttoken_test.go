package bench

// Time to first token of the real agents (issue 28): a short reply on a warm session, the
// first agent_message_chunk and the whole turn, at an ACP client of the agent itself (a
// direct pipe, the baseline) and at an ACP client of `starter acp` (the gateway) in front of
// a tacp worker running the same agent, round by round in one run, on internal/testkit/fakemodel's
// fake model servers. Both agents run behind stdiotap (bench/internal/stdiotap), which
// timestamps every JSON-RPC line on the agent's stdin and stdout, so each first token splits
// into: the client's prompt → the agent's stdin (for tacp: the gateway, the prompt update,
// the session task that schedules the RunTurn activity, its dispatch, the runner), the
// agent's own work up to its first chunk on stdout (its model request at the fake model in
// between), and the agent's stdout → the client (for tacp: the batcher, the turn_events
// signal, the session task, the gateway's query). The session schedules RunTurn itself, so the
// activity's times are in its history.
//
// The same run counts the history and the Temporal Cloud billable actions of the gateway's
// session per short prompt, per minute of a streaming reply, and per idle day of a session
// with a client attached (actions_test.go).
//
//	TACP_BENCH=1 go test ./bench -run TestRealAgentFirstTokenTable -v -timeout 30m
//
// TACP_BENCH_REAL_TURNS (default 30) sets the rounds; TACP_BENCH_REAL_AGENTS (default all
// four: codex, claude, gemini, opencode) the agents; TACP_BENCH_STREAM_SECONDS (60) the
// streaming reply (first agent only), TACP_BENCH_IDLE_SECONDS (120) the idle window (first
// agent only); TACP_BENCH_PRICE_PER_M (50) the price in USD per million actions;
// TACP_BENCH_AGENT_NICE (0) the workers' -agent.nice, a list ("0,10") to measure each in
// turn, agent by agent; TACP_BENCH_QUIET=0 starts each prompt at once instead of on a quiet
// machine (quiet_test.go).

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/tacp-dev/tacp/internal/testkit/fakemodel"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

// tapLine is one JSON-RPC line stdiotap saw.
type tapLine struct {
	at       time.Time
	dir, tag string
}

func readTap(path string) ([]tapLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []tapLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), " ", 3)
		if len(parts) != 3 {
			continue
		}
		ns, err := strconv.ParseInt(parts[0], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, tapLine{at: time.Unix(0, ns), dir: parts[1], tag: parts[2]})
	}
	return out, sc.Err()
}

// tapTrace is one prompt as the agent's stdio saw it.
type tapTrace struct {
	prompt, chunk, answer time.Time
}

// traceIn finds, after from, the first session/prompt written to the agent, its first
// agent_message_chunk and its answer.
func traceIn(lines []tapLine, from time.Time) (tapTrace, bool) {
	var tr tapTrace
	id := ""
	for _, l := range lines {
		if l.at.Before(from) {
			continue
		}
		switch {
		case id == "" && l.dir == "in" && strings.HasPrefix(l.tag, "session/prompt#"):
			id, tr.prompt = strings.TrimPrefix(l.tag, "session/prompt#"), l.at
		case id != "" && tr.chunk.IsZero() && l.dir == "out" && l.tag == "session/update:agent_message_chunk":
			tr.chunk = l.at
		case id != "" && l.dir == "out" && l.tag == "result:"+id:
			tr.answer = l.at
			return tr, !tr.chunk.IsZero()
		}
	}
	return tr, false
}

// ttftRound is one short prompt one way.
type ttftRound struct {
	start, first, end time.Time // the client: before the prompt, first chunk, the answer
	model             time.Time // the fake model got the reply's request
	tap               tapTrace
	// Through tacp only, from the journal and the session's history (the workflow's clock is
	// the machine's): turn.started journaled, RunTurn scheduled and started, the turn_events
	// signal carrying the first chunk recorded, and that chunk journaled.
	turnID                                            int64
	started, scheduled, activity, signaled, journaled time.Time
}

func (r ttftRound) firstToken() time.Duration { return r.first.Sub(r.start) }
func (r ttftRound) turn() time.Duration       { return r.end.Sub(r.start) }

// ttftFigures is one agent's run.
type ttftFigures struct {
	agent                        string
	direct, tacp                 []ttftRound
	directRequests, tacpRequests float64
	perPrompt                    actionCount // the gateway's session, per short prompt
	directTap, tacpTap           []tapLine
	quiet, busy                  int             // prompts that started on a quiet machine, and not (quiet_test.go)
	floor                        []time.Duration // Temporal's floor of a first token, a round beside each (FirstTokenFloorWorkflow)
	stream                       *streamCost
	idle                         *idleCost
}

// quoteWords quotes each word for activities.SplitCommand (as fakemodel.Agent.CommandLine).
func quoteWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// buildTap builds stdiotap once.
func buildTap(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(env.tmp, "stdiotap")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/tacp-dev/tacp/bench/internal/stdiotap").CombinedOutput(); err != nil {
		t.Fatalf("build stdiotap: %v\n%s", err, out)
	}
	return bin
}

// promptThrough runs shortReply on p and times it.
func promptThrough(ctx context.Context, p *acpPeer, fm *fakemodel.Server) (ttftRound, error) {
	var r ttftRound
	before := len(fm.Requests())
	p.client.takeFirst()
	r.start = time.Now()
	if _, err := p.prompt(ctx, shortReply); err != nil {
		return r, err
	}
	r.end = time.Now()
	r.first = p.client.takeFirst()
	if r.first.IsZero() {
		return r, fmt.Errorf("%s: no agent_message_chunk before the answer", p.name)
	}
	reqs := fm.Requests()[before:]
	for _, q := range reqs {
		if strings.Contains(q.Reply.Text, "short answer") {
			r.model = q.At
			break
		}
	}
	if r.model.IsZero() && len(reqs) > 0 {
		r.model = reqs[0].At
	}
	return r, nil
}

// measureFirstToken runs rounds of shortReply on a warm direct session and a warm session
// through `starter acp` of agent a, alternating, and, when costs is set, what a streaming
// reply and an idle day of the gateway's session cost.
func measureFirstToken(ctx context.Context, t *testing.T, a fakemodel.Agent, nice int, label bool, rounds int, costs bool) ttftFigures {
	f := ttftFigures{agent: a.Name}
	tag := a.Name
	if label {
		f.agent = fmt.Sprintf("%s, nice %d", a.Name, nice)
		tag = fmt.Sprintf("%s-nice%d", a.Name, nice)
	}
	bin, err := filepath.Abs(filepath.Join("..", ".ci", "npm", "node_modules", ".bin", a.Bin))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("TACP_REQUIRE_PEERS") == "1" {
			t.Fatalf("%s is not installed: run `bash .ci/peers`", bin)
		}
		t.Skipf("%s is not installed: run `bash .ci/peers`", bin)
	}
	tap := buildTap(t)
	fm := fakemodel.New(a.Provider)
	t.Cleanup(fm.Close)
	agentEnv, err := a.Setup(filepath.Join(env.tmp, "home-ttft-"+tag), fm)
	if err != nil {
		t.Fatal(err)
	}
	directLog := filepath.Join(env.tmp, "tap-direct-"+tag+".log")
	tacpLog := filepath.Join(env.tmp, "tap-tacp-"+tag+".log")

	// The baseline: the agent behind the tap over a direct pipe.
	ws := filepath.Join(env.tmp, "ttft-direct-"+tag)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tap, append([]string{directLog, bin}, a.Args...)...)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), agentEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	d, err := startPeerWarm(ctx, f.agent+" direct", cmd, ws, "reply: warm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})

	// Through tacp: a worker of its own (on a client that counts its heartbeats) whose agent
	// is a behind the tap, and `starter acp` in front of it.
	c, rpcs := countedClient(ctx, t)
	queue := "tacp-bench-ttft-" + tag + "-" + signals.NewID()[:8]
	dataDir := filepath.Join(env.tmp, "data-ttft-"+tag)
	words := append(append(append([]string{"/usr/bin/env"}, agentEnv...), tap, tacpLog, bin), a.Args...)
	w, err := tacpworker.Start(c, tacpworker.Options{TaskQueue: queue, DataDir: dataDir, Agent: quoteWords(words), InitTimeout: 2 * time.Minute, AgentNice: nice})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	sc := tacpclient.NewClient(c, queue)
	gws := filepath.Join(dataDir, "workspaces", "gateway")
	if err := os.MkdirAll(gws, 0o755); err != nil {
		t.Fatal(err)
	}
	g, err := startPeerWarm(ctx, f.agent+" via starter acp", starterCmdOn(t, queue, "acp"), gws, "reply: warm")
	if err != nil {
		t.Fatal(err)
	}
	gid := string(g.sid)
	t.Cleanup(func() {
		g.close()
		if _, err := sc.Close(context.Background(), gid, signals.CloseRequest{Reason: "bench"}); err != nil {
			t.Log(err)
		}
	})
	gs := &tacpSession{sc: sc, id: gid}

	floor, err := startTTFTFloor(ctx, env.c)
	if err != nil {
		t.Fatal(err)
	}
	defer floor.close()
	const warmup = 3
	var directReqs, tacpReqs int
	var from runMark
	var queries0, beats0 int64
	for i := range warmup + rounds {
		if i == warmup {
			if from, err = settleGateway(ctx, gs); err != nil {
				t.Fatal(err)
			}
			queries0, beats0 = env.queries.count(signals.QueryEvents, gid), rpcs.heartbeats()
		}
		settle := func() {
			if !quietOn() {
				return
			}
			switch ok := waitQuiet(ctx); {
			case i < warmup:
			case ok:
				f.quiet++
			default:
				f.busy++
			}
		}
		settle()
		n0 := len(fm.Requests())
		dr, err := promptThrough(ctx, d, fm)
		if err != nil {
			t.Fatal(err)
		}
		settle()
		n1 := len(fm.Requests())
		tr, err := promptThrough(ctx, g, fm)
		if err != nil {
			t.Fatal(err)
		}
		settle()
		fl, err := floor.round(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i >= warmup {
			f.floor = append(f.floor, fl)
			directReqs += n1 - n0
			tacpReqs += len(fm.Requests()) - n1
			f.direct, f.tacp = append(f.direct, dr), append(f.tacp, tr)
		}
	}
	f.directRequests = float64(directReqs) / float64(rounds)
	f.tacpRequests = float64(tacpReqs) / float64(rounds)
	if _, err := settleGateway(ctx, gs); err != nil {
		t.Fatal(err)
	}

	// Where each first token went: the agents' stdio, the journal and both histories.
	dl, err := readTap(directLog)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := readTap(tacpLog)
	if err != nil {
		t.Fatal(err)
	}
	f.directTap, f.tacpTap = dl, tl
	for i := range f.direct {
		f.direct[i].tap, _ = traceIn(dl, f.direct[i].start)
		f.tacp[i].tap, _ = traceIn(tl, f.tacp[i].start)
	}
	if err := placeTurns(ctx, gs, from, f.tacp); err != nil {
		t.Fatal(err)
	}
	f.perPrompt, err = costSince(ctx, gs, from)
	if err != nil {
		t.Fatal(err)
	}
	f.perPrompt.queries = float64(env.queries.count(signals.QueryEvents, gid) - queries0)
	f.perPrompt.heartbeats = float64(rpcs.heartbeats() - beats0)
	f.perPrompt = f.perPrompt.div(float64(rounds))

	if costs {
		f.stream = measureStreamCost(ctx, t, gs, g, fm, rpcs, f.perPrompt)
		f.idle = measureIdleCost(ctx, t, gs, sc)
	}
	return f
}

// settleGateway settles the gateway's session: its last turn (the journal's) closed, its
// history still. s.lastSeq is how far its journal was read.
func settleGateway(ctx context.Context, s *tacpSession) (runMark, error) {
	for _, ev := range journalTail(ctx, s, s.lastSeq) {
		s.lastSeq = ev.Seq
		if ev.Kind == signals.EventTurnStarted {
			s.lastTurn = ev.TurnID
		}
	}
	return s.settle(ctx)
}

// journalTail is the session's journal after seq (errors end it early).
func journalTail(ctx context.Context, s *tacpSession, after int64) []signals.Event {
	var out []signals.Event
	for {
		res, err := s.sc.Events(ctx, s.id, after, 500)
		if err != nil || len(res.Events) == 0 {
			return out
		}
		out = append(out, res.Events...)
		after = res.Events[len(res.Events)-1].Seq
	}
}

// placeTurns fills in each tacp round's turn, its journal times, its RunTurn's schedule and
// start and the signal that carried its first chunk, from the journal and the session's
// history since from.
func placeTurns(ctx context.Context, s *tacpSession, from runMark, rounds []ttftRound) error {
	evs := journalTail(ctx, s, 0)
	h, err := s.historySince(ctx, from)
	if err != nil {
		return err
	}
	for i := range rounds {
		r := &rounds[i]
		for _, ev := range evs {
			if ev.Kind == signals.EventTurnStarted && !ev.At.Before(r.start.Add(-time.Millisecond)) && ev.At.Before(r.end) {
				r.turnID, r.started = ev.TurnID, ev.At
				break
			}
		}
		if r.turnID == 0 {
			return fmt.Errorf("round %d: no turn.started between its prompt and its answer", i)
		}
		for _, ev := range evs {
			if ev.TurnID == r.turnID && ev.Kind == signals.EventAgentUpdate && strings.Contains(string(ev.Data), `"agent_message_chunk"`) {
				r.journaled = ev.At
				break
			}
		}
		r.signaled = h.firstChunkSignal[r.turnID]
		a, err := h.turn(r.turnID)
		if err != nil {
			return err
		}
		r.scheduled, r.activity = a.scheduled, a.started
	}
	return nil
}

// TestRealAgentFirstTokenTable prints the real agents' first token and whole turn, direct
// and through `starter acp`, where tacp's share goes, and what a prompt costs in history and
// billable actions.
func TestRealAgentFirstTokenTable(t *testing.T) {
	if os.Getenv("TACP_BENCH") != "1" {
		t.Skip("set TACP_BENCH=1 to measure real agents' first token")
	}
	rounds := envInt(t, "TACP_BENCH_REAL_TURNS", 30)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	agents := realAgentsToRun(t)
	if os.Getenv("TACP_BENCH_REAL_AGENTS") == "" {
		agents = fakemodel.Agents
	}
	var nices []int
	for _, v := range strings.Split(cmp.Or(os.Getenv("TACP_BENCH_AGENT_NICE"), "0"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			t.Fatalf("TACP_BENCH_AGENT_NICE: %v", err)
		}
		nices = append(nices, n)
	}
	var figs []ttftFigures
	for i, a := range agents {
		for j, nice := range nices { // alternated per agent: before and after in one run
			figs = append(figs, measureFirstToken(ctx, t, a, nice, len(nices) > 1, rounds, i == 0 && j == 0))
		}
	}
	printFirstTokenTable(t, figs)
	printFirstTokenFloor(t, figs)
	printFirstTokenTrace(t, figs)
	printCostTable(t, figs)
}

// outsideAgent is a round's first token less the agent's own part of it (its prompt on
// stdin to its first chunk on stdout): what the path around the agent added.
func outsideAgent(r ttftRound) (time.Duration, bool) {
	if r.tap.prompt.IsZero() || r.tap.chunk.IsZero() {
		return 0, false
	}
	return r.firstToken() - r.tap.chunk.Sub(r.tap.prompt), true
}

func outsideAgentRounds(rs []ttftRound) []time.Duration {
	var out []time.Duration
	for _, r := range rs {
		if d, ok := outsideAgent(r); ok {
			out = append(out, d)
		}
	}
	return out
}

// printFirstTokenFloor sets what each path adds around the agent beside Temporal's floor of
// the same shape (FirstTokenFloorWorkflow: an update, an activity on another queue, its
// signal, a query), measured a round beside each of the agent's.
func printFirstTokenFloor(t testing.TB, figs []ttftFigures) {
	fmt.Println("The first token around the agent (the round's first token less the agent's stdin → first chunk on stdout), beside Temporal's floor of a first token (update → activity on another queue → its signal → query, plain SDK, a round beside each) (ms)")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "agent	n	direct pipe p50 / p99	through tacp p50 / p99	Temporal's floor p50 / p99	tacp over the floor p50")
	for _, f := range figs {
		d, tc, fl := statsOf(outsideAgentRounds(f.direct)), statsOf(outsideAgentRounds(f.tacp)), statsOf(f.floor)
		recordFigure(t, "ttft/"+f.agent+"/tacp-outside-agent", tc.n, tc.p50, tc.p99)
		recordFigure(t, "ttft/"+f.agent+"/floor", fl.n, fl.p50, fl.p99)
		fmt.Fprintf(tw, "%s\t%d\t%.1f / %.1f\t%.1f / %.1f\t%.1f / %.1f\t%+.1f\n", f.agent, tc.n, d.p50, d.p99, tc.p50, tc.p99, fl.p50, fl.p99, tc.p50-fl.p50)
	}
	flushTable(t, tw)
}

func printFirstTokenTable(t testing.TB, figs []ttftFigures) {
	fmt.Printf("Real agents, %q on a warm session: first agent_message_chunk and whole turn at the ACP client, direct pipe vs `starter acp` (ms)\n", shortReply)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "agent\tn\tfirst token direct p50 / p99\tthrough tacp p50 / p99\ttacp's share p50 (ratio)\tturn direct p50 / p99\tthrough tacp p50 / p99\ttacp's share p50 (ratio)\tmodel requests/prompt (direct, tacp)")
	for _, f := range figs {
		df, tf := statsOf(mapRounds(f.direct, ttftRound.firstToken)), statsOf(mapRounds(f.tacp, ttftRound.firstToken))
		dt, tt := statsOf(mapRounds(f.direct, ttftRound.turn)), statsOf(mapRounds(f.tacp, ttftRound.turn))
		recordFigure(t, "ttft/"+f.agent+"/direct", df.n, df.p50, df.p99)
		recordFigure(t, "ttft/"+f.agent+"/tacp", tf.n, tf.p50, tf.p99)
		fmt.Fprintf(tw, "%s\t%d\t%.1f / %.1f\t%.1f / %.1f\t%+.1f (×%.2f)\t%.1f / %.1f\t%.1f / %.1f\t%+.1f (×%.2f)\t%.1f, %.1f\n",
			f.agent, df.n, df.p50, df.p99, tf.p50, tf.p99, tf.p50-df.p50, tf.p50/df.p50,
			dt.p50, dt.p99, tt.p50, tt.p99, tt.p50-dt.p50, tt.p50/dt.p50, f.directRequests, f.tacpRequests)
	}
	flushTable(t, tw)
	if quietOn() {
		var quiet, busy int
		for _, f := range figs {
			quiet, busy = quiet+f.quiet, busy+f.busy
		}
		fmt.Printf("each prompt waited for a quiet machine (< %.0f%% of the CPUs busy for %s, at most %s; TACP_BENCH_QUIET=0: none): %d of %d found it\n\n",
			quietBusy*100, quietWindow, quietMost, quiet, quiet+busy)
	}
}

func mapRounds(rs []ttftRound, fn func(ttftRound) time.Duration) []time.Duration {
	out := make([]time.Duration, 0, len(rs))
	for _, r := range rs {
		out = append(out, fn(r))
	}
	return out
}

// segment is a named part of a round, skipped where a time is missing.
type segment struct {
	name string
	part func(ttftRound) (time.Duration, bool)
}

func between(a, b func(ttftRound) time.Time) func(ttftRound) (time.Duration, bool) {
	return func(r ttftRound) (time.Duration, bool) {
		x, y := a(r), b(r)
		if x.IsZero() || y.IsZero() {
			return 0, false
		}
		return y.Sub(x), true
	}
}

var (
	atStart     = func(r ttftRound) time.Time { return r.start }
	atFirst     = func(r ttftRound) time.Time { return r.first }
	atEnd       = func(r ttftRound) time.Time { return r.end }
	atModel     = func(r ttftRound) time.Time { return r.model }
	atTapPrompt = func(r ttftRound) time.Time { return r.tap.prompt }
	atTapChunk  = func(r ttftRound) time.Time { return r.tap.chunk }
	atTapAnswer = func(r ttftRound) time.Time { return r.tap.answer }
	atStarted   = func(r ttftRound) time.Time { return r.started }
	atScheduled = func(r ttftRound) time.Time { return r.scheduled }
	atActivity  = func(r ttftRound) time.Time { return r.activity }
	atSignaled  = func(r ttftRound) time.Time { return r.signaled }
	atJournaled = func(r ttftRound) time.Time { return r.journaled }
)

var directSegments = []segment{
	{"client → prompt on the agent's stdin", between(atStart, atTapPrompt)},
	{"stdin → the agent's model request (agent)", between(atTapPrompt, atModel)},
	{"model request → first chunk on its stdout (agent)", between(atModel, atTapChunk)},
	{"stdout → the client", between(atTapChunk, atFirst)},
	{"after the first chunk: → answer on stdout (agent)", between(atTapChunk, atTapAnswer)},
	{"answer on stdout → client has it", between(atTapAnswer, atEnd)},
}

var tacpSegments = []segment{
	{"client → turn.started journaled (gateway, prompt update, session task)", between(atStart, atStarted)},
	{"→ RunTurn started (the activity's scheduling and dispatch)", between(atStarted, atActivity)},
	{"  of which turn.started → RunTurn scheduled (the session task completes)", between(atStarted, atScheduled)},
	{"  → RunTurn started (dispatch to the agent's host)", between(atScheduled, atActivity)},
	{"→ prompt on the agent's stdin (runner)", between(atActivity, atTapPrompt)},
	{"stdin → the agent's model request (agent)", between(atTapPrompt, atModel)},
	{"model request → first chunk on its stdout (agent)", between(atModel, atTapChunk)},
	{"stdout → turn_events signal recorded (batcher, signal RPC)", between(atTapChunk, atSignaled)},
	{"signal recorded → journaled (session task starts)", between(atSignaled, atJournaled)},
	{"journaled → the ACP client (task completes, wake-up, query, gateway)", between(atJournaled, atFirst)},
	{"after the first chunk: → answer on stdout (agent)", between(atTapChunk, atTapAnswer)},
	{"answer on stdout → client has the answer (runner, turn_finished, session, gateway)", between(atTapAnswer, atEnd)},
}

// tapSequence is what crossed the agent's stdio from..to, in ms after from.
func tapSequence(lines []tapLine, from, to time.Time) string {
	var parts []string
	for _, l := range lines {
		if l.at.Before(from) || l.at.After(to) {
			continue
		}
		parts = append(parts, fmt.Sprintf("%.1f %s %s", ms(l.at.Sub(from)), l.dir, l.tag))
	}
	return strings.Join(parts, "; ")
}

func printFirstTokenTrace(t testing.TB, figs []ttftFigures) {
	for _, f := range figs {
		if len(f.tacp) == 0 {
			continue
		}
		r, d := f.tacp[len(f.tacp)-1], f.direct[len(f.direct)-1]
		fmt.Printf("%s, last round's stdio, direct (ms after the client's prompt): %s\n", f.agent, tapSequence(f.directTap, d.start, d.end))
		fmt.Printf("%s, last round's stdio through tacp (ms after RunTurn started): %s\n\n", f.agent, tapSequence(f.tacpTap, r.activity, r.end))
	}
	for _, side := range []struct {
		name string
		segs []segment
		of   func(ttftFigures) []ttftRound
	}{
		{"direct pipe", directSegments, func(f ttftFigures) []ttftRound { return f.direct }},
		{"through `starter acp`", tacpSegments, func(f ttftFigures) []ttftRound { return f.tacp }},
	} {
		fmt.Printf("Where the first token goes, %s (p50 / p99 ms; agent stdio timed by stdiotap)\n", side.name)
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprint(tw, "segment")
		for _, f := range figs {
			fmt.Fprintf(tw, "\t%s", f.agent)
		}
		fmt.Fprintln(tw)
		for _, s := range side.segs {
			fmt.Fprint(tw, s.name)
			for _, f := range figs {
				var lat []time.Duration
				for _, r := range side.of(f) {
					if d, ok := s.part(r); ok {
						lat = append(lat, d)
					}
				}
				st := statsOf(lat)
				fmt.Fprintf(tw, "\t%.1f / %.1f", st.p50, st.p99)
			}
			fmt.Fprintln(tw)
		}
		flushTable(t, tw)
	}
}

// sortedKeys is m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
}

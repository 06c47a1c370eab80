package bench

// Real agents on a fake model (issue 17): the per-prompt cost of a short reply with
// codex-acp and claude-agent-acp (and Gemini CLI and OpenCode when asked), through tacp
// against the same agent over a direct ACP pipe, side by side, on warm sessions. The model
// is internal/testkit/fakemodel on loopback, so the figures are the agent's own work plus tacp's,
// with no model time in them. Also the agent's resident memory, its whole process tree.
//
//	TACP_BENCH=1 go test ./bench -run TestRealAgentTable -v
//
// TACP_BENCH_REAL_TURNS (default 30) sets the rounds; TACP_BENCH_REAL_AGENTS (default
// "codex,claude") the agents, any of codex, claude, gemini, opencode. The agents are the
// ones .ci/peers installs under .ci/npm.

import (
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

	"github.com/tacp-dev/tacp/internal/proctree"
	"github.com/tacp-dev/tacp/internal/testkit/fakemodel"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

// shortReply is the prompt measured: a reply of a few streamed chunks, no tools.
const shortReply = "reply: a short answer of a few words"

// realAgentFigures is one agent's side-by-side round.
type realAgentFigures struct {
	agent        string
	direct, tacp []time.Duration
	// The tacp round trip's parts, from the journal's times (the workflow's clock): prompt
	// to turn.started, turn.started to turn.ended (the agent's work and the runner's), and
	// turn.ended to the viewer seeing it.
	toStart, inTurn, toViewer []time.Duration
	directRSS                 int64 // bytes, the direct agent's process tree, warm
	tacpRSS                   int64 // the tacp worker's agent's tree
	directProcs               int
	// Model requests per prompt, each way.
	directRequests, tacpRequests float64
}

// treeRSS sums VmRSS over pid and its descendants, and counts them.
func treeRSS(pid int) (int64, int) {
	var total int64
	tree := append([]int{pid}, proctree.Descendants(pid)...)
	for _, p := range tree {
		rss, _ := procMem(strconv.Itoa(p))
		total += rss
	}
	return total, len(tree)
}

func realAgentsToRun(t *testing.T) []fakemodel.Agent {
	names := strings.Split(os.Getenv("TACP_BENCH_REAL_AGENTS"), ",")
	if os.Getenv("TACP_BENCH_REAL_AGENTS") == "" {
		names = []string{"codex", "claude"}
	}
	var out []fakemodel.Agent
	for _, n := range names {
		i := slices.IndexFunc(fakemodel.Agents, func(a fakemodel.Agent) bool { return a.Name == n })
		if i < 0 {
			t.Fatalf("TACP_BENCH_REAL_AGENTS: no agent %q", n)
		}
		out = append(out, fakemodel.Agents[i])
	}
	return out
}

// measureRealAgent runs rounds of shortReply on a warm direct session and a warm tacp
// session of a, alternating.
func measureRealAgent(ctx context.Context, t *testing.T, a fakemodel.Agent, rounds int) realAgentFigures {
	f := realAgentFigures{agent: a.Name}
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
	fm := fakemodel.New(a.Provider)
	t.Cleanup(fm.Close)
	agentEnv, err := a.Setup(filepath.Join(env.tmp, "home-"+a.Name), fm)
	if err != nil {
		t.Fatal(err)
	}

	// The baseline: the agent over a direct pipe.
	ws := filepath.Join(env.tmp, "direct-"+a.Name)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, a.Args...)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), agentEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	d, err := startPeerWarm(ctx, a.Name+" direct", cmd, ws, "reply: warm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})

	// Through tacp: a worker of its own whose agent is a.
	w, sc := startBenchWorker(t, "real-"+a.Name, tacpworker.Options{Agent: a.CommandLine(filepath.Dir(bin), agentEnv), InitTimeout: 2 * time.Minute})
	s := &tacpSession{sc: sc, id: "bench-real-" + a.Name + "-" + signals.NewID()}
	if _, err := s.turn(ctx, "reply: warm"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.close(); err != nil {
			t.Error(err)
		}
	})

	const warmup = 3
	var directReqs, tacpReqs int
	for i := range warmup + rounds {
		before := len(fm.Requests())
		dd, err := d.prompt(ctx, shortReply)
		if err != nil {
			t.Fatal(err)
		}
		mid := len(fm.Requests())
		seen, err := s.turn(ctx, shortReply)
		if err != nil {
			t.Fatal(err)
		}
		if i >= warmup {
			directReqs += mid - before
			tacpReqs += len(fm.Requests()) - mid
			f.direct = append(f.direct, dd)
			f.tacp = append(f.tacp, seen.visible.Sub(seen.start))
			f.toStart = append(f.toStart, seen.startedAt.Sub(seen.start))
			f.inTurn = append(f.inTurn, seen.endedAt.Sub(seen.startedAt))
			f.toViewer = append(f.toViewer, seen.visible.Sub(seen.endedAt))
		}
	}
	f.directRequests = float64(directReqs) / float64(rounds)
	f.tacpRequests = float64(tacpReqs) / float64(rounds)
	f.directRSS, f.directProcs = treeRSS(cmd.Process.Pid)
	if pid := w.Host.AgentPID(s.id); pid > 0 {
		f.tacpRSS, _ = treeRSS(pid)
	}
	return f
}

// TestRealAgentTable prints the real agents' per-prompt figures.
func TestRealAgentTable(t *testing.T) {
	if os.Getenv("TACP_BENCH") != "1" {
		t.Skip("set TACP_BENCH=1 to measure real agents on a fake model")
	}
	rounds := envInt(t, "TACP_BENCH_REAL_TURNS", 30)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var figs []realAgentFigures
	for _, a := range realAgentsToRun(t) {
		figs = append(figs, measureRealAgent(ctx, t, a, rounds))
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "agent\tn\tdirect p50\tdirect p99\ttacp p50\ttacp p99\toverhead p50\tprompt→turn.started p50\tturn p50\tturn.ended→viewer p50\tmodel requests/prompt (direct, tacp)\tagent RSS (tree)\tprocesses\ttacp's agent RSS\t\n")
	for _, f := range figs {
		d, tp := statsOf(f.direct), statsOf(f.tacp)
		fmt.Fprintf(tw, "%s\t%d\t%.1f ms\t%.1f ms\t%.1f ms\t%.1f ms\t%.1f ms\t%.1f ms\t%.1f ms\t%.1f ms\t%.1f, %.1f\t%.0f MiB\t%d\t%.0f MiB\t\n",
			f.agent, d.n, d.p50, d.p99, tp.p50, tp.p99, tp.p50-d.p50,
			statsOf(f.toStart).p50, statsOf(f.inTurn).p50, statsOf(f.toViewer).p50, f.directRequests, f.tacpRequests,
			mib(f.directRSS), f.directProcs, mib(f.tacpRSS))
	}
	_ = tw.Flush()
	t.Logf("per-prompt round trip of %q on a warm session, direct ACP pipe vs through tacp (prompt until turn.ended seen by a viewer woken by the history):\n%s", shortReply, b.String())
}

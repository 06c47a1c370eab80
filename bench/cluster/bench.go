package main

// bench: bench/'s control round-trip table (TestControlRoundTripTable) and turn-path table
// (TestTurnTable), run twice in one go — first on the in-process server (devserver, SQLite
// in memory), then against this cluster (TACP_BENCH_ADDRESS = the frontend; the tacp worker
// still runs inside the test process) — and the headline figures of both side by side.
// Each run writes its figures as JSON lines (TACP_BENCH_FIGURES); the full tables of both
// runs are printed as they come and kept in the state directory.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Figure is one line of TACP_BENCH_FIGURES (written by bench/'s tables).
type Figure struct {
	Name  string  `json:"name"`
	N     int     `json:"n"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	// Value is a figure that is one number (a count, MiB, seconds): bench's recordValue.
	Value float64 `json:"value"`
}

// benchRows are the figures compared, in print order.
var benchRows = []struct{ name, label string }{
	{"control/noop_update", "noop update (baseline)"},
	{"control/prompt", "prompt"},
	{"control/steer", "steer"},
	{"control/steer_stale", "steer, stale token"},
	{"event/direct", "event path: direct ACP pipe"},
	{"event/flush_100ms", "event path: tacp, flush 100ms"},
	{"event/flush_1s", "event path: tacp, flush 1s"},
	{"warm/direct", "zero-work turn: direct ACP"},
	{"warm/tacp", "zero-work turn: tacp"},
}

func bench(ctx context.Context, st *State, o options) error {
	if alive := st.alive(); len(alive) != len(Services) {
		return fmt.Errorf("cluster in %s is not fully up (running: %v)", st.Dir, alive)
	}
	targets := []struct{ name, addr string }{{"in-process", ""}, {"cluster", st.Frontend()}}
	figs := map[string]map[string]Figure{}
	for _, t := range targets {
		file := filepath.Join(st.Dir, "bench-"+t.name+".jsonl")
		_ = os.Remove(file)
		logf("bench on the %s server%s", t.name, map[bool]string{true: " (" + t.addr + ")", false: ""}[t.addr != ""])
		cmd := st.goCmd(ctx, "test", "./bench", "-run", "^(TestControlRoundTripTable|TestTurnTable)$", "-v", "-count=1", "-timeout", o.timeout.String())
		env := []string{"TACP_BENCH=1", "TACP_BENCH_FIGURES=" + file,
			"TACP_BENCH_N=" + strconv.Itoa(o.benchN), "TACP_BENCH_TURNS=" + strconv.Itoa(o.benchTurns), "TACP_BENCH_CHUNKS=" + strconv.Itoa(o.benchChunks)}
		if t.addr != "" {
			env = append(env, "TACP_BENCH_ADDRESS="+t.addr, "TACP_BENCH_NAMESPACE="+namespace)
		}
		cmd.Env = append(withoutEnv(cmd.Env, "TACP_BENCH"), env...)
		out, err := os.Create(filepath.Join(st.logDir(), "bench-"+t.name+".log"))
		if err != nil {
			return err
		}
		cmd.Stdout = io.MultiWriter(os.Stdout, out)
		cmd.Stderr = cmd.Stdout
		err = cmd.Run()
		_ = out.Close()
		if err != nil {
			return fmt.Errorf("bench on the %s server: %w", t.name, err)
		}
		if figs[t.name], err = readFigures(file); err != nil {
			return err
		}
	}
	printBench(figs["in-process"], figs["cluster"])
	return nil
}

// withoutEnv drops every variable whose name starts with prefix (a TACP_BENCH_ADDRESS in
// the caller's environment must not reach the in-process run).
func withoutEnv(env []string, prefix string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, prefix) {
			out = append(out, kv)
		}
	}
	return out
}

func readFigures(file string) (map[string]Figure, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("figures: %w", err)
	}
	defer f.Close()
	out := map[string]Figure{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var fig Figure
		if err := json.Unmarshal(sc.Bytes(), &fig); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out[fig.Name] = fig
	}
	return out, sc.Err()
}

func printBench(in, cl map[string]Figure) {
	fmt.Println("\nIn-process server (devserver, SQLite in memory) vs the cluster (4 services, PostgreSQL 15), same machine, ms")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tin-process p50\tp99\tcluster p50\tp99\tcluster / in-process (p50)\tp50 / noop: in-process\tcluster")
	noopIn, noopCl := in["control/noop_update"].P50ms, cl["control/noop_update"].P50ms
	for _, r := range benchRows {
		a, okA := in[r.name]
		b, okB := cl[r.name]
		if !okA && !okB {
			continue
		}
		ratio := func(x, y float64) string {
			if y == 0 {
				return ""
			}
			return fmt.Sprintf("%.2f", x/y)
		}
		noopCols := "\t"
		if strings.HasPrefix(r.name, "control/") {
			noopCols = ratio(a.P50ms, noopIn) + "\t" + ratio(b.P50ms, noopCl)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\n", r.label, a.P50ms, a.P99ms, b.P50ms, b.P99ms, ratio(b.P50ms, a.P50ms), noopCols)
	}
	_ = tw.Flush()
	fmt.Println()
}

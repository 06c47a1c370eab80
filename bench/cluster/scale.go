package main

// scale: bench/'s scale table (TestScaleTable) run twice in one go — first on the
// in-process server (devserver, SQLite in memory) with the worker in the test process, the
// shape of `worker -dev`; then against this cluster with -scale-workers worker processes
// sharing one task queue (TACP_BENCH_WORKERS), the services' memory measured by their
// process ids (TACP_BENCH_SERVER_PIDS) — and the headline figures of both side by side.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
)

func scale(ctx context.Context, st *State, o options) error {
	if alive := st.alive(); len(alive) != len(Services) {
		return fmt.Errorf("cluster in %s is not fully up (running: %v)", st.Dir, alive)
	}
	var pids []string
	for _, svc := range Services {
		pids = append(pids, fmt.Sprintf("%s=%d", svc, st.PIDs[svc]))
	}
	targets := []struct {
		name    string
		workers int
		env     []string
	}{
		{"in-process", o.scaleInProcessWorkers, nil},
		{"cluster", o.scaleWorkers, []string{"TACP_BENCH_ADDRESS=" + st.Frontend(), "TACP_BENCH_NAMESPACE=" + namespace,
			"TACP_BENCH_SERVER_PIDS=" + strings.Join(pids, ",")}},
	}
	figs := map[string]map[string]Figure{}
	for _, t := range targets {
		file := filepath.Join(st.Dir, "scale-"+t.name+".jsonl")
		_ = os.Remove(file)
		logf("scale table on the %s server (%d idle + %d streaming sessions, %s)", t.name, o.scaleSessions, o.scaleTurns, workersOf(t.workers))
		cmd := st.goCmd(ctx, "test", "./bench", "-run", "^TestScaleTable$", "-v", "-count=1", "-timeout", o.timeout.String())
		env := append([]string{"TACP_BENCH=1", "TACP_BENCH_FIGURES=" + file,
			"TACP_BENCH_SCALE_SESSIONS=" + strconv.Itoa(o.scaleSessions), "TACP_BENCH_SCALE_TURNS=" + strconv.Itoa(o.scaleTurns),
			"TACP_BENCH_SCALE_CHUNKS=" + strconv.Itoa(o.scaleChunks)}, t.env...)
		if t.workers > 0 {
			env = append(env, "TACP_BENCH_WORKERS="+strconv.Itoa(t.workers))
		}
		cmd.Env = append(withoutEnv(cmd.Env, "TACP_BENCH"), env...)
		out, err := os.Create(filepath.Join(st.logDir(), "scale-"+t.name+".log"))
		if err != nil {
			return err
		}
		cmd.Stdout = io.MultiWriter(os.Stdout, out)
		cmd.Stderr = cmd.Stdout
		err = cmd.Run()
		_ = out.Close()
		if err != nil {
			return fmt.Errorf("scale table on the %s server: %w", t.name, err)
		}
		if figs[t.name], err = readFigures(file); err != nil {
			return err
		}
	}
	printScale(figs["in-process"], figs["cluster"], targets[0].workers, targets[1].workers)
	return nil
}

func workersOf(n int) string {
	if n == 0 {
		return "one worker in the test process"
	}
	return fmt.Sprintf("%d worker processes", n)
}

func printScale(in, cl map[string]Figure, inWorkers, clWorkers int) {
	fmt.Printf("\nScale: in-process server (devserver, SQLite in memory; %s) vs the cluster (4 services, PostgreSQL 15; %s), same machine\n",
		workersOf(inWorkers), workersOf(clWorkers))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tin-process\tcluster")
	lat := func(label, key string) {
		a, b := in[key], cl[key]
		fmt.Fprintf(tw, "%s, chunk p50 / p99 ms\t%.0f / %.0f\t%.0f / %.0f\n", label, a.P50ms, a.P99ms, b.P50ms, b.P99ms)
	}
	val := func(label, key, format string) {
		cell := func(m map[string]Figure) string {
			f, ok := m[key]
			if !ok {
				return "–"
			}
			return fmt.Sprintf(format, f.Value)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", label, cell(in), cell(cl))
	}
	workerRSS := func(m map[string]Figure, phase string) string {
		var each []string
		for i := 1; ; i++ {
			f, ok := m[fmt.Sprintf("scale/worker%d_rss_%s_mib", i, phase)]
			if !ok {
				break
			}
			each = append(each, fmt.Sprintf("%.0f", f.Value))
		}
		if len(each) == 0 {
			return fmt.Sprintf("test process %.0f", m["scale/process_rss_"+phase+"_mib"].Value)
		}
		return strings.Join(each, " / ")
	}
	val("idle sessions", "scale/idle_sessions", "%.0f")
	val("time to create them s", "scale/create_s", "%.1f")
	val("errors while creating", "scale/create_errors", "%.0f")
	lat("1 session alone", "scale/alone")
	lat("1 session among the idle", "scale/one_among_idle")
	lat(fmt.Sprintf("%d sessions among the idle", cl["scale/many"].N), "scale/many")
	val("  errors (any kind)", "scale/many/errors", "%.0f")
	val("  stream wall time s", "scale/many/wall_s", "%.1f")
	val("  history events per streaming turn", "scale/many/history", "%.1f")
	fmt.Fprintf(tw, "worker RSS MiB, idle\t%s\t%s\n", workerRSS(in, "idle"), workerRSS(cl, "idle"))
	fmt.Fprintf(tw, "worker RSS MiB, max during the streams\t%s\t%s\n", workerRSS(in, "peak"), workerRSS(cl, "peak"))
	perIdle := func(m map[string]Figure) string {
		if f, ok := m["scale/workers_mib_per_idle"]; ok {
			return fmt.Sprintf("%.2f (workers)", f.Value)
		}
		return fmt.Sprintf("%.2f (server and worker)", m["scale/process_mib_per_idle"].Value)
	}
	fmt.Fprintf(tw, "RSS MiB per idle session\t%s\t%s\n", perIdle(in), perIdle(cl))
	val("Temporal services' RSS MiB, idle", "scale/servers_rss_idle_mib", "%.0f")
	val("Temporal services' RSS MiB per idle session", "scale/servers_mib_per_idle", "%.2f")
	val("live agents with the idle sessions", "scale/idle_agents", "%.0f")
	val("history events per idle session", "scale/idle_history", "%.1f")
	_ = tw.Flush()
	fmt.Println()
}

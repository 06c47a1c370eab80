// Command cluster runs tacp against a real multi-service Temporal cluster on loopback, the
// shape production runs: PostgreSQL 15, and the Temporal server at the version go.mod pins
// (v1.32.0, built from the module cache) as four separate processes — frontend, history,
// matching and worker — so each can be killed on its own.
//
//	go run ./bench/cluster up      build the server and its SQL tool, start PostgreSQL, set up the
//	                               schema, start the four services, register namespace and search
//	                               attributes
//	go run ./bench/cluster chaos   two tacp workers and a streaming session; kill -9 history, then
//	                               matching, then frontend mid-turn and start each again, then the
//	                               tacp worker running the turn; check the journal; print recovery
//	                               times
//	go run ./bench/cluster bench   the control round-trip and turn-path benchmarks (bench/), on the
//	                               in-process server and on the cluster, side by side
//	go run ./bench/cluster scale   the scale table (bench/): on the in-process server with the worker
//	                               in the test process, then on the cluster with two worker
//	                               processes, side by side
//	go run ./bench/cluster down    stop everything and remove the state directory
//
// Everything lives in one state directory (-dir, default $TMPDIR/tacp-cluster): the
// PostgreSQL data, the server config, logs, and state.json with the ports and process ids
// that `down` needs. Every step is bounded in time; a failed or interrupted `up` tears down
// what it started, and a failed or interrupted `chaos` stops the whole cluster (its logs
// stay until `down`).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func usage(fs *flag.FlagSet) func() {
	return func() {
		fmt.Fprint(fs.Output(), `usage: go run ./bench/cluster [flags] up|chaos|bench|scale|down

  up      build temporal-server and temporal-sql-tool (v1.32.0), start PostgreSQL 15 and the
          frontend, history, matching and worker services on loopback
  chaos   kill -9 history, matching and frontend mid-turn of a streaming session, then the
          tacp worker running the turn (of two); verify the journal and print the recovery
          time of each kill
  bench   run bench/'s control and turn tables in-process and against the cluster; print both
  scale   run bench/'s scale table in-process (one worker in the test process) and against the
          cluster (-scale-workers worker processes); print both
  down    stop every process and remove the state directory

flags (each falls back to the environment variable named in brackets):
`)
		fs.PrintDefaults()
	}
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, ok := os.LookupEnv(name); ok {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

func envInt(name string, def int) int {
	if v, ok := os.LookupEnv(name); ok {
		var n int
		if _, err := fmt.Sscan(v, &n); err == nil {
			return n
		}
	}
	return def
}

func main() {
	fs := flag.NewFlagSet("cluster", flag.ExitOnError)
	fs.Usage = usage(fs)
	var o options
	fs.StringVar(&o.dir, "dir", envOr("TACP_CLUSTER_DIR", filepath.Join(os.TempDir(), "tacp-cluster")), "state directory [TACP_CLUSTER_DIR]")
	fs.StringVar(&o.pgBin, "pg-bin", envOr("TACP_CLUSTER_PG_BIN", "/usr/lib/postgresql/15/bin"), "PostgreSQL binaries (initdb, pg_ctl, psql) [TACP_CLUSTER_PG_BIN]")
	fs.StringVar(&o.logLevel, "log-level", envOr("TACP_CLUSTER_LOG_LEVEL", "warn"), "log level of the Temporal services [TACP_CLUSTER_LOG_LEVEL]")
	fs.IntVar(&o.shards, "shards", envInt("TACP_CLUSTER_SHARDS", 4), "history shards (fixed once the schema is set up) [TACP_CLUSTER_SHARDS]")
	fs.DurationVar(&o.timeout, "timeout", envDuration("TACP_CLUSTER_TIMEOUT", 30*time.Minute), "bound on the whole command [TACP_CLUSTER_TIMEOUT]")
	fs.IntVar(&o.chunks, "chunks", envInt("TACP_CLUSTER_CHUNKS", 250), "chaos: chunks of each streaming turn [TACP_CLUSTER_CHUNKS]")
	fs.DurationVar(&o.every, "every", envDuration("TACP_CLUSTER_EVERY", 20*time.Millisecond), "chaos: interval between chunks [TACP_CLUSTER_EVERY]")
	fs.IntVar(&o.rounds, "rounds", envInt("TACP_CLUSTER_ROUNDS", 1), "chaos: rounds of kills (history, matching, frontend, tacp worker each round) [TACP_CLUSTER_ROUNDS]")
	fs.DurationVar(&o.killAfter, "kill-after", envDuration("TACP_CLUSTER_KILL_AFTER", time.Second), "chaos: how long into the streaming turn the kill comes [TACP_CLUSTER_KILL_AFTER]")
	fs.IntVar(&o.benchN, "bench-n", envInt("TACP_BENCH_N", 300), "bench: control round trips of each kind [TACP_BENCH_N]")
	fs.IntVar(&o.benchTurns, "bench-turns", envInt("TACP_BENCH_TURNS", 100), "bench: warm zero-work turns [TACP_BENCH_TURNS]")
	fs.IntVar(&o.benchChunks, "bench-chunks", envInt("TACP_BENCH_CHUNKS", 1000), "bench: chunks of each streaming turn [TACP_BENCH_CHUNKS]")
	fs.IntVar(&o.scaleSessions, "scale-sessions", envInt("TACP_BENCH_SCALE_SESSIONS", 1000), "scale: idle sessions [TACP_BENCH_SCALE_SESSIONS]")
	fs.IntVar(&o.scaleTurns, "scale-turns", envInt("TACP_BENCH_SCALE_TURNS", 50), "scale: turns streaming at once among them [TACP_BENCH_SCALE_TURNS]")
	fs.IntVar(&o.scaleChunks, "scale-chunks", envInt("TACP_BENCH_SCALE_CHUNKS", 250), "scale: chunks of each streaming turn [TACP_BENCH_SCALE_CHUNKS]")
	fs.IntVar(&o.scaleWorkers, "scale-workers", envInt("TACP_CLUSTER_SCALE_WORKERS", 2), "scale: tacp worker processes on the cluster, on one task queue [TACP_CLUSTER_SCALE_WORKERS]")
	fs.IntVar(&o.scaleInProcessWorkers, "scale-inprocess-workers", envInt("TACP_CLUSTER_SCALE_INPROCESS_WORKERS", 0), "scale: tacp worker processes on the in-process server (0: one worker in the test process, as worker -dev) [TACP_CLUSTER_SCALE_INPROCESS_WORKERS]")
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() != 1 {
		fs.Usage()
		os.Exit(2)
	}
	var err error
	if o.dir, err = filepath.Abs(o.dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	switch cmd := fs.Arg(0); cmd {
	case "up":
		_, err = up(ctx, o)
	case "down":
		err = down(o.dir)
	case "chaos":
		err = withState(o.dir, func(st *State) error {
			_, err := chaos(ctx, st, o)
			if err != nil {
				// A failed or interrupted run leaves nothing running: not its workers and
				// agents, nor a cluster in whatever state the failure left it.
				if !errors.Is(ctx.Err(), context.Canceled) {
					printLogTails(st)
				}
				logf("chaos did not finish: stopping the cluster (its logs stay in %s; `down` removes them)", st.logDir())
				stopCluster(st)
			}
			return err
		})
	case "bench":
		err = withState(o.dir, func(st *State) error { return bench(ctx, st, o) })
	case "scale":
		if o.scaleSessions <= o.scaleTurns || o.scaleTurns < 1 || o.scaleChunks < 1 || o.scaleWorkers < 1 || o.scaleInProcessWorkers < 0 {
			err = fmt.Errorf("scale: want -scale-sessions > -scale-turns ≥ 1, -scale-chunks ≥ 1, -scale-workers ≥ 1 and -scale-inprocess-workers ≥ 0 (got %d, %d, %d, %d, %d)",
				o.scaleSessions, o.scaleTurns, o.scaleChunks, o.scaleWorkers, o.scaleInProcessWorkers)
			break
		}
		err = withState(o.dir, func(st *State) error { return scale(ctx, st, o) })
	default:
		fs.Usage()
		os.Exit(2)
	}
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w (bounded by -timeout %s)", err, o.timeout)
		}
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	dir, pgBin, logLevel string
	shards               int
	timeout              time.Duration

	chunks    int
	rounds    int
	every     time.Duration
	killAfter time.Duration
	// agent, when set, is the chaos workers' -agent in place of their built-in test agent;
	// noProbe starts them with -agent.probe=false (tests of a harness whose agent cannot
	// start).
	agent   string
	noProbe bool

	benchN, benchTurns, benchChunks int

	scaleSessions, scaleTurns, scaleChunks int
	scaleWorkers, scaleInProcessWorkers    int
}

// withState loads the state `up` left and runs fn with it.
func withState(dir string, fn func(*State) error) error {
	st, err := loadState(dir)
	if err != nil {
		return fmt.Errorf("%w (run `go run ./bench/cluster up` first)", err)
	}
	return fn(st)
}

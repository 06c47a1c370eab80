package main

// TestCluster brings a whole cluster up in a state directory of its own and, on it: the
// chaos kills (history, matching, frontend, a tacp worker) with the journal checks; a chaos
// agent that cannot start, which must fail the run within 60 s with the worker's reason; a
// Claude Code turn (claude-agent-acp on a fake model) that survives the kill -9 of its tacp
// worker; and, last, a `chaos` command interrupted mid-turn, which must leave no process of
// the cluster running. It needs PostgreSQL 15 and minutes (the server build on a cold cache,
// four services), so it runs only with TACP_CLUSTER=1 (.ci/run sets it):
//
//	TACP_CLUSTER=1 go test ./bench/cluster -v -timeout 30m
//
// An interrupt (SIGINT, SIGTERM) or the test's deadline ends the waits, and the cluster is
// taken down as the test ends, however it ends.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/internal/proctree"
	"github.com/tacp-dev/tacp/internal/testkit/fakemodel"
	"github.com/tacp-dev/tacp/signals"
)

// mainArgsEnv makes the test binary the cluster command, its arguments a JSON array in the
// variable: a test interrupts a `chaos` run in a process of its own.
const mainArgsEnv = "TACP_CLUSTER_TEST_MAIN"

func TestMain(m *testing.M) {
	if addr, ok := os.LookupEnv(listenerEnv); ok {
		runListener(addr)
	}
	if js, ok := os.LookupEnv(mainArgsEnv); ok {
		var args []string
		if err := json.Unmarshal([]byte(js), &args); err != nil {
			fmt.Fprintln(os.Stderr, mainArgsEnv+":", err)
			os.Exit(2)
		}
		os.Args = append([]string{"cluster"}, args...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testContext ends on SIGINT or SIGTERM, and two minutes before the test's deadline: the
// waits end, and the cleanups that take the cluster down run before the test binary is
// killed.
func testContext(t *testing.T) context.Context {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	t.Cleanup(stop)
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-2*time.Minute))
		t.Cleanup(cancel)
	}
	return ctx
}

// requireLive ends a subtest at once when ctx has ended (an interrupt, the deadline): it
// would only start what the cleanups then stop.
func requireLive(ctx context.Context, t *testing.T) {
	t.Helper()
	if ctx.Err() != nil {
		t.Fatalf("not run: %v", context.Cause(ctx))
	}
}

func TestCluster(t *testing.T) {
	if os.Getenv("TACP_CLUSTER") != "1" {
		t.Skip("set TACP_CLUSTER=1 to build and start a multi-service Temporal cluster and kill its services")
	}
	pgBin := envOr("TACP_CLUSTER_PG_BIN", "/usr/lib/postgresql/15/bin")
	if _, err := os.Stat(filepath.Join(pgBin, "initdb")); err != nil {
		t.Fatalf("TACP_CLUSTER=1 needs PostgreSQL 15's binaries in %s (TACP_CLUSTER_PG_BIN): %v", pgBin, err)
	}
	ctx := testContext(t)
	dir, err := os.MkdirTemp("", "tacp-cluster-test-")
	require.NoError(t, err)
	// up creates the directory itself and refuses one holding a cluster's state.
	require.NoError(t, os.Remove(dir))
	o := options{
		dir: dir, pgBin: pgBin, logLevel: "warn", shards: 4,
		timeout: 25 * time.Minute, chunks: 250, every: 20 * time.Millisecond, killAfter: time.Second, rounds: 1,
	}
	st, err := up(ctx, o)
	t.Cleanup(func() {
		if err := down(dir); err != nil {
			t.Errorf("down: %v", err)
		}
	})
	require.NoError(t, err, "up")
	bin, err := prepare(ctx, st)
	require.NoError(t, err)

	t.Run("ChaosKillsEveryServiceAndATacpWorkerMidTurn", func(t *testing.T) {
		requireLive(ctx, t)
		rep, err := runChaos(ctx, st, o, bin)
		require.NoError(t, err, "chaos")
		require.Len(t, rep.Kills, len(KillOrder))
		for _, k := range rep.Kills {
			t.Logf("%s killed: prompt acknowledged after %s, status after %s, turn %d %s after %d restarts",
				k.Service, round(k.Ack), round(k.Query), k.TurnID, k.Outcome, k.Restarts)
		}
	})
	t.Run("AChaosAgentThatCannotStartFailsTheRunWithTheWorkersReason", func(t *testing.T) {
		requireLive(ctx, t)
		// The test agent told to keep its transcripts in the state directory, which its
		// sandbox does not grant: it exits before it answers initialize.
		outside := filepath.Join(st.Dir, "chaos", "transcripts")
		for _, probe := range []bool{true, false} {
			t.Run(fmt.Sprintf("probe=%v", probe), func(t *testing.T) {
				o := o
				o.agent = fmt.Sprintf("%s testagent -steering -transcripts %s", strconv.Quote(filepath.Join(bin, "worker")), strconv.Quote(outside))
				o.noProbe = !probe
				rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				defer cancel()
				_, err := runChaos(rctx, st, o, bin)
				require.Error(t, err)
				require.NoError(t, rctx.Err(), "the run failed by itself, within 60 s: %v", err)
				t.Logf("the run failed: %v", err)
				msg := err.Error()
				require.Contains(t, msg, "before answering initialize", "the worker's reason")
				require.Contains(t, msg, "the kernel sandbox of its session refuses "+outside, "the path")
				require.Contains(t, msg, "-agent.sandbox=off", "the flag")
			})
		}
	})
	t.Run("AClaudeTurnSurvivesTheKillOfItsTacpWorker", func(t *testing.T) {
		requireLive(ctx, t)
		claudeFailover(ctx, t, st, bin)
	})
	t.Run("AnInterruptedChaosLeavesNoProcessBehind", func(t *testing.T) {
		requireLive(ctx, t)
		interruptedChaos(ctx, t, st)
	})
}

// requirePeer returns the path of a peer .ci/peers installed under .ci/npm/node_modules/.bin;
// missing, it skips the test, or fails it under TACP_REQUIRE_PEERS=1.
func requirePeer(t *testing.T, st *State, name string) string {
	path := filepath.Join(st.ModRoot, ".ci", "npm", "node_modules", ".bin", name)
	missing := ""
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not installed"
	} else if _, err := os.Stat(path); err != nil {
		missing = name + " is not installed"
	}
	if missing == "" {
		return path
	}
	if os.Getenv("TACP_REQUIRE_PEERS") == "1" {
		t.Fatalf("TACP_REQUIRE_PEERS=1 but %s: run `bash .ci/peers`", missing)
	}
	t.Skipf("%s: run `bash .ci/peers` (TACP_REQUIRE_PEERS=1 makes this a failure)", missing)
	return ""
}

// claudeFailover: two tacp workers on the cluster whose profile is Claude Code's, sandboxed;
// a turn streams, the worker running it is killed with kill -9, and the turn ends on the
// other worker, whose agent loads the same agent session from its per-session state.
func claudeFailover(ctx context.Context, t *testing.T, st *State, bin string) {
	a := fakemodel.Claude
	exe := requirePeer(t, st, a.Bin)
	fm := fakemodel.New(a.Provider)
	t.Cleanup(fm.Close)
	base := filepath.Join(st.Dir, "claude")
	env, err := a.Setup(filepath.Join(base, "home"), fm)
	require.NoError(t, err)
	profile, ok := activities.WellKnownProfile(a.Name)
	require.True(t, ok)
	profile.Command = strings.Join(append([]string{strconv.Quote(exe)}, a.Args...), " ")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		profile.Env[k] = v
	}
	profiles := filepath.Join(base, "profiles.json")
	js, err := json.Marshal(map[string]any{"profiles": []activities.Profile{profile}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(profiles, js, 0o644))

	rctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	queue := "tacp-claude-" + signals.NewID()[:8]
	args := append(st.workerFlags(queue, filepath.Join(base, "data")), "-agent.profiles", profiles, "-agent.start-timeout", "2m")
	r := &harness{ctx: rctx, ws: newWorkers(st, "claude-worker", filepath.Join(bin, "worker"), args, st.workerEnv(), fail)}
	defer r.ws.stop()
	// Each worker starts Claude Code once to learn it; the turn starts once they have, so
	// that its agent does not share a loaded machine with theirs.
	for range 2 {
		w, err := r.ws.start(rctx)
		require.NoError(t, err)
		require.NoError(t, r.within(3*time.Minute, fmt.Sprintf("tacp worker %s learning Claude Code", w.name), w.waitLearned))
	}
	c, err := client.Dial(client.Options{HostPort: st.Frontend(), Namespace: namespace, Logger: quietLogger()})
	require.NoError(t, err)
	defer c.Close()
	s := newSession(c, queue, "claude-"+signals.NewID()[:12])

	var res signals.PromptResult
	require.NoError(t, r.within(promptWithin, "the prompt acknowledged", func(ctx context.Context) (err error) {
		res, err = s.prompt(ctx, "slow: 60 tick")
		return err
	}))
	require.NoError(t, r.within(3*time.Minute, fmt.Sprintf("turn %d streaming three chunks", res.TurnID), func(ctx context.Context) error {
		n := 0
		_, err := s.waitEvent(ctx, func(ev signals.Event) (bool, error) {
			if ev.TurnID != res.TurnID {
				return false, nil
			}
			if signals.IsTerminal(ev.Kind) {
				return false, fmt.Errorf("turn %d ended before it streamed: %s", res.TurnID, outcome(ev))
			}
			if ev.Kind == signals.EventAgentUpdate && strings.Contains(string(ev.Data), `"agent_message_chunk"`) {
				n++
			}
			return n >= 3, nil
		})
		return err
	}))
	var before signals.Status
	var victim *workerProc
	require.NoError(t, r.within(hostWithin, "the session naming the tacp worker that runs its turn", func(ctx context.Context) (err error) {
		before, err = s.status(ctx, func(ss signals.Status) bool {
			victim = r.ws.byHost(ss.AgentHost)
			return ss.TurnID == res.TurnID && victim != nil && ss.AgentSessionID != ""
		})
		return err
	}))
	agents := procsOf(proctree.Descendants(victim.pid))
	require.NotEmpty(t, agents, "the worker runs the agent")
	t.Cleanup(func() { killAll(agents) })
	t.Logf("kill -9 tacp worker %s (pid %d) mid-turn, its agent's processes %v", victim.name, victim.pid, agents)
	require.NoError(t, victim.kill9(rctx))

	var term signals.Event
	require.NoError(t, r.within(5*time.Minute, fmt.Sprintf("the end of turn %d after its worker was killed", res.TurnID), func(ctx context.Context) (err error) {
		term, err = s.terminalOf(ctx, res.TurnID)
		return err
	}))
	require.Equal(t, "end_turn", outcome(term))
	if st.S3 != nil {
		// The turn's workspace checkpoint is in the cluster's S3 store, where any worker
		// restores it from.
		id, err := st.checkpoints().Commit(rctx, s.cfg.SessionID, res.TurnID)
		require.NoError(t, err, "turn %d's workspace checkpoint in %s", res.TurnID, st.checkpointStore())
		require.NotEmpty(t, id)
	}
	_, restarts := s.countTurn(res.TurnID)
	require.Positive(t, restarts, "the turn restarted on the other worker")
	var after signals.Status
	require.NoError(t, r.within(hostWithin, "the session's status", func(ctx context.Context) (err error) {
		after, err = s.status(ctx, func(signals.Status) bool { return true })
		return err
	}))
	require.NotNil(t, r.ws.byHost(after.AgentHost), "the agent runs on the live worker (host %s)", after.AgentHost)
	require.Equal(t, before.AgentSessionID, after.AgentSessionID, "the other worker loaded (session/load) the same agent session")
	require.NoError(t, s.check(&ChaosReport{}), "the journal")
	require.NoError(t, r.within(30*time.Second, "the killed worker's agent processes gone", func(ctx context.Context) error {
		for _, p := range agents {
			for p.running() {
				if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
					return fmt.Errorf("pid %d still runs", p.pid)
				}
			}
		}
		return nil
	}))
}

// interruptedChaos runs `chaos` against the cluster in a process of its own, interrupts it
// (SIGINT, as ctrl-C does) once it has killed a service mid-turn, and checks that nothing of
// the cluster runs afterwards: no process names the state directory in its command line,
// working directory or environment (services, PostgreSQL, tacp workers, agents), and
// PostgreSQL is stopped.
func interruptedChaos(ctx context.Context, t *testing.T, st *State) {
	args, err := json.Marshal([]string{"-dir", st.Dir, "chaos"})
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+string(args))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	var waitErr error
	exited := make(chan struct{})
	midTurn := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		seen := false
		for sc.Scan() {
			t.Log("chaos: " + sc.Text())
			if !seen && strings.Contains(sc.Text(), "kill -9 history") {
				seen = true
				close(midTurn)
			}
		}
		waitErr = cmd.Wait()
		close(exited)
	}()
	// A test that ends before the interrupt still interrupts it, so that it stops what it
	// started; a chaos that ignores the interrupt is killed.
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(2 * time.Minute):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})

	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	select {
	case <-midTurn:
	case <-exited:
		t.Fatalf("chaos exited before it killed history: %v", waitErr)
	case <-wctx.Done():
		if ctx.Err() != nil {
			t.Fatalf("waiting for chaos to kill history: %v", context.Cause(ctx))
		}
		t.Fatal("chaos did not kill history within 5 minutes")
	}
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	select {
	case <-exited:
		require.Error(t, waitErr, "an interrupted chaos fails")
	case <-time.After(2 * time.Minute):
		t.Fatal("chaos did not exit within 2 minutes of SIGINT")
	}
	require.Empty(t, processesOf(st.Dir), "processes of the cluster still running after an interrupted chaos")
	require.NoFileExists(t, filepath.Join(st.pgData(), "postmaster.pid"), "PostgreSQL is stopped")
	require.DirExists(t, st.logDir(), "the logs stay until down")
}

// processesOf describes every process but this one whose command line, working directory
// or environment names dir.
func processesOf(dir string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, ok := procOf(pid); !ok {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if names(cmdline, dir) || names(environ, dir) || names([]byte(cwd), dir) {
			out = append(out, fmt.Sprintf("pid %d: %s (cwd %s)", pid, strings.ReplaceAll(string(cmdline), "\x00", " "), cwd))
		}
	}
	return out
}

// names reports whether b (NUL-separated words) names dir or a path inside it.
func names(b []byte, dir string) bool {
	for rest := string(b); ; {
		i := strings.Index(rest, dir)
		if i < 0 {
			return false
		}
		rest = rest[i+len(dir):]
		if rest == "" || rest[0] == '/' || rest[0] == 0 {
			return true
		}
	}
}

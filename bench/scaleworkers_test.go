package bench

// The scale test's worker processes (TACP_BENCH_WORKERS=N): N runs of the real worker
// binary on one task queue, against the test's frontend (the embedded server's, or the
// cluster's with TACP_BENCH_ADDRESS), the shape of a deployment with N worker machines. Each
// has its own Temporal client, data directory and transcripts; they share the workspace
// root, as workers on separate machines share a volume (README, "Against a cluster"). A
// session's agent is a child process of the worker that runs it, so the test reads each
// worker's memory and its agents from /proc: a worker's RSS is its own, not the test's.

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

// workerProc is one worker process of the scale test.
type workerProc struct {
	pid  int
	log  string
	done chan struct{}
}

// startWorkerProcs builds the worker binary and starts n of it on a task queue of their own,
// each with at most maxAgents live agents and flushRate turn_events signals a second (0: the
// worker's default); they are stopped when t ends.
func startWorkerProcs(t testing.TB, name string, n, maxAgents, flushRate int) ([]*workerProc, *tacpclient.Client) {
	queue := "tacp-bench-" + name + "-" + signals.NewID()[:8]
	var procs []*workerProc
	t.Cleanup(func() { // registered before any session's close: sessions close while workers poll
		for _, p := range procs {
			p.stop()
		}
	})
	for i := range n {
		procs = append(procs, startWorkerProcOn(t, name, queue, i+1, maxAgents, flushRate))
	}
	waitPolling(t, queue, procs)
	return procs, tacpclient.NewClient(env.c, queue)
}

// startWorkerProcOn starts worker i of name on queue (building the worker binary once), with
// its own data directory and transcripts and the workspace root the others share; the
// caller stops it.
func startWorkerProcOn(t testing.TB, name, queue string, i, maxAgents, flushRate int) *workerProc {
	bin := filepath.Join(env.tmp, "worker")
	if _, err := os.Stat(bin); err != nil {
		build := exec.Command("go", "build", "-o", bin, "github.com/tacp-dev/tacp/worker")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build worker: %v\n%s", err, out)
		}
	}
	addr, ns := os.Getenv("TACP_BENCH_ADDRESS"), cmp.Or(os.Getenv("TACP_BENCH_NAMESPACE"), "default")
	if addr == "" {
		addr, ns = env.srv.HostPort(), env.srv.Namespace()
	}
	shared := filepath.Join(env.tmp, name+"-workspaces")
	dir := filepath.Join(env.tmp, fmt.Sprintf("%s-worker-%d", name, i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	agent := strconv.Quote(env.agentBinary) + " -transcripts " + strconv.Quote(filepath.Join(dir, "transcripts"))
	args := []string{
		"-address", addr, "-namespace", ns, "-task-queue", queue,
		"-data-dir", filepath.Join(dir, "data"), "-workspace.roots", shared,
		"-agent", agent, "-agent.max", strconv.Itoa(maxAgents),
		// As the in-process bench workers: unversioned, no probe start, no kernel sandbox.
		"-deployment.name=", "-agent.probe=false", "-agent.sandbox", "off",
		"-log.level", "warn",
	}
	if flushRate > 0 {
		args = append(args, "-events.max-rate", strconv.Itoa(flushRate))
	}
	p, err := startWorkerProc(bin, args, filepath.Join(dir, "worker.log"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitPolling returns once every worker of procs polls queue (a poller of its own identity
// on the workflow task queue), and fails t when one exits first: a worker that cannot start
// fails the test at once, not at its deadline.
func waitPolling(t testing.TB, queue string, procs []*workerProc) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		for i, p := range procs {
			if gone, log := p.exited(); gone {
				out, _ := os.ReadFile(log)
				t.Fatalf("worker process %d exited before it polled (%s):\n%s", i+1, log, out)
			}
		}
		res, err := env.c.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		if err == nil {
			ids := map[string]bool{}
			for _, pl := range res.GetPollers() {
				ids[pl.GetIdentity()] = true
			}
			if len(ids) >= len(procs) {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the %d worker processes do not all poll %s (last: %v)", len(procs), queue, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func startWorkerProc(bin string, args []string, logPath string) (*workerProc, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	// The worker reads its flags' TACP_* and the TEMPORAL_* variables: none of the caller's
	// may reach it.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TACP_") && !strings.HasPrefix(kv, "TEMPORAL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start worker: %w", err)
	}
	p := &workerProc{pid: cmd.Process.Pid, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// stop asks the worker to shut down (it stops its agents first), and kills it if it has not
// within 15 s (its reaper then stops the agents).
func (p *workerProc) stop() {
	_ = syscall.Kill(p.pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
		<-p.done
	}
}

// exited says whether the worker has ended, and where its log is.
func (p *workerProc) exited() (bool, string) {
	select {
	case <-p.done:
		return true, p.log
	default:
		return false, p.log
	}
}

// agentChildren returns the pids of the processes named like the agent binary whose parent
// is one of parents, by parent: a worker's live agents (not its reaper, a run of the worker's
// own binary).
func agentChildren(parents []int) map[int][]int {
	want := map[int]bool{}
	for _, p := range parents {
		want[p] = true
	}
	comm := filepath.Base(env.agentBinary)
	if len(comm) > 15 { // the kernel keeps 15 bytes of a command's name
		comm = comm[:15]
	}
	out := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses: cut at the last ')'.
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 || s[open+1:end] != comm {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil && want[ppid] {
			out[ppid] = append(out[ppid], pid)
		}
	}
	return out
}

package main

// The tacp worker processes of a run on the cluster: the worker binary, several on one task
// queue sharing one data dir (as workers on one host do, so that a turn's next attempt on
// another of them loads the agent session from the same per-session state), each read
// through its log as it writes it. "worker polling" is its start; an agent profile that did
// not answer initialize, or an exit the harness did not ask for, fails the run at once with
// the worker's own words, so that no wait of the run outlives the reason it cannot end.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tacp-dev/tacp/internal/proctree"
)

const (
	// workerReadyWithin bounds a worker's start: dial the frontend, join its deployment,
	// poll.
	workerReadyWithin = 2 * time.Minute
	// workerStopWithin bounds a worker's stop after SIGTERM (its agents stopped with it).
	workerStopWithin = 30 * time.Second
	// tailLines are the lines of a worker's log kept to explain a failure.
	tailLines = 15
)

// workers are the tacp worker processes of one run, all started with the same flags.
type workers struct {
	st    *State
	name  string   // the run's name: its log files and state.json entries are name-1, name-2, …
	exe   string   // the worker binary
	args  []string // its flags
	env   []string // its environment on top of this process's
	fail  context.CancelCauseFunc
	mu    sync.Mutex
	procs []*workerProc
}

// workerProc is one worker process.
type workerProc struct {
	name    string
	pid     int
	logPath string
	ready   chan struct{} // closed at its "worker polling" line
	learned chan struct{} // closed once its probe learned an agent profile
	exited  chan struct{} // closed when it has exited and its log is read to the end

	mu        sync.Mutex
	hostQueue string
	expected  bool // killed or stopped by the harness: its exit fails nothing
	exitErr   error
	tail      []string
}

// newWorkers returns the run's workers, none started yet; fail is called once with the
// reason a worker gives the run to end (its agent cannot start, it exited unasked).
func newWorkers(st *State, name, exe string, args, env []string, fail context.CancelCauseFunc) *workers {
	return &workers{st: st, name: name, exe: exe, args: args, env: env, fail: fail}
}

// start starts one more worker and waits until it polls.
func (ws *workers) start(ctx context.Context) (*workerProc, error) {
	ws.mu.Lock()
	name := fmt.Sprintf("%s-%d", ws.name, len(ws.procs)+1)
	ws.mu.Unlock()
	w := &workerProc{name: name, logPath: filepath.Join(ws.st.logDir(), name+".log"), ready: make(chan struct{}), learned: make(chan struct{}), exited: make(chan struct{})}
	logFile, err := os.OpenFile(w.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(ws.exe, ws.args...)
	cmd.Env = append(os.Environ(), ws.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StderrPipe()
	if err != nil {
		_ = logFile.Close()
		return nil, err
	}
	cmd.Stdout = logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	w.pid = cmd.Process.Pid
	ws.mu.Lock()
	ws.procs = append(ws.procs, w)
	ws.st.PIDs[name] = w.pid
	_ = ws.st.save()
	ws.mu.Unlock()
	go func() {
		w.read(out, logFile, ws.fail)
		err := cmd.Wait()
		_ = logFile.Close()
		w.mu.Lock()
		w.exitErr = err
		expected := w.expected
		w.mu.Unlock()
		close(w.exited)
		if !expected {
			ws.fail(fmt.Errorf("tacp worker %s (pid %d) exited: %v%s", name, w.pid, err, w.logTail()))
		}
	}()
	logf("started tacp worker %s (pid %d, log %s)", name, w.pid, w.logPath)
	wctx, cancel := context.WithTimeout(ctx, workerReadyWithin)
	defer cancel()
	select {
	case <-w.ready:
		return w, nil
	case <-w.exited:
		return w, fmt.Errorf("tacp worker %s exited before it polled: %v%s", name, w.exitErr, w.logTail())
	case <-wctx.Done():
		if cause := context.Cause(ctx); ctx.Err() != nil {
			return w, cause
		}
		return w, fmt.Errorf("tacp worker %s did not poll (no \"worker polling\" in its log) within %s%s", name, workerReadyWithin, w.logTail())
	}
}

// read copies the worker's log (JSON lines on stderr) to its file as it comes, keeps its
// last lines, and acts on the lines that say the worker polls or that its agent cannot start.
func (w *workerProc) read(r io.Reader, to io.Writer, fail context.CancelCauseFunc) {
	var learned sync.Once
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		_, _ = to.Write(append(line, '\n'))
		var rec struct {
			Msg       string `json:"msg"`
			HostQueue string `json:"host_queue"`
			Profile   string `json:"profile"`
			Error     string `json:"error"`
		}
		_ = json.Unmarshal(line, &rec)
		w.mu.Lock()
		w.tail = append(w.tail, string(line))
		if len(w.tail) > tailLines {
			w.tail = w.tail[len(w.tail)-tailLines:]
		}
		w.mu.Unlock()
		switch {
		case rec.Msg == "worker polling":
			w.mu.Lock()
			w.hostQueue = rec.HostQueue
			w.mu.Unlock()
			close(w.ready)
		case rec.Msg == "learned the agent of a profile":
			learned.Do(func() { close(w.learned) })
		case strings.HasPrefix(rec.Msg, "agent profile did not answer initialize") && !w.stopping():
			// (A worker stopped while it probes its agents says so too.)
			fail(fmt.Errorf("the agent of profile %q cannot start on tacp worker %s: %s", rec.Profile, w.name, rec.Error))
		}
	}
	_, _ = io.Copy(to, r) // past a line over the scanner's bound: the rest, unread
}

// waitLearned waits until the worker's start-up probe learned its agent (an agent that
// cannot start fails the run instead).
func (w *workerProc) waitLearned(ctx context.Context) error {
	select {
	case <-w.learned:
		return nil
	case <-w.exited:
		return fmt.Errorf("tacp worker %s exited: %v", w.name, w.exitErr)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// logTail is the end of the worker's log, for an error message.
func (w *workerProc) logTail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.tail) == 0 {
		return fmt.Sprintf("\n(tacp worker %s's log %s is empty)", w.name, w.logPath)
	}
	return fmt.Sprintf("\n--- last lines of tacp worker %s's log (%s) ---\n%s", w.name, w.logPath, strings.Join(w.tail, "\n"))
}

// stopping reports whether the harness killed or stops the worker.
func (w *workerProc) stopping() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.expected
}

func (w *workerProc) host() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hostQueue
}

func (w *workerProc) alive() bool {
	select {
	case <-w.exited:
		return false
	default:
		return true
	}
}

// kill9 kills the worker with SIGKILL, as a crash of its machine would, and waits until it
// is gone. Its agents are the reaper's to end (activities/reaper.go).
func (w *workerProc) kill9(ctx context.Context) error {
	w.mu.Lock()
	w.expected = true
	w.mu.Unlock()
	if err := syscall.Kill(w.pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 tacp worker %s (pid %d): %w", w.name, w.pid, err)
	}
	select {
	case <-w.exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("tacp worker %s (pid %d) still runs after kill -9: %w", w.name, w.pid, ctx.Err())
	case <-time.After(workerStopWithin):
		return fmt.Errorf("tacp worker %s (pid %d) still runs %s after kill -9", w.name, w.pid, workerStopWithin)
	}
}

// stop ends the worker with SIGTERM (it stops its agents), or SIGKILL to its process group
// and every process it started when it has not exited in time.
func (w *workerProc) stop() {
	w.mu.Lock()
	w.expected = true
	w.mu.Unlock()
	tree := procsOf(proctree.Descendants(w.pid))
	if w.alive() {
		_ = syscall.Kill(w.pid, syscall.SIGTERM)
		select {
		case <-w.exited:
		case <-time.After(workerStopWithin):
			logf("tacp worker %s (pid %d) did not stop within %s of SIGTERM: killing it", w.name, w.pid, workerStopWithin)
			_ = syscall.Kill(-w.pid, syscall.SIGKILL)
			<-w.exited
		}
	}
	killAll(tree)
}

// byHost returns the live worker whose host queue is q.
func (ws *workers) byHost(q string) *workerProc {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, w := range ws.procs {
		if w.alive() && w.host() == q {
			return w
		}
	}
	return nil
}

// live lists the workers still running.
func (ws *workers) live() []*workerProc {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var out []*workerProc
	for _, w := range ws.procs {
		if w.alive() {
			out = append(out, w)
		}
	}
	return out
}

// tails is the end of every worker's log, for an error message.
func (ws *workers) tails() string {
	ws.mu.Lock()
	procs := append([]*workerProc(nil), ws.procs...)
	ws.mu.Unlock()
	var b strings.Builder
	for _, w := range procs {
		b.WriteString(w.logTail())
	}
	return b.String()
}

// stop stops every worker and what they started, and forgets them in state.json.
func (ws *workers) stop() {
	ws.mu.Lock()
	procs := append([]*workerProc(nil), ws.procs...)
	ws.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); w.stop() }()
	}
	wg.Wait()
	ws.mu.Lock()
	for _, w := range procs {
		delete(ws.st.PIDs, w.name)
	}
	_ = ws.st.save()
	ws.mu.Unlock()
}

package activities

// Agents die with their worker. Each agent runs in a process group of its own (so that
// stopping it reaches everything it started: claude-agent-acp runs node children that
// outlive their parent), and a worker killed with SIGKILL runs no code of its own to stop
// them: before this, 6–7 agents of ~280 MiB each survived every kill.
//
// The design: one reaper process per worker process, started with the first agent. It is
// the worker's own binary run again (a re-exec: the init below turns it into the reaper
// before main runs), in a process group of its own, its stdin the read end of a pipe whose
// write end only the worker holds (close-on-exec: no agent inherits it). The worker writes
// "+PGID" when an agent's group starts and "-PGID" when it is gone. When the worker dies,
// however it dies, the kernel closes the write end; the reaper reads EOF, sends SIGTERM to
// every group still listed, SIGKILL after reaperGrace, and exits. A worker that shuts down
// cleanly stops its agents first and the reaper then has nothing left to do.
//
// Why not a parent-death signal: PR_SET_PDEATHSIG reaches the direct child alone (the
// agent's own children lived on), fires when the forking *thread* exits rather than the
// process, and is Linux only. Why not a supervisor per agent: a second process per agent,
// between the worker and the agent's exit status. A pipe's EOF is delivered by every Unix
// kernel; the only Linux-specific part is /proc/self/exe, the binary to re-exec (elsewhere:
// os.Executable). Windows has no process groups, and this package does not build there.
//
// What it does not cover: an agent started in the microseconds between its fork and the
// "+PGID" line when the worker dies exactly then; a reaper killed on its own (the worker
// logs that its agents are no longer covered); a process of an agent that leaves the
// group (setsid or setpgid, as a daemonizing tool does).
//
// When an agent's group leader exits, whatever it left in its group is killed at once
// (agentProc's wait): an agent's helpers are of no use without it.

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// reaperEnv marks the process the worker starts as its reaper.
const reaperEnv = "TACP_AGENT_REAPER"

// reaperGrace is how long the reaper waits after SIGTERM before it kills a group.
const reaperGrace = 2 * time.Second

func init() {
	if os.Getenv(reaperEnv) == "1" {
		os.Exit(runReaper(os.Stdin))
	}
}

// runReaper is the reaper process: it tracks the groups the worker lists on in and, at EOF
// (the worker is gone), stops them.
func runReaper(in io.Reader) int {
	// Ctrl-C in a terminal, a hang-up or a SIGTERM meant for the worker must not take the
	// reaper down before the worker: it leaves when the worker's end of the pipe closes.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	groups := map[int]bool{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			groups[pgid] = true
		case '-':
			delete(groups, pgid)
		}
	}
	stopGroups(groups)
	return 0
}

// stopGroups sends SIGTERM to every group, then SIGKILL to those still alive after
// reaperGrace.
func stopGroups(groups map[int]bool) {
	var alive []int
	for pgid := range groups {
		if syscall.Kill(-pgid, syscall.SIGTERM) == nil {
			alive = append(alive, pgid)
		}
	}
	deadline := time.Now().Add(reaperGrace)
	for len(alive) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // polling: the groups are not our children to wait for
		still := alive[:0]
		for _, pgid := range alive {
			if groupAlive(pgid) {
				still = append(still, pgid)
			}
		}
		alive = still
	}
	for _, pgid := range alive {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// groupAlive reports whether a process group still has a member that is not a zombie.
// kill(-pgid, 0) alone counts zombies, which an init that does not reap (a container's
// PID 1) keeps around after they died.
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	if runtime.GOOS != "linux" {
		return true
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, state, ok := procGroup(pid); ok && g == pgid && state != "Z" {
			return true
		}
	}
	return false
}

// procGroup reads the process group and state of pid from /proc/PID/stat (Linux).
func procGroup(pid int) (pgid int, state string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", false
	}
	// "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 {
		return 0, "", false
	}
	pgid, err = strconv.Atoi(f[2])
	return pgid, f[0], err == nil
}

// reaper is the worker's side: the pipe to its reaper process.
type reaper struct {
	mu     sync.Mutex
	w      *os.File // nil: no reaper (it could not start, or it died)
	log    *slog.Logger
	failed bool
}

var (
	workerReaper     *reaper
	workerReaperOnce sync.Once
)

// theReaper returns this process's reaper, starting it the first time.
func theReaper(log *slog.Logger) *reaper {
	workerReaperOnce.Do(func() {
		workerReaper = &reaper{log: log}
		if err := workerReaper.start(); err != nil {
			log.Warn("agent reaper did not start: agents will outlive this worker if it is killed", "error", err)
		}
	})
	return workerReaper
}

// reaperCommand is this very binary, to be run as the reaper.
func reaperCommand() (string, error) {
	if runtime.GOOS == "linux" {
		return "/proc/self/exe", nil // works even when the file was replaced or deleted since
	}
	return os.Executable()
}

func (r *reaper) start() error {
	exe, err := reaperCommand()
	if err != nil {
		return err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), reaperEnv+"=1")
	cmd.Stdin = pr
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a group kill of the worker spares it
	if err := cmd.Start(); err != nil {
		pw.Close()
		return fmt.Errorf("start %s: %w", exe, err)
	}
	go func() { _ = cmd.Wait() }() // reap it if it ends before the worker
	r.w = pw
	return nil
}

// watch lists an agent's process group with the reaper; forget takes it off.
func (r *reaper) watch(pgid int)  { r.send('+', pgid) }
func (r *reaper) forget(pgid int) { r.send('-', pgid) }

func (r *reaper) send(op byte, pgid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w == nil {
		return
	}
	if _, err := fmt.Fprintf(r.w, "%c%d\n", op, pgid); err != nil && !r.failed {
		r.failed = true
		r.log.Warn("agent reaper is gone: agents will outlive this worker if it is killed", "error", err)
	}
}

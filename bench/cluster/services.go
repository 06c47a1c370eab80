package main

// The Temporal service processes: starting each and reaping it, waiting until it listens,
// telling whether a process id still names one of this cluster's, killing one with -9 until
// it is gone, and starting it again as a supervisor does.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// startService starts one service process, appending to its log, and records its pid.
func (st *State) startService(svc string) (int, error) {
	logf, err := os.OpenFile(filepath.Join(st.logDir(), svc+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n=== tacp bench/cluster: start %s at %s ===\n", svc, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(st.Server, "--config-file", st.Config, "--allow-no-auth", "start", "--service", svc)
	cmd.Dir = st.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", svc, err)
	}
	pid := track(cmd)
	st.PIDs[svc] = pid
	return pid, st.save()
}

// child is a process this process started and reaps: done closes when it has exited, how
// is then how it ended ("signal: killed", "exit status 1").
type child struct {
	done chan struct{}
	how  string
}

// children are the processes this process started (track), by pid.
var children sync.Map

// track reaps cmd, started, when it exits, and remembers how it ended; it returns its pid.
// While this process has not reaped it, its pid names it and nothing else.
func track(cmd *exec.Cmd) int {
	c := &child{done: make(chan struct{})}
	pid := cmd.Process.Pid
	children.Store(pid, c)
	go func() {
		_ = cmd.Wait()
		c.how = cmd.ProcessState.String()
		close(c.done)
	}()
	return pid
}

// running reports whether pid is a live process of this cluster. A process this process
// started is asked through its reaper: /proc/PID/cmdline, which ours reads, is empty for a
// moment after exec has returned to the parent and before the new program's arguments are
// in place, and a service just started would pass for dead then.
func (st *State) running(pid int) bool {
	if v, ok := children.Load(pid); ok {
		select {
		case <-v.(*child).done:
			return false
		default:
			return true
		}
	}
	return st.ours(pid)
}

// exitOf says how the process pid, which this process started, ended, waiting a moment for
// its reaper; "" when it was not started here.
func exitOf(pid int) string {
	v, ok := children.Load(pid)
	if !ok {
		return ""
	}
	select {
	case <-v.(*child).done:
		return v.(*child).how
	case <-time.After(time.Second):
		return ""
	}
}

// waitPort waits until svc accepts TCP connections on its gRPC port.
func (st *State) waitPort(ctx context.Context, svc string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(st.Ports[svc].GRPC))
	for {
		if pid := st.PIDs[svc]; !st.running(pid) {
			how := ""
			if e := exitOf(pid); e != "" {
				how = " (" + e + ")"
			}
			return fmt.Errorf("%s (pid %d) exited%s before it opened %s%s", svc, pid, how, addr, st.logTail(svc))
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s did not open %s within %s%s", svc, addr, limit, st.logTail(svc))
			}
			return fmt.Errorf("waiting for %s to open %s: %w", svc, addr, context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// logTail is the end of a service's log, for an error message.
func (st *State) logTail(svc string) string {
	path := filepath.Join(st.logDir(), svc+".log")
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return fmt.Sprintf("\n(%s's log %s is empty)", svc, path)
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return fmt.Sprintf("\n--- end of %s's log (%s) ---\n%s", svc, path, b)
}

// ours reports whether pid is a live process of this cluster: a service started with this
// cluster's config file, or a binary built into its state directory (tacp's worker and
// testagent). PostgreSQL is pg_ctl's to stop.
func (st *State) ours(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// A zombie (exited, not yet reaped) is not running.
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
			return false
		}
	}
	args := bytes.Split(b, []byte{0})
	if bytes.HasPrefix(args[0], []byte(st.Dir+string(os.PathSeparator))) {
		return true
	}
	return bytes.Contains(b, []byte("--config-file\x00"+st.configPath()+"\x00"))
}

// restartDead starts again every service that is not running (a chaos run cut short
// between a kill and the restart leaves one dead) and waits until it listens.
func (st *State) restartDead(ctx context.Context) {
	for _, svc := range Services {
		if st.running(st.PIDs[svc]) {
			continue
		}
		if err := st.restart(ctx, svc); err != nil {
			logf("restart %s: %v", svc, err)
			continue
		}
		logf("restarted %s (pid %d)", svc, st.PIDs[svc])
	}
}

// alive lists the services whose recorded process still runs.
func (st *State) alive() []string {
	var out []string
	for _, svc := range Services {
		if st.running(st.PIDs[svc]) {
			out = append(out, svc)
		}
	}
	return out
}

// kill9 kills a service with SIGKILL and waits until it is gone: every thread of it ended
// and its ports refusing connections. The process shows as a zombie as soon as its main
// thread has exited, while its other threads may still be ending and holding its listening
// sockets: a service started again then would find its ports taken, and a dial to the old
// socket would pass for the new process being up.
func (st *State) kill9(ctx context.Context, svc string) error {
	pid := st.PIDs[svc]
	if !st.running(pid) {
		return fmt.Errorf("%s (pid %d) is not running", svc, pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 %s (pid %d): %w", svc, pid, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for !gone(pid) || st.listening(svc) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s (pid %d) still runs or holds its ports after kill -9: %w", svc, pid, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// gone reports whether pid has exited with every thread: reaped, or a zombie whose other
// threads have ended too (its only task is itself).
func gone(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return true
	}
	if len(tasks) > 1 {
		return false
	}
	f := statFields(pid)
	return f == nil || f[0] == "Z"
}

// listening reports whether any of svc's ports accepts a connection.
func (st *State) listening(svc string) bool {
	p := st.Ports[svc]
	for _, port := range []int{p.GRPC, p.Membership, p.HTTP} {
		if port == 0 {
			continue
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			_ = c.Close()
			return true
		}
	}
	return false
}

// restart starts svc again after kill9 and waits until it serves, as a supervisor (systemd,
// Kubernetes) does: a start that exits before it opens its port is logged with how it ended
// and tried again, up to three starts.
func (st *State) restart(ctx context.Context, svc string) error {
	var err error
	for try := 1; try <= 3; try++ {
		if _, err = st.startService(svc); err != nil {
			return err
		}
		if err = st.waitPort(ctx, svc, 2*time.Minute); err == nil || st.running(st.PIDs[svc]) || ctx.Err() != nil {
			return err
		}
		logf("start %d of %s: %v", try, svc, err)
	}
	return err
}

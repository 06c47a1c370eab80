//go:build linux

package sandbox

// Start starts a sandboxed agent without running the worker's binary again, where it can:
// the sandbox is applied to one OS thread of the worker (never its main thread,
// offMainThread), locked to the goroutine that then forks the agent from it (a fork copies
// the calling thread's credentials, Landlock domain, seccomp filter and mount namespace;
// execve keeps them), and the thread is never given back to the Go runtime: it ends with
// its goroutine. Re-running the worker's binary costs the
// init of all its packages (the embedded Temporal server: ~100 ms and more on a loaded
// machine) where this costs a thread. A worker that is not root cannot give a thread a mount
// namespace of its own (a user namespace needs a single-threaded process), so its agents
// whose profile protects workspace paths go through the sandboxing step (apply_linux.go).

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Start starts cmd (an exec.Cmd of Command's argv and env, ForkAttr applied) confined as
// its env says; a cmd without a sandbox starts as cmd.Start does.
func Start(cmd *exec.Cmd) error {
	v := envValue(cmd.Env, PolicyEnv)
	if v == "" {
		return cmd.Start()
	}
	var p Policy
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return fmt.Errorf("sandbox policy: %w", err)
	}
	if p.OwnPort != 0 {
		defer unix.Close(p.NetFD) // the agent's alone: forked, it holds its own copy
	}
	if len(p.Protect) > 0 && os.Geteuid() != 0 {
		return cmd.Start() // the sandboxing step, in the namespaces of ForkAttr
	}
	// The agent itself, its environment without the policy, no namespace of the fork.
	cmd.Path, cmd.Args = p.Exe, slices.Clone(p.Argv)
	cmd.Env = slices.DeleteFunc(slices.Clone(cmd.Env), func(kv string) bool { return strings.HasPrefix(kv, PolicyEnv+"=") })
	if cmd.SysProcAttr != nil {
		cmd.SysProcAttr.Cloneflags &^= unix.CLONE_NEWNS | unix.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings, cmd.SysProcAttr.GidMappings, cmd.SysProcAttr.AmbientCaps = nil, nil, nil
	}
	done := make(chan error, 1)
	offMainThread(func() {
		if err := confineThread(p); err != nil {
			done <- fmt.Errorf("sandbox: %w", err)
			return
		}
		done <- cmd.Start()
	})
	return <-done
}

// offMainThread runs fn on a goroutine locked to an OS thread that is not the process's
// main thread, and never gives that thread back: it ends with fn's goroutine. A thread the
// sandbox confines must not be the main one. Its tid is the worker's pid, and Landlock's
// signal scope compares the target's domain with the sender's: with the main thread in an
// agent's domain, that agent could signal the worker (a kill -0 did, once in 300 starts).
// And the Go runtime never ends its main thread: it would stay confined.
func offMainThread(fn func()) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			fn()
			return
		}
		// While this goroutine holds the main thread, the next one locks another.
		done := make(chan struct{})
		offMainThread(func() {
			defer close(done)
			fn()
		})
		<-done
		runtime.UnlockOSThread()
	}()
}

// confineThread applies p to the calling (locked) thread.
func confineThread(p Policy) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if len(p.Protect) > 0 {
		worker, err := os.Readlink("/proc/thread-self/ns/mnt") // the worker's, before the unshare
		if err != nil {
			return fmt.Errorf("protect: %w", err)
		}
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("protect: a mount namespace: %w", err)
		}
		if err := protect(p.Protect, "/proc/thread-self/ns/mnt", worker); err != nil {
			return err
		}
	}
	fd, err := unix.Dup(p.NetFD) // confine closes the ruleset it applied: the worker keeps its own
	if err != nil {
		return errors.Join(errors.New("network ruleset"), err)
	}
	p.NetFD = fd
	return confine(p)
}

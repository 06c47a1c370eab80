//go:build linux

package sandbox

// The sandboxing step: the worker's binary run again with the policy in PolicyEnv. Its
// init, before main and before anything of the program runs, sets no_new_privs, makes the
// protected workspace paths read-only in its own mount namespace, loads the seccomp filter,
// enforces the two Landlock layers (the network's, inherited from the worker, and the
// files' and scopes', built here) and execs the agent. All of that holds for the calling
// thread, and init runs on the main thread, locked to it: execve takes that thread's
// credentials, seccomp filter and Landlock domain into the agent, and the runtime's other
// threads end with the exec.
//
// Any failure ends the process with status 126 and a line on stderr: the agent never runs
// outside the sandbox it was given (fail closed).

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

func init() {
	if v, ok := os.LookupEnv(PolicyEnv); ok {
		os.Exit(runSandboxed(v))
	}
}

// runSandboxed applies the policy v and execs the agent; it returns only on failure.
func runSandboxed(v string) int {
	runtime.LockOSThread()
	var p Policy
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		fmt.Fprintf(os.Stderr, "tacp sandbox: bad policy: %v\n", err)
		return 126
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, PolicyEnv+"=") {
			env = append(env, kv)
		}
	}
	if err := apply(p); err != nil {
		fmt.Fprintf(os.Stderr, "tacp sandbox: %v\n", err)
		return 126
	}
	err := syscall.Exec(p.Exe, p.Argv, env)
	fmt.Fprintf(os.Stderr, "tacp sandbox: exec %s: %v\n", p.Exe, err)
	return 127
}

// apply confines the calling thread (and what it execs) to p.
func apply(p Policy) error {
	if len(p.Argv) == 0 || p.Exe == "" {
		return errors.New("no agent command")
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if len(p.Protect) > 0 {
		parent, err := os.Readlink("/proc/" + strconv.Itoa(os.Getppid()) + "/ns/mnt")
		if err != nil {
			return fmt.Errorf("protect: %w", err)
		}
		if err := protect(p.Protect, "/proc/self/ns/mnt", parent); err != nil {
			return err
		}
	}
	return confine(p)
}

// confine is apply after the mounts: capabilities, seccomp, the Landlock layers.
func confine(p Policy) error {
	// Capabilities the fork granted for the mounts above go no further than here.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	if err := installSeccomp(p.Network); err != nil {
		return err
	}
	if p.NetFD <= 0 {
		return errors.New("no network ruleset")
	}
	// The files' layer first, the network's last: each landlock_restrict_self copies the
	// domain it stacks on, and the network layer of NetworkAll holds a rule for every port
	// but the denied ones (65,000). Stacked first, it was copied twice per agent (30-60 ms
	// of an agent's start); last, once.
	fs, err := fsRuleset(p)
	if err != nil {
		return err
	}
	defer unix.Close(fs)
	if err := restrictSelf(fs); err != nil {
		return fmt.Errorf("file rules: %w", err)
	}
	if err := restrictSelf(p.NetFD); err != nil {
		return fmt.Errorf("network rules: %w", err)
	}
	_ = unix.Close(p.NetFD)
	return nil
}

// lockedFlags are the mount flags statfs reports that a remount must keep.
var lockedFlags = map[struct {
	st int64
	ms uintptr
}]bool{
	{unix.ST_NOSUID, unix.MS_NOSUID}: true, {unix.ST_NODEV, unix.MS_NODEV}: true, {unix.ST_NOEXEC, unix.MS_NOEXEC}: true,
	{unix.ST_NOATIME, unix.MS_NOATIME}: true, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}: true, {unix.ST_RELATIME, unix.MS_RELATIME}: true,
}

// protect bind-mounts each path read-only onto itself, in the mount namespace of its own
// that ns names (the fork's, ForkAttr, or the thread's, Start). It refuses to touch the
// worker's namespace, which worker names.
func protect(paths []string, ns, worker string) error {
	self, err := os.Readlink(ns)
	if err != nil || self == worker {
		return fmt.Errorf("protect: not in a mount namespace of its own (%v)", err)
	}
	// Nothing mounted here propagates back to the worker's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("protect: make mounts private: %w", err)
	}
	for _, p := range paths {
		if err := unix.Mount(p, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("protect %s: %w", p, err)
		}
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != nil {
			return fmt.Errorf("protect %s: %w", p, err)
		}
		// A remount keeps the flags a user namespace may not drop.
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
		for st2ms := range lockedFlags {
			if int64(st.Flags)&st2ms.st != 0 {
				flags |= st2ms.ms
			}
		}
		if err := unix.Mount("", p, "", flags, ""); err != nil {
			return fmt.Errorf("protect %s: read-only: %w", p, err)
		}
	}
	return nil
}

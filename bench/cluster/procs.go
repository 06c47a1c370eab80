package main

// Processes by identity: a pid and its start time, so that a process remembered a while ago
// is killed only if that pid still names it (on a machine others share, a pid freed by an
// agent that exited may be taken by anything).

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one process: its pid and its start time in clock ticks since boot (proc(5)
// stat field 22).
type proc struct {
	pid   int
	start string
}

// statFields is /proc/pid/stat after the command name, which may hold spaces and
// parentheses: fields[0] is the state (field 3).
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// procOf returns pid's identity (ok false: no such process, or a zombie).
func procOf(pid int) (proc, bool) {
	f := statFields(pid)
	if len(f) < 20 || f[0] == "Z" {
		return proc{}, false
	}
	return proc{pid: pid, start: f[19]}, true
}

// procsOf returns the identities of the pids that run.
func procsOf(pids []int) []proc {
	var out []proc
	for _, p := range pids {
		if id, ok := procOf(p); ok {
			out = append(out, id)
		}
	}
	return out
}

// running reports whether p still runs as the same process.
func (p proc) running() bool {
	now, ok := procOf(p.pid)
	return ok && now.start == p.start
}

// killAll kills every process of ps that still runs as itself with SIGKILL and waits,
// bounded, until none does.
func killAll(ps []proc) {
	for _, p := range ps {
		if p.running() {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range ps {
		for p.running() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Package proctree reads the Linux process tree from /proc: which processes descend from a
// pid, and whether a pid still runs. Tests and benchmarks use it to find an agent's process
// tree and to check that nothing of it survives its worker.
package proctree

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// stat is /proc/pid/stat after the command name: "state ppid ...". The name may hold
// spaces and parentheses, so the fields start after the last ')'.
func stat(b []byte) []string {
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// Children maps every running pid's parent to its children.
func Children() map[int][]int {
	children := map[int][]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		fields := stat(b)
		if len(fields) < 2 {
			continue
		}
		p, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		pp, _ := strconv.Atoi(fields[1])
		children[pp] = append(children[pp], p)
	}
	return children
}

// Descendants lists pid's descendants, breadth first (pid itself not included).
func Descendants(pid int) []int {
	children := Children()
	var out []int
	queue := children[pid]
	for len(queue) > 0 {
		p := queue[0]
		queue = append(queue[1:], children[p]...)
		out = append(out, p)
	}
	return out
}

// Alive reports whether pid runs. A zombie does not: it has died, and an init that never
// reaps would keep it listed.
func Alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // it answered the signal: running, as far as anyone can tell
	}
	fields := stat(b)
	return len(fields) == 0 || fields[0] != "Z"
}

// ThreadNices lists the nice (proc(5) field 19) of every thread of pid; threads that end
// while it reads are left out.
func ThreadNices(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, _ := os.ReadDir(dir)
	var nices []int
	for _, task := range tasks {
		b, err := os.ReadFile(dir + task.Name() + "/stat")
		if fields := stat(b); err == nil && len(fields) > 16 {
			if n, err := strconv.Atoi(fields[16]); err == nil { // fields[0] is field 3
				nices = append(nices, n)
			}
		}
	}
	return nices
}

package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// A real agent keeps working after its answer (Claude Code writes its session files and
// telemetry for a few hundred milliseconds), and a turn through tacp leaves the session's
// last tasks and the gateway's queries behind it. A round that starts while the other
// side's leftovers still run measures them, not itself: on 2 cores the first-token bench's
// tacp rounds started beside the direct Claude's tail. waitQuiet starts each measured prompt
// on a machine that has been nearly idle for a moment, both sides alike.
const (
	quietWindow = 200 * time.Millisecond // one look at the CPUs (USER_HZ 100: 40 ticks on 2 cores)
	quietBusy   = 0.10                   // of all CPUs' time in the window
	quietMost   = 3 * time.Second        // a machine that stays busy is measured as it is
)

// quietOn reports whether the bench waits for a quiet machine before each prompt
// (TACP_BENCH_QUIET, default 1).
func quietOn() bool { return os.Getenv("TACP_BENCH_QUIET") != "0" }

// cpuTimes reads the busy and total time of all CPUs from /proc/stat, in ticks.
func cpuTimes() (busy, total uint64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for i, f := range fields[1:] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total, nil
}

// waitQuiet waits until one quietWindow of the machine was less than quietBusy busy, at
// most quietMost; settled is false when it was not (or /proc/stat could not be read).
func waitQuiet(ctx context.Context) (settled bool) {
	deadline := time.Now().Add(quietMost)
	b0, t0, err := cpuTimes()
	for err == nil && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(quietWindow):
		}
		b1, t1, e := cpuTimes()
		if err = e; err != nil {
			break
		}
		if t1 > t0 && float64(b1-b0) < quietBusy*float64(t1-t0) {
			return true
		}
		b0, t0 = b1, t1
	}
	return false
}

package bench

// A CPU burner beside a benchmark (TACP_BENCH_BURN): busy processes of the test's own
// priority, one per core unless it names a number, for the whole test. Load is a condition
// a table is measured under; the table prints the load average beside its figures.

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// startBurn starts TACP_BENCH_BURN busy processes ("1": one per core), stopped when t ends;
// it returns how many it started.
func startBurn(t testing.TB) int {
	v := os.Getenv("TACP_BENCH_BURN")
	if v == "" || v == "0" {
		return 0
	}
	n := runtime.NumCPU()
	if v != "1" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			t.Fatalf("TACP_BENCH_BURN=%q: want 1 (a busy process per core) or a number of processes", v)
		}
	}
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatalf("burner: %v", err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	return n
}

// loadAvg is the machine's load average over 1, 5 and 15 minutes, as /proc/loadavg says.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return fmt.Sprintf("%s %s %s", f[0], f[1], f[2])
}

package activities

// Tests of the reaper: agents, and what they started in their process group, die with
// their worker however it dies (SIGKILL included), and an agent's leftovers die with it.

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// processAlive reports whether pid runs (a zombie does not: it has died, and an init that
// does not reap keeps it listed).
func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	_, state, ok := procGroup(pid)
	return !ok || state != "Z"
}

// killOnCleanup kills pids when t ends, so a failing test leaves nothing running.
func killOnCleanup(t *testing.T, pids ...int) {
	t.Cleanup(func() {
		for _, pid := range pids {
			if pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// startWorkerHelper runs the test binary as a worker with one testagent (and its child in
// the agent's group) and returns it with the two pids.
func startWorkerHelper(t *testing.T) (*exec.Cmd, int, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=worker", "TACP_ACTIVITIES_TESTAGENT="+testagentBin)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	f := strings.Fields(line)
	require.Len(t, f, 3, line)
	agent, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	child, err := strconv.Atoi(f[2])
	require.NoError(t, err)
	killOnCleanup(t, agent, child)
	require.True(t, processAlive(agent))
	require.True(t, processAlive(child))
	return cmd, agent, child
}

func TestAgentsAndTheirChildrenDieWithAWorkerKilledWithSIGKILL(t *testing.T) {
	worker, agent, child := startWorkerHelper(t)
	require.NoError(t, worker.Process.Signal(syscall.SIGKILL))
	_ = worker.Wait()
	require.Eventually(t, func() bool { return !processAlive(agent) && !processAlive(child) }, 30*time.Second, 20*time.Millisecond,
		"the agent (pid %d) or the child it left in its group (pid %d, which ignores SIGTERM) outlived its worker", agent, child)
}

// An agent that exits leaves nothing behind in its group.
func TestAnAgentsLeftoversDieWithIt(t *testing.T) {
	a := startTestAgent(t, "-spawn-child")
	resp := a.prompt(t, "/pids")
	require.Equal(t, "end_turn", string(resp.StopReason))
	var pids []int
	for _, x := range messageTexts(decodeUpdates(t, a.tap.snapshot())) {
		if rest, ok := strings.CutPrefix(x, "pids "); ok {
			for _, f := range strings.Fields(rest) {
				n, err := strconv.Atoi(f)
				require.NoError(t, err)
				pids = append(pids, n)
			}
		}
	}
	require.Len(t, pids, 2)
	killOnCleanup(t, pids...)
	require.True(t, processAlive(pids[1]))
	a.proc.stop(5 * time.Second)
	require.Eventually(t, func() bool { return !processAlive(pids[1]) }, 10*time.Second, 20*time.Millisecond,
		"the child the agent left in its group")
}

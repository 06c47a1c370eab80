package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/internal/dial"
	"github.com/tacp-dev/tacp/internal/proctree"
	"github.com/tacp-dev/tacp/internal/sandbox"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
	sessioncore "github.com/tacp-dev/tacp/workflows/session"
)

// The test binary doubles as a worker process, so a test can kill -9 a real worker without
// building (and linking the Temporal server into) another binary.
const workerProcessEnv = "TACP_E2E_WORKER_QUEUE"

func runWorkerProcess() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Connects as the worker binary does: TEMPORAL_* variables through envconfig (TLS too).
	c, err := dial.Client(ctx, "", "", logger) // stdout is for "ready"
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker process:", err)
		return 1
	}
	defer c.Close()
	opts := tacpworker.Options{
		TaskQueue: os.Getenv(workerProcessEnv),
		Agent:     os.Getenv("TACP_E2E_AGENT"),
		DataDir:   os.Getenv("TACP_E2E_DATA"),
		Logger:    logger,
		MCP:       activities.MCPPolicy{Mode: os.Getenv("TACP_E2E_MCP")},
		// Workspace roots on storage the workers share (as a multi-machine deployment must).
		WorkspaceRoots: splitNonEmpty(os.Getenv("TACP_E2E_WORKSPACES")),
	}
	opts.LimitMaxWait, _ = time.ParseDuration(os.Getenv("TACP_E2E_LIMIT_WAIT"))
	opts.AgentNice, _ = strconv.Atoi(os.Getenv("TACP_E2E_AGENT_NICE"))
	opts.MaxTurns, _ = strconv.Atoi(os.Getenv("TACP_E2E_MAX_TURNS"))
	opts.LimitBackoff, _ = time.ParseDuration(os.Getenv("TACP_E2E_LIMIT_BACKOFF"))
	if roots := os.Getenv("TACP_E2E_ROOTS"); roots != "" {
		opts.WorkspaceRoots = filepath.SplitList(roots)
	}
	// A whole profile (JSON) in place of TACP_E2E_AGENT, and the sandbox (sandbox_test.go).
	if js := os.Getenv("TACP_E2E_PROFILE"); js != "" {
		var p activities.Profile
		if err := json.Unmarshal([]byte(js), &p); err != nil {
			fmt.Fprintln(os.Stderr, "worker process: TACP_E2E_PROFILE:", err)
			return 1
		}
		opts.Agent, opts.Profiles = "", []activities.Profile{p}
	}
	opts.Sandbox = os.Getenv("TACP_E2E_SANDBOX")
	opts.CheckpointStore = os.Getenv("TACP_E2E_CHECKPOINT_STORE")
	opts.SandboxDenyPorts = []uint16{sandbox.PortOf(os.Getenv("TEMPORAL_ADDRESS"))}
	w, err := tacpworker.Start(c, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker process:", err)
		return 1
	}
	defer w.Stop()
	fmt.Println("ready", w.Host.Queue)
	<-ctx.Done()
	return 0
}

func splitNonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// startWorkerProcess runs a worker in a child process polling queue and waits until it
// polls.
func startWorkerProcess(t *testing.T, queue string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		workerProcessEnv+"="+queue,
		"TEMPORAL_ADDRESS="+srv.HostPort(),
		"TEMPORAL_NAMESPACE="+srv.Namespace(),
		"TACP_E2E_AGENT="+fmt.Sprintf("%s -transcripts %s", testagent, filepath.Join(dataDir, "transcripts")),
		"TACP_E2E_DATA="+dataDir,
	)
	cmd.Env = append(cmd.Env, env...) // later entries win
	startReady(t, cmd)
	return cmd
}

// startReady starts cmd, a child process of the test binary, killed when t ends, and
// returns what follows "ready" on the first line it prints once it is up.
func startReady(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		// The agents it started go with it, before t's temp dirs are removed: an agent that
		// outlives its worker by a moment (Codex writing its state on the way out) would
		// otherwise race the removal of its folders.
		agents := proctree.Descendants(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		for _, p := range agents {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		deadline := time.Now().Add(10 * time.Second)
		for len(alive(agents)) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "ready")
	require.True(t, ok, line)
	return strings.TrimSpace(rest)
}

func TestWorkerKilledMidTurnRestartsTheTurnOnAnotherWorker(t *testing.T) {
	t.Parallel()
	queue := "tacp-failover-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	first := startWorkerProcess(t, queue)

	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	ctx := ctxFor(t, 120*time.Second)
	_, err := qc.Prompt(ctx, cfg, signals.PromptRequest{Text: "/chunks 100 every 100ms", ClientMessageID: "turn-1"})
	require.NoError(t, err)
	// Let the first worker stream part of the turn, then kill it without warning.
	waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventAgentUpdate })
	before := waitRunning(t, id, 1)
	startWorkerProcess(t, queue)
	killed := time.Now()
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()

	// Acknowledged while the turn's worker is gone: must not be lost.
	res, err := qc.Prompt(ctx, cfg, signals.PromptRequest{Text: "after the crash", ClientMessageID: "turn-2"})
	require.NoError(t, err)
	require.Equal(t, int64(2), res.TurnID)

	evs := turnEnd(t, id, 2)
	restarted := restarts(t, evs)
	require.NotEmpty(t, restarted, "the lost attempt is superseded by turn.restarted")
	require.Equal(t, int32(2), restarted[0].Attempt)
	for _, ev := range evs {
		if ev.Kind == signals.EventTurnRestarted {
			// A figure, not an assertion (docs/operators.md, "When a worker counts as lost").
			t.Logf("kill -9 → turn.restarted on the other worker: %v (heartbeat timeout %v)",
				ev.At.Sub(killed).Round(10*time.Millisecond), sessioncore.TurnHeartbeat)
			break
		}
	}
	var ends []string
	for _, ev := range evs {
		if signals.IsTerminal(ev.Kind) {
			var d map[string]any
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			ends = append(ends, fmt.Sprintf("%s %v", ev.Kind, d["stop_reason"]))
		}
	}
	require.Equal(t, []string{"turn.ended end_turn", "turn.ended end_turn"}, ends)
	require.Equal(t, "after the crash", strings.Join(agentTexts(t, evs, 2), ""))
	// The second worker loaded (session/load) the agent session of the first.
	st, err := qc.Status(ctx, id)
	require.NoError(t, err)
	require.Equal(t, before.AgentSessionID, st.AgentSessionID)
	checkInvariants(t, allEvents(t, id))
}

// A session that continued as new mid-turn left the turn's attempt with its host for the
// next run to adopt (contract §6, adoption); the host dies after that: the adopter's
// heartbeats stop, and the turn restarts on another worker, which loads the agent session
// and ends the turn.
func TestAnAdoptedTurnWhoseHostIsKilledRestartsOnAnotherWorker(t *testing.T) {
	t.Parallel()
	queue := "tacp-adopt-failover-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	first := startWorkerProcess(t, queue)

	id := session(t)
	cfg := signals.SessionConfig{SessionID: id, MaxRunEvents: 60}
	ctx := ctxFor(t, 120*time.Second)
	_, err := qc.Prompt(ctx, cfg, signals.PromptRequest{Text: "/chunks 200 every 50ms", ClientMessageID: "turn-1"})
	require.NoError(t, err)
	// The turn streams across continue-as-new: the run that runs it now adopted it.
	require.Eventually(t, func() bool {
		st, err := qc.Status(ctx, id)
		return err == nil && st.Run >= 2 && st.State == signals.StateRunning
	}, 60*time.Second, 20*time.Millisecond, "the session continued as new mid-turn")
	startWorkerProcess(t, queue)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()

	evs := turnEnd(t, id, 1)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind)
	require.Equal(t, "end_turn", data["stop_reason"])
	restarted := restarts(t, evs)
	require.NotEmpty(t, restarted, "the lost attempt is superseded by turn.restarted")
	require.Equal(t, int32(2), restarted[0].Attempt, "numbered after the adopted attempt")
	checkInvariants(t, allEvents(t, id))
}

// restarts is the data of the turn.restarted events in evs, in order.
func restarts(t *testing.T, evs []signals.Event) []signals.TurnStartedData {
	t.Helper()
	var out []signals.TurnStartedData
	for _, ev := range evs {
		if ev.Kind == signals.EventTurnRestarted {
			var d signals.TurnStartedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			out = append(out, d)
		}
	}
	return out
}

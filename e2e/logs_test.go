package e2e

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

// lockedBuffer is a bytes.Buffer safe for the logger's concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// records are the JSON log lines written so far.
func (l *lockedBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &r), "a log line that is not JSON: %s", line)
		out = append(out, r)
	}
	return out
}

// has reports whether some record satisfies match.
func (l *lockedBuffer) has(t *testing.T, match func(map[string]any) bool) bool {
	return slices.ContainsFunc(l.records(t), match)
}

// The test proves the logger is wired before it proves what the logs lack: a logger that
// is never called would keep every secret too. The agent writes a probe line to its
// stderr, which the worker logs at debug level, and a cancelled turn makes the turn
// runner log the cancel, with the session's id.
func TestWorkerLogsNeverContainPromptTextOrToolArguments(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	probe := "tacp-log-probe-" + signals.NewID()
	agent := `sh -c 'echo ` + probe + ` >&2; exec "$0" "$@"' ` + testAgentCmd("-steering")
	_, qc := extraWorker(t, tc, tacpworker.Options{Logger: logger, Agent: agent})
	ctx := ctxFor(t, 60*time.Second)
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id, Policy: signals.PolicyAskAlways}
	_, err := qc.Prompt(ctx, cfg, signals.PromptRequest{Text: "/echo\nSECRET-PROMPT-TEXT"})
	require.NoError(t, err)
	turnEnd(t, id, 1)
	_, err = qc.Prompt(ctx, cfg, signals.PromptRequest{Text: "/permission edit"})
	require.NoError(t, err)
	req := permissionRequestedIn(t, id, 2)
	_, err = qc.PermissionRespond(ctx, id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: "reject"})
	require.NoError(t, err)
	turnEnd(t, id, 2)
	_, err = qc.Prompt(ctx, cfg, signals.PromptRequest{Text: "/sleep 30s"})
	require.NoError(t, err)
	waitRunning(t, id, 3)
	_, err = qc.Cancel(ctx, id, signals.CancelRequest{})
	require.NoError(t, err)
	turnEnd(t, id, 3)

	// The logger is wired: the agent's stderr reached it, and the runner's line about the
	// cancel of this session's turn.
	require.Eventually(t, func() bool {
		return logs.has(t, func(r map[string]any) bool {
			line, _ := r["line"].(string)
			return r["msg"] == "agent stderr" && strings.Contains(line, probe)
		})
	}, 30*time.Second, 10*time.Millisecond, "the agent's stderr never reached the worker's logger:\n%s", logs.String())
	require.True(t, logs.has(t, func(r map[string]any) bool {
		msg, _ := r["msg"].(string)
		return strings.HasPrefix(msg, "cancelling turn") && r["session"] == id && r["turn"] == float64(3)
	}), "the runner never logged the cancel of %s turn 3:\n%s", id, logs.String())
	// Everything the worker logged, the agent's stderr included (at debug level).
	for _, secret := range []string{"SECRET-PROMPT-TEXT", "README.md"} {
		require.NotContains(t, logs.String(), secret)
	}
}

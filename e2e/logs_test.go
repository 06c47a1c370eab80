package e2e

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/internal/tacpworker"
	"github.com/tacp-dev/tacp/signals"
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

func TestWorkerLogsNeverContainPromptTextOrToolArguments(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	_, qc := extraWorker(t, tc, tacpworker.Options{Logger: logger, Agent: testAgentCmd("-steering")})
	ctx := ctxFor(t, 60*time.Second)
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id, Policy: "ask_always"}
	_, err := qc.Prompt(ctx, cfg, signals.PromptRequest{Text: "/echo\nSECRET-PROMPT-TEXT"})
	require.NoError(t, err)
	turnEnd(t, id, 1)
	_, err = qc.Prompt(ctx, cfg, signals.PromptRequest{Text: "/permission edit"})
	require.NoError(t, err)
	req := permissionRequestedIn(t, id, 2)
	_, err = qc.PermissionRespond(ctx, id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: "reject"})
	require.NoError(t, err)
	turnEnd(t, id, 2)
	// Everything the worker logged, the agent's stderr included (at debug level).
	for _, secret := range []string{"SECRET-PROMPT-TEXT", "README.md"} {
		require.NotContains(t, logs.String(), secret)
	}
}

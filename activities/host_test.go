package activities

// Tests of the host's agent lifecycle with the real testagent binary: a worker shutting
// down (Host.Close) while a turn still holds its agent.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// newTestHost is a host whose between-turn batches go nowhere (no Temporal client is needed
// while no agent speaks between turns).
func newTestHost(t *testing.T) *Host {
	t.Helper()
	logger, _ := testLogger(t)
	h := &Host{Queue: "test-host", Logger: logger}
	h.init()
	return h
}

func acquireTestAgent(t *testing.T, h *Host, sessionID string, flags ...string) *hostedAgent {
	t.Helper()
	dir := t.TempDir()
	sandbox, err := NewSandbox(dir)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	argv := append([]string{testagentBin, "-transcripts", t.TempDir()}, flags...)
	a, err := h.acquire(ctx, sessionID, argv, nil, dir, sandbox, false)
	require.NoError(t, err)
	return a
}

// A worker told to stop (SIGTERM) closes its host while a turn still runs; the turn then
// releases the agent Close already stopped. Both shut the same agent down: the second must
// be harmless (it closed the between-turn batcher's channel twice and panicked).
func TestHostCloseWhileATurnHoldsTheAgentThenRelease(t *testing.T) {
	h := newTestHost(t)
	a := acquireTestAgent(t, h, "s1")
	h.Close()
	require.False(t, a.proc.alive(), "Close stops every agent, busy ones included")
	require.NotPanics(t, func() {
		h.release(a, true)
		a.shutdown(time.Second) // what release's goroutine does, here in the test's
	})
}

// No orphans: ReleaseAgent, sent by a turn that ran on another host, stops the session's
// idle agent here; a busy agent, or a release naming this host as the new one, keeps it.
func TestReleaseAgentStopsTheIdleAgentOfASessionThatMoved(t *testing.T) {
	h := newTestHost(t)
	t.Cleanup(h.Close)
	ctx := context.Background()
	a := acquireTestAgent(t, h, "s1")
	pid := h.AgentPID("s1")
	require.NotZero(t, pid)

	require.NoError(t, h.ReleaseAgent(ctx, signals.ReleaseAgentRequest{SessionID: "s1", NewHost: "other-host"}))
	require.Equal(t, pid, h.AgentPID("s1"), "a busy agent is left to its turn")

	h.release(a, true)
	require.NoError(t, h.ReleaseAgent(ctx, signals.ReleaseAgentRequest{SessionID: "s1", NewHost: h.Queue}))
	require.Equal(t, pid, h.AgentPID("s1"), "the session did not leave this host")
	require.NoError(t, h.ReleaseAgent(ctx, signals.ReleaseAgentRequest{SessionID: "unknown", NewHost: "other-host"}))

	require.NoError(t, h.ReleaseAgent(ctx, signals.ReleaseAgentRequest{SessionID: "s1", NewHost: "other-host"}))
	require.Zero(t, h.AgentPID("s1"))
	require.Eventually(t, func() bool { return !a.proc.alive() }, 10*time.Second, 20*time.Millisecond, "the agent process is stopped")
}

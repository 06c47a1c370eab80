package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

// starter runs the real CLI binary against the test server and returns its stdout, stderr
// and exit code.
func starter(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	out, errOut, code, err := runStarter(ctxFor(t, 60*time.Second), args...)
	require.NoError(t, err)
	return out, errOut, code
}

// runStarter is starter without the test's assertions, for use from other goroutines.
func runStarter(ctx context.Context, args ...string) (string, string, int, error) {
	cmd := starterCmd(ctx, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), errb.String(), ee.ExitCode(), nil
	}
	return out.String(), errb.String(), 0, err
}

func TestCLIPromptStreamsTheReplyAndExitsWithTheStopReason(t *testing.T) {
	t.Parallel()
	id := session(t)
	out, errOut, code := starter(t, "prompt", "--session", id, "hello from the CLI")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "hello from the CLI")
	require.Contains(t, errOut, "turn 1")

	out, _, code = starter(t, "status", "--session", id, "--json")
	require.Equal(t, 0, code)
	var st signals.Status
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, signals.StateIdle, st.State)

	out, _, code = starter(t, "tail", "--session", id, "--json")
	require.Equal(t, 0, code)
	var kinds []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var ev signals.Event
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev))
		kinds = append(kinds, ev.Kind)
	}
	require.Equal(t, "session.started", kinds[0])
	require.Equal(t, "turn.ended", kinds[len(kinds)-1])

	out, _, code = starter(t, "replay", "--session", id)
	require.Equal(t, 0, code)
	require.Contains(t, out, "> hello from the CLI")
	require.Contains(t, out, "[turn 1 ended: end_turn]")

	out, _, code = starter(t, "list", "--json")
	require.Equal(t, 0, code)
	require.Contains(t, out, id)
}

func TestCLISteerCancelAndRejectionExitCodes(t *testing.T) {
	t.Parallel()
	id := session(t)
	// The steering agent takes the steer inside the turn, which then still runs to be cancelled.
	_, errOut, code := starter(t, "prompt", "--session", id, "--agent", steeringAgent(), "--no-wait", "/sleep 60s")
	require.Equal(t, 0, code, errOut)
	waitRunning(t, id, 1)

	out, errOut, code := starter(t, "steer", "--session", id, "--expect", "0", "--json", "go left")
	require.Equal(t, 2, code, errOut)
	require.JSONEq(t, `{"rejected":"stale_turn","message":"expected turn 0, the live turn is 1","details":{"expected":"0","actual":"1"}}`, out)

	out, errOut, code = starter(t, "steer", "--session", id, "go left", "--as", "cli:bob")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "accepted: turn 1 steer 1; next token 1.1\n", out)

	// A second client follows the turn while this one cancels it.
	done := make(chan int, 1)
	go func() {
		_, _, code, err := runStarter(ctxFor(t, 60*time.Second), "prompt", "--session", id, "--no-wait", "after")
		if err != nil {
			code = -1
		}
		done <- code
	}()
	_, errOut, code = starter(t, "cancel", "--session", id, "--as", strings.Repeat("x", signals.MaxByBytes+1))
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "by: at most 200 bytes")
	out, _, code = starter(t, "cancel", "--session", id)
	require.Equal(t, 0, code)
	require.Equal(t, "cancelling\n", out)
	require.Equal(t, 0, <-done)
	evs := turnEnd(t, id, 2)
	// Who steered and who cancelled: --as, else the CLI's own identity.
	for kind, want := range map[string]string{signals.EventSteerAccepted: "cli:bob", signals.EventTurnCancelling: "cli:"} {
		got := eventsOf(evs, kind, 1)
		require.Len(t, got, 1, kind)
		var d struct{ By string }
		require.NoError(t, json.Unmarshal(got[0].Data, &d))
		require.True(t, strings.HasPrefix(d.By, want), "%s by %q, want %q…", kind, d.By, want)
	}
	// Nobody follows a prompt sent with --no-wait: its turn runs unwatched.
	for _, turn := range []int64{1, 2} {
		started := eventsOf(evs, signals.EventTurnStarted, turn)
		require.Len(t, started, 1)
		var d signals.TurnStartedData
		require.NoError(t, json.Unmarshal(started[0].Data, &d))
		require.True(t, d.Unwatched, "turn %d, prompted with --no-wait, is unwatched", turn)
	}

	_, errOut, code = starter(t, "status", "--session", "no-such-"+id)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "unknown_session")
	_, errOut, code = starter(t, "prompt", "--session", "bad/id", "x")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "invalid session id")
}

func TestCLISetupRegistersSearchAttributesIdempotently(t *testing.T) {
	t.Parallel()
	out, errOut, code := starter(t, "setup")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "already registered", "the dev server registered them at start")
}

// starterCmd is the starter binary pointed at the test server.
func starterCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, starterBin, args...)
	cmd.Env = append(cmd.Environ(), "TEMPORAL_ADDRESS="+srv.HostPort(), "TEMPORAL_NAMESPACE="+srv.Namespace())
	return cmd
}

func TestCLIBadConnectionSettingsFailClearly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"namespace that does not exist", []string{"TEMPORAL_NAMESPACE=no-such-namespace"}, "no-such-namespace"},
		{"unreachable cluster", []string{"TEMPORAL_ADDRESS=127.0.0.1:1"}, "127.0.0.1:1"},
		{"malformed encryption key", []string{"TACP_CODEC_KEYS=k1:short"}, "TACP_CODEC_KEYS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := starterCmd(ctxFor(t, 60*time.Second), "status", "--session", "s1")
			cmd.Env = append(cmd.Env, tc.env...)
			var errb bytes.Buffer
			cmd.Stderr = &errb
			err := cmd.Run()
			require.Error(t, err)
			require.Contains(t, errb.String(), tc.want)
			require.NotContains(t, errb.String(), "short", "no key material in errors")
		})
	}
}

// TestCLIStatusCountsTheSessionsActionsFromItsHistory: `starter status --actions` counts
// the billable actions of every run a session continued through, from their histories.
func TestCLIStatusCountsTheSessionsActionsFromItsHistory(t *testing.T) {
	t.Parallel()
	id := session(t)
	// A tiny run budget makes the session continue as new while its turn streams.
	const budget = 80
	prompt(t, signals.SessionConfig{SessionID: id, MaxRunEvents: budget}, "/chunks 150 every 10ms")
	turnEnd(t, id, 1)
	// At idle a session continues as new while its run holds budget/8 events or more
	// (workflows/session/core_next.go), so its count of runs settles once an idle run holds
	// fewer; each count below reads the same runs.
	var st signals.Status
	require.Eventually(t, func() bool {
		s, err := sc.Status(ctxFor(t, 10*time.Second), id)
		st = s
		return err == nil && s.State == signals.StateIdle && s.HistoryLength < budget/8
	}, time.Minute, 100*time.Millisecond, "the session settles at idle")
	require.Greater(t, st.Run, 1, "the session continued as new")

	out, errOut, code := starter(t, "status", "--session", id, "--actions", "--json")
	require.Equal(t, 0, code, errOut)
	var a tacpclient.Actions
	require.NoError(t, json.Unmarshal([]byte(out), &a))
	require.Equal(t, id, a.SessionID)
	require.Equal(t, st.Run, a.Runs, "every run is read")
	require.EqualValues(t, st.Run, a.Starts, "each run is a workflow start")
	require.False(t, a.EarlierRunsGone)
	require.Positive(t, a.SignalsByName[signals.SignalTurnEvents], "the turn's events came as signals")
	var byName int64
	for _, n := range a.SignalNames() {
		byName += a.SignalsByName[n]
	}
	require.Equal(t, a.Signals, byName)
	require.Positive(t, a.Updates, "the prompt is an update")
	require.Positive(t, a.Activities, "the turn is an activity")
	require.Equal(t, a.Starts+a.Signals+a.Updates+a.Timers+a.Activities+a.Other, a.Total)
	require.Greater(t, a.HistoryEvents, int64(st.HistoryLength), "the earlier runs' events are counted too")

	out, errOut, code = starter(t, "status", "--actions", "--session", id)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, fmt.Sprintf("actions       %d\n", a.Total))
	require.Contains(t, out, "not counted: queries and activity heartbeats")
	require.Contains(t, out, fmt.Sprintf("cost          $%.6f at $50 per million actions", float64(a.Total)*50/1e6), "the list price by default")
	out, errOut, code = starter(t, "status", "--actions", "--session", id, "--price", "25", "--json")
	require.Equal(t, 0, code, errOut)
	var priced struct {
		Total int64   `json:"total"`
		Price float64 `json:"price_per_million"`
		Cost  float64 `json:"cost"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &priced))
	require.Equal(t, 25.0, priced.Price)
	require.InDelta(t, float64(priced.Total)*25/1e6, priced.Cost, 1e-12)
	_, errOut, code = starter(t, "status", "--actions", "--session", id, "--price", "-1")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "negative")

	_, errOut, code = starter(t, "status", "--actions", "--session", "no-such-"+id)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "unknown_session")
}

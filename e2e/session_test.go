package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
)

func TestPromptStreamsChunksAndEndsTheTurn(t *testing.T) {
	t.Parallel()
	id := session(t)
	res := prompt(t, signals.SessionConfig{SessionID: id}, "/chunks 20 every 5ms")
	require.Equal(t, signals.PromptResult{TurnID: 1, Position: 0}, res)
	evs := turnEnd(t, id, 1)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind)
	require.Equal(t, "end_turn", data["stop_reason"])
	var want []string
	for i := 1; i <= 20; i++ {
		want = append(want, fmt.Sprintf("chunk %d\n", i))
	}
	require.Equal(t, want, agentTexts(t, evs, 1), "every chunk journaled once, in order")
	checkInvariants(t, allEvents(t, id))
}

func TestEchoRepliesWithThePromptText(t *testing.T) {
	t.Parallel()
	id := session(t)
	prompt(t, signals.SessionConfig{SessionID: id}, "hello durable world")
	evs := turnEnd(t, id, 1)
	require.Equal(t, "hello durable world", strings.Join(agentTexts(t, evs, 1), ""))
}

func TestDuplicatePromptStartsNothing(t *testing.T) {
	t.Parallel()
	id := session(t)
	ctx := ctxFor(t, 30*time.Second)
	cfg := signals.SessionConfig{SessionID: id}
	req := signals.PromptRequest{Text: "/chunks 2", ClientMessageID: "same-id"}
	first, err := sc.Prompt(ctx, cfg, req)
	require.NoError(t, err)
	turnEnd(t, id, 1)
	again, err := sc.Prompt(ctx, cfg, req)
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, first.TurnID, again.TurnID)
	st, err := sc.Status(ctx, id)
	require.NoError(t, err)
	require.Equal(t, signals.StateIdle, st.State)
	accepted := 0
	for _, ev := range allEvents(t, id) {
		if ev.Kind == signals.EventPromptAccepted {
			accepted++
		}
	}
	require.Equal(t, 1, accepted)
}

func TestQueueFullIsRejectedWithoutHistory(t *testing.T) {
	t.Parallel()
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id, QueueLimit: 1}
	prompt(t, cfg, "/sleep 60s")
	waitRunning(t, id, 1)
	require.Equal(t, signals.PromptResult{TurnID: 2, Position: 1}, prompt(t, cfg, "queued"))
	before := withoutAgentUpdates(allEvents(t, id))
	_, err := sc.Prompt(ctxFor(t, 10*time.Second), cfg, signals.PromptRequest{Text: "one too many", ClientMessageID: signals.NewID()})
	rej, ok := rejection.As(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, signals.RejectQueueFull, rej.Type)
	require.Equal(t, before, withoutAgentUpdates(allEvents(t, id)), "a rejected update writes nothing")
	require.Zero(t, updatesInHistory(t, id, "one too many"), "nor any history")
	require.Equal(t, 1, updatesInHistory(t, id, "queued"), "an accepted update is in the history")
	_, err = sc.Close(ctxFor(t, 10*time.Second), id, signals.CloseRequest{Reason: "done"})
	require.NoError(t, err)
}

func TestSteerWhileIdleIsNoLiveTurn(t *testing.T) {
	t.Parallel()
	id := session(t)
	prompt(t, signals.SessionConfig{SessionID: id}, "/chunks 1")
	turnEnd(t, id, 1)
	_, err := sc.Steer(ctxFor(t, 10*time.Second), id, signals.SteerRequest{Text: "go left", ExpectedTurnID: "1"})
	rej, ok := rejection.As(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, signals.RejectNoLiveTurn, rej.Type)
}

func TestCancelDuringSleepEndsCancelled(t *testing.T) {
	t.Parallel()
	id := session(t)
	ctx := ctxFor(t, 60*time.Second)
	prompt(t, signals.SessionConfig{SessionID: id}, "/sleep 60s")
	waitRunning(t, id, 1)
	res, err := sc.Cancel(ctx, id, signals.CancelRequest{TurnID: 1})
	require.NoError(t, err)
	require.Equal(t, signals.CancelCancelling, res.Outcome)
	res, err = sc.Cancel(ctx, id, signals.CancelRequest{})
	require.NoError(t, err)
	require.Equal(t, signals.CancelAlreadyCancelling, res.Outcome)

	evs := turnEnd(t, id, 1)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind)
	require.Equal(t, "cancelled", data["stop_reason"])

	// The session takes the next prompt; the agent session is loaded, not lost.
	prompt(t, signals.SessionConfig{SessionID: id}, "after the cancel")
	evs = turnEnd(t, id, 2)
	require.Equal(t, "after the cancel", strings.Join(agentTexts(t, evs, 2), ""))
	checkInvariants(t, allEvents(t, id))
}

func TestAgentErrorIsTurnFailed(t *testing.T) {
	t.Parallel()
	id := session(t)
	prompt(t, signals.SessionConfig{SessionID: id}, "/fail")
	evs := turnEnd(t, id, 1)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnFailed, kind)
	require.Contains(t, data["error"], "scripted failure")
	// The session is not stuck: the next prompt runs.
	prompt(t, signals.SessionConfig{SessionID: id}, "/chunks 1")
	turnEnd(t, id, 2)
	checkInvariants(t, allEvents(t, id))
}

func TestQueuedPromptsRunInOrder(t *testing.T) {
	t.Parallel()
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	for i := 1; i <= 3; i++ {
		res := prompt(t, cfg, fmt.Sprintf("/chunks %d", i))
		require.Equal(t, int64(i), res.TurnID)
	}
	evs := turnEnd(t, id, 3)
	for i := int64(1); i <= 3; i++ {
		require.Len(t, agentTexts(t, evs, i), int(i))
	}
	checkInvariants(t, allEvents(t, id))
}

func TestContinueAsNewDuringOneLongStreamingTurnLosesNothing(t *testing.T) {
	t.Parallel()
	id := session(t)
	const n = 400
	// A tiny run budget forces several continue-as-new while the turn streams.
	cfg := signals.SessionConfig{SessionID: id, MaxRunEvents: 80}
	prompt(t, cfg, fmt.Sprintf("/chunks %d every 10ms", n))
	evs := turnEnd(t, id, 1)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind)
	require.Equal(t, "end_turn", data["stop_reason"])
	var want []string
	for i := 1; i <= n; i++ {
		want = append(want, fmt.Sprintf("chunk %d\n", i))
	}
	require.Equal(t, want, agentTexts(t, evs, 1), "no chunk lost or duplicated across runs")
	st, err := sc.Status(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	require.Greater(t, st.Run, 2, "the session continued as new several times")
	checkInvariants(t, allEvents(t, id))
	t.Logf("%d chunks in %d runs", n, st.Run)
}

func TestBadInputIsRejectedClearly(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t, 30*time.Second)
	id := session(t)
	check := func(err error, typ string) {
		t.Helper()
		rej, ok := rejection.As(err)
		require.True(t, ok, "want %s, got %v", typ, err)
		require.Equal(t, typ, rej.Type)
		require.NotEmpty(t, rej.Message)
	}
	_, err := sc.Prompt(ctx, signals.SessionConfig{SessionID: "no/slashes"}, signals.PromptRequest{Text: "x"})
	check(err, signals.RejectInvalidRequest)
	_, err = sc.Status(ctx, "never-started-"+id)
	check(err, signals.RejectUnknownSession)
	_, err = sc.Steer(ctx, "never-started-"+id, signals.SteerRequest{Text: "x", ExpectedTurnID: "1"})
	check(err, signals.RejectUnknownSession)

	prompt(t, signals.SessionConfig{SessionID: id}, "/chunks 1")
	turnEnd(t, id, 1)
	before := allEvents(t, id)
	_, err = sc.Prompt(ctx, signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: " \n\t "})
	check(err, signals.RejectInvalidRequest)
	_, err = sc.Prompt(ctx, signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: strings.Repeat("x", signals.MaxTextBytes+1)})
	check(err, signals.RejectInvalidRequest)
	_, err = sc.Steer(ctx, id, signals.SteerRequest{Text: "x"})
	check(err, signals.RejectInvalidRequest)
	require.Len(t, allEvents(t, id), len(before), "rejections write nothing")

	_, err = sc.Close(ctx, id, signals.CloseRequest{})
	require.NoError(t, err)
	waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventSessionClosed })
	_, err = sc.Prompt(ctx, signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "too late"})
	check(err, signals.RejectSessionClosed)
}

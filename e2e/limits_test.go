package e2e

// Limits (contract §11, issue 27): a real agent whose model answers 429 ends its turn with a
// typed failure (claude-agent-acp's and codex-acp's AIR sessionFailure, category limit,
// action retry); the session journals turn.limited, shows the wait in status, the Temporal
// UI's Current Details and TacpWaitingUntil, waits on the session's durable timer, and
// runs the same prompt again as the turn's next attempt, which ends end_turn: nobody types
// the prompt again. The worker that ran the limited attempt is killed during the wait; the
// next attempt runs on another. A person may end the wait early (retry_now).

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"

	"github.com/tacp-dev/tacp/internal/proctree"
	"github.com/tacp-dev/tacp/internal/testkit/fakemodel"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

// limitAgents are the agents whose typed failures say a turn was limited. codex-acp 2.6.0
// gives them too, but asked for them it no longer reports a session's first turn's usage, so
// its well-known profile does not ask (Profile.TypedFailures) and its limited turns fail.
var limitAgents = []fakemodel.Agent{fakemodel.Claude}

// currentDetails is the Temporal UI's Current Details of session id.
func currentDetails(t *testing.T, id string) string {
	t.Helper()
	v, err := tc.QueryWorkflow(ctxFor(t, time.Minute), signals.SessionWorkflowID(id), "", "__temporal_workflow_metadata")
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	return md.GetCurrentDetails()
}

// limitedData waits for turn's turn.limited and returns it.
func limitedData(t *testing.T, id string, turn int64) signals.TurnLimitedData {
	t.Helper()
	evs := waitFor(t, id, func(ev signals.Event) bool {
		return ev.TurnID == turn && (ev.Kind == signals.EventTurnLimited || signals.IsTerminal(ev.Kind))
	})
	last := evs[len(evs)-1]
	require.Equal(t, signals.EventTurnLimited, last.Kind, "turn %d was limited, not ended: %s", turn, last.Data)
	var d signals.TurnLimitedData
	require.NoError(t, json.Unmarshal(last.Data, &d))
	return d
}

func TestRealAgentLimitedTurnWaitsOnATimerAndRunsAgain(t *testing.T) {
	for _, a := range limitAgents {
		t.Run(a.Name, func(t *testing.T) {
			w := startRealAgentWorker(t, a) // its fake model and HOME; the workers are processes
			t.Run("WorkerKilledDuringTheWaitTheTimerRunsItOnAnother", func(t *testing.T) { limitKilledDuringWait(t, w) })
			t.Run("RetryNowEndsTheWait", func(t *testing.T) { limitRetryNow(t, w) })
		})
	}
}

// limitWorker starts a worker process of w's agent on queue that waits out limits, backing
// off backoff.
func (w *realAgentWorker) limitWorker(t *testing.T, queue, backoff string) int {
	cmd := startWorkerProcess(t, queue, "TACP_E2E_AGENT="+w.cmdline, "TACP_E2E_DATA="+w.dataDir,
		"TACP_E2E_LIMIT_WAIT=30m", "TACP_E2E_LIMIT_BACKOFF="+backoff)
	return cmd.Process.Pid
}

func limitKilledDuringWait(t *testing.T, w *realAgentWorker) {
	queue := "tacp-limits-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	first := w.limitWorker(t, queue, "30s")
	id := session(t)
	before := len(w.fm.MainRequests())
	_, err := qc.Prompt(ctxFor(t, time.Minute), signals.SessionConfig{SessionID: id}, signals.PromptRequest{
		Text: "reply: the limit is over\nlimited: 30 killed", ClientMessageID: "turn-1",
	})
	require.NoError(t, err)

	lim := limitedData(t, id, 1)
	// The worker that ran the limited attempt dies during the wait; another takes the turn.
	agents := proctree.Descendants(first)
	w.limitWorker(t, queue, "30s")
	require.NoError(t, syscall.Kill(first, syscall.SIGKILL))
	t.Cleanup(func() {
		for _, p := range alive(agents) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	require.Equal(t, signals.LimitRateLimited, lim.Reason, "the agent's typed failure: category limit, action retry")
	require.False(t, lim.Backoff, "the provider's words in the failure's title give the wait: retry after 30s")
	require.Contains(t, lim.Message, "retry after 30s")
	// The first query after the kill waits for the dead worker's sticky queue to time out,
	// or is cut short by the server: asked again until the session answers.
	var st signals.Status
	require.Eventually(t, func() bool {
		var err error
		st, err = qc.Status(ctxFor(t, time.Minute), id)
		return err == nil
	}, 2*time.Minute, 200*time.Millisecond, "the session answers a query after its worker's kill")
	require.Equal(t, signals.StateWaitingLimit, st.State)
	require.NotNil(t, st.WaitingLimit)
	require.True(t, st.WaitingLimit.RetryAt.Equal(lim.RetryAt))
	require.Nil(t, st.TurnDeadline, "the wait is not working time: the turn's clock is paused")
	details := currentDetails(t, id)
	require.Contains(t, details, "waiting for the usage limit to reset at "+lim.RetryAt.UTC().Format("2006-01-02 15:04:05 UTC"))
	require.Contains(t, details, "starter retry --session "+id)
	require.Eventually(t, func() bool { // visibility follows the upsert
		infos, err := qc.ListWhere(ctxFor(t, 10*time.Second), "WorkflowId = '"+signals.SessionWorkflowID(id)+"' AND "+signals.SearchAttrWaitingUntil+" IS NOT NULL", 10)
		return err == nil && len(infos) == 1
	}, time.Minute, 100*time.Millisecond, "the session is found by TacpWaitingUntil")
	require.True(t, time.Now().Before(lim.RetryAt), "all of this happened during the wait")

	evs := turnEndAcrossFailover(t, id, 1)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind, "%v", data)
	require.Equal(t, "end_turn", data["stop_reason"])
	require.Contains(t, strings.Join(agentTexts(t, evs, 1), ""), "limit is over")
	var cause string
	for _, ev := range evs {
		if ev.Kind == signals.EventTurnRestarted && ev.TurnID == 1 {
			var d signals.TurnStartedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			cause = d.Cause
		}
	}
	require.Contains(t, cause, "was limited (rate_limited); its wait ended at", "the next attempt says why it ran: %s", journalDump(evs))
	main := w.fm.MainRequests()[before:]
	prompted := 0
	for _, r := range main {
		if r.Contains("user", "limited: 30 killed") {
			prompted++
		}
	}
	require.GreaterOrEqual(t, prompted, 2, "the same prompt went to the model again, nobody retyped it")
	require.Equal(t, 1, countKindIn(evs, signals.EventTurnLimited, 1))
	checkInvariants(t, allEvents(t, id))
	st, err = qc.Status(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	require.Nil(t, st.WaitingLimit)
}

func limitRetryNow(t *testing.T, w *realAgentWorker) {
	queue := "tacp-limits-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	w.limitWorker(t, queue, "10m")
	id := session(t)
	// A usage limit whose message says when it resets, two minutes (and a bit) ahead.
	asked := time.Now()
	_, err := qc.Prompt(ctxFor(t, time.Minute), signals.SessionConfig{SessionID: id}, signals.PromptRequest{
		Text: "reply: retried now\nusage-limited: 120 retry-now", ClientMessageID: "turn-1",
	})
	require.NoError(t, err)
	lim := limitedData(t, id, 1)
	require.Contains(t, lim.Message, "resets ")
	require.False(t, lim.Backoff, "the reset time is the message's, not the worker's 10m backoff")
	require.Zero(t, lim.RetryAt.Second(), "a time of day to the minute: %v", lim.RetryAt)
	require.True(t, lim.RetryAt.After(asked.Add(2*time.Minute)) && lim.RetryAt.Before(asked.Add(4*time.Minute)), "%v", lim.RetryAt)
	st, err := qc.Status(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	require.True(t, st.WaitingLimit.RetryAt.Equal(lim.RetryAt), "status shows the reset time")
	require.Contains(t, currentDetails(t, id), "waiting for the usage limit to reset at "+lim.RetryAt.UTC().Format("2006-01-02 15:04:05 UTC"))

	_, err = qc.RetryNow(ctxFor(t, 10*time.Second), id, signals.RetryNowRequest{TurnID: 2})
	require.Error(t, err, "no turn 2 waits")
	_, err = qc.RetryNow(ctxFor(t, 10*time.Second), id, signals.RetryNowRequest{AnsweredBy: "alice"})
	require.NoError(t, err)
	evs := endedWith(t, id, 1, "end_turn")
	require.Contains(t, strings.Join(agentTexts(t, evs, 1), ""), "retried now")
	require.Equal(t, 1, countKindIn(evs, signals.EventTurnRetryNow, 1))
	for _, ev := range evs {
		if ev.Kind == signals.EventTurnRestarted {
			require.Contains(t, string(ev.Data), "a retry now by alice ended its wait")
		}
	}
	_, err = qc.RetryNow(ctxFor(t, 10*time.Second), id, signals.RetryNowRequest{})
	require.Error(t, err, "nothing waits any more")
}

// journalDump is evs without agent updates, one line each, for a failure's message.
func journalDump(evs []signals.Event) string {
	var b strings.Builder
	for _, ev := range withoutAgentUpdates(evs) {
		b.WriteString("\n" + ev.Kind + " " + string(ev.Data))
	}
	return b.String()
}

package e2e

// Questions to a person (contract §11, issue 27): Claude Code's AskUserQuestion, scripted as
// the fake model's tool call, reaches tacp as ACP elicitation/create (claude-agent-acp offers
// the tool only because tacp advertises form elicitation), is journaled and shown as a
// request waiting for a person, refuses an answer that does not fit its form (and stays
// open), takes the first valid answer with who gave it, and the answer reaches the model's
// next request. A question nobody answers fails closed at its deadline (cancel).

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/deck"
	"github.com/tacp-dev/tacp/internal/proctree"
	"github.com/tacp-dev/tacp/internal/testkit/fakemodel"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

// elicited waits for turn's elicitation.requested and returns it.
func elicited(t *testing.T, id string, turn int64) signals.ElicitationRequestedData {
	t.Helper()
	evs := waitFor(t, id, func(ev signals.Event) bool {
		return ev.TurnID == turn && (ev.Kind == signals.EventElicitationRequested || signals.IsTerminal(ev.Kind))
	})
	last := evs[len(evs)-1]
	require.Equal(t, signals.EventElicitationRequested, last.Kind, "turn %d asked nothing: %s", turn, journalDump(evs))
	var d signals.ElicitationRequestedData
	require.NoError(t, json.Unmarshal(last.Data, &d))
	return d
}

func TestRealAgentClaudeAsksAPersonAndTheAnswerReachesTheModel(t *testing.T) {
	w := startRealAgentWorker(t, fakemodel.Claude)
	t.Run("AnsweredOnceWithWhoAnswered", func(t *testing.T) {
		id := session(t)
		turn := w.prompt(t, signals.SessionConfig{SessionID: id}, "tool: ask Which approach? | left | right")
		q := elicited(t, id, turn)
		require.Equal(t, signals.ElicitationForm, q.Mode)
		require.Equal(t, "Which approach?", q.Message)
		require.Contains(t, signals.ElicitationChoices(q.Schema, "question_0"), "right")

		st, err := w.sc.Status(ctxFor(t, 10*time.Second), id)
		require.NoError(t, err)
		require.Equal(t, signals.StateSuspended, st.State)
		require.Len(t, st.PendingElicitations, 1)
		require.Equal(t, q.RequestID, st.PendingElicitations[0].RequestID)
		require.Contains(t, currentDetails(t, id), "waiting for an answer to *Which approach?* (`"+q.RequestID+"`")

		_, err = w.sc.ElicitationRespond(ctxFor(t, 10*time.Second), id, signals.ElicitationRespondRequest{
			RequestID: q.RequestID, Action: signals.ActionAccept, Content: json.RawMessage(`{"question_0":"middle"}`),
		})
		require.ErrorContains(t, err, "question_0 must be one of left, right", "a bad answer gets a clear error")
		st, err = w.sc.Status(ctxFor(t, 10*time.Second), id)
		require.NoError(t, err)
		require.Len(t, st.PendingElicitations, 1, "and the question stays open")

		res, err := w.sc.ElicitationRespond(ctxFor(t, 10*time.Second), id, signals.ElicitationRespondRequest{
			RequestID: q.RequestID, Action: signals.ActionAccept, Content: json.RawMessage(`{"question_0":"right"}`), AnsweredBy: "alice",
		})
		require.NoError(t, err)
		require.Equal(t, "alice", res.Resolution.AnsweredBy)
		again, err := w.sc.ElicitationRespond(ctxFor(t, 10*time.Second), id, signals.ElicitationRespondRequest{
			RequestID: q.RequestID, Action: signals.ActionDecline, AnsweredBy: "bob",
		})
		require.NoError(t, err)
		require.Equal(t, signals.ActionAccept, again.Resolution.Action, "the first valid answer wins")
		require.Equal(t, "alice", again.Resolution.AnsweredBy)

		evs := endedWith(t, id, turn, "end_turn")
		require.Equal(t, 1, countKindIn(evs, signals.EventElicitationResolved, turn))
		last := w.fm.MainRequests()[len(w.fm.MainRequests())-1]
		require.True(t, last.Contains("tool", "right"), "the answer reached the model: %+v", last.Messages)
		require.Contains(t, strings.Join(agentTexts(t, evs, turn), ""), "right")
	})
	t.Run("AnsweredOnTheDeckByANamedToken", func(t *testing.T) {
		secret := "s-" + signals.NewID()
		h, err := deck.New(deck.Options{Client: w.sc, ControllerTokens: []string{"carol=" + secret}, PollInterval: 50 * time.Millisecond})
		require.NoError(t, err)
		d := &testDeck{Server: httptest.NewServer(h), operator: secret}
		t.Cleanup(func() { d.CloseClientConnections(); d.Close() })
		id := session(t)
		turn := w.prompt(t, signals.SessionConfig{SessionID: id}, "tool: ask Which colour? | red | blue")
		q := elicited(t, id, turn)
		bad := d.call(t, "POST", sessPath(id, "/questions/", q.RequestID), secret, map[string]any{"action": "accept", "content": map[string]any{"question_0": 7}})
		require.NotEqual(t, http.StatusOK, bad.Code)
		require.Contains(t, string(bad.Body), "question_0 must be a string")
		var res signals.ElicitationRespondResult
		d.call(t, "POST", sessPath(id, "/questions/", q.RequestID), secret, map[string]any{"action": "accept", "content": map[string]any{"question_0": "blue"}}).decode(t, &res)
		require.Equal(t, "deck:carol", res.Resolution.AnsweredBy)
		evs := endedWith(t, id, turn, "end_turn")
		require.Contains(t, strings.Join(agentTexts(t, evs, turn), ""), "blue")
		require.Contains(t, journalDump(evs), `"answered_by":"deck:carol"`)
	})
	t.Run("AnsweredInTheDecksPageFromAFormOfItsSchema", func(t *testing.T) {
		secret := "s-" + signals.NewID()
		h, err := deck.New(deck.Options{Client: w.sc, ControllerTokens: []string{"dana=" + secret}, PollInterval: 50 * time.Millisecond})
		require.NoError(t, err)
		d := &testDeck{Server: httptest.NewServer(h), operator: secret}
		t.Cleanup(func() { d.CloseClientConnections(); d.Close() })
		ctx := browser(t)
		id := session(t)
		turn := w.prompt(t, signals.SessionConfig{SessionID: id}, "tool: ask Which fruit? | apple | pear")
		q := elicited(t, id, turn)
		choice := `#pending .question select[name="question_0"]`
		require.NoError(t, chromedp.Do(ctx,
			chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
			chromedp.Navigate(d.URL+"/#token="+secret),
			chromedp.WaitVisible(css(`#sessions`)),
			chromedp.Evaluate[chromedp.Void](`location.hash = '#/s/' + encodeURIComponent(`+jsString(id)+`); undefined`),
			chromedp.WaitVisible(css(choice)),
		))
		card := textOf(t, ctx, "#pending .question")
		require.Contains(t, card, "Which fruit?")
		require.Contains(t, card, "answer within")
		noOverflow(t, ctx, "a question at 390px")
		require.NoError(t, chromedp.Do(ctx,
			chromedp.SetValue(css(choice), "pear"),
			chromedp.Click(css(`#pending .question button[type="submit"]`)),
			chromedp.WaitNotPresent(css(`#pending .question`)),
		))
		evs := endedWith(t, id, turn, "end_turn")
		require.Contains(t, strings.Join(agentTexts(t, evs, turn), ""), "pear")
		require.Contains(t, journalDump(evs), `"answered_by":"deck:dana"`)
		waitText(t, ctx, "#transcript", "question accept by deck:dana")
		_ = q
	})
	t.Run("DeadlineFailsClosedWithCancel", func(t *testing.T) {
		id := session(t)
		turn := w.prompt(t, signals.SessionConfig{SessionID: id, PermissionTimeout: "3s"}, "tool: ask Ship it? | yes | no")
		q := elicited(t, id, turn)
		evs := turnEnd(t, id, turn)
		var res signals.ElicitationResolution
		for _, ev := range evs {
			if ev.Kind == signals.EventElicitationResolved {
				require.NoError(t, json.Unmarshal(ev.Data, &res))
			}
		}
		require.Equal(t, q.RequestID, res.RequestID)
		require.Equal(t, signals.ActionCancel, res.Action)
		require.Equal(t, signals.DecidedByDeadline, res.DecidedBy)
		checkInvariants(t, allEvents(t, id))
	})
}

// A question open when its worker is killed: the attempt's question is withdrawn (decided_by
// restart), the next attempt on another worker asks again, and the one answer ends it.
func TestRealAgentClaudeQuestionSurvivesAWorkerKill(t *testing.T) {
	w := startRealAgentWorker(t, fakemodel.Claude)
	queue := "tacp-question-kill-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	first := w.realWorkerProcess(t, queue)
	id := session(t)
	_, err := qc.Prompt(ctxFor(t, time.Minute), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "tool: ask Keep going? | yes | no", ClientMessageID: "turn-1"})
	require.NoError(t, err)
	q1 := elicited(t, id, 1)
	agents := proctree.Descendants(first.Process.Pid)
	w.realWorkerProcess(t, queue)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	t.Cleanup(func() {
		for _, p := range alive(agents) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})

	var q2 signals.ElicitationRequestedData
	waitFor(t, id, func(ev signals.Event) bool {
		if ev.Kind == signals.EventElicitationRequested {
			_ = json.Unmarshal(ev.Data, &q2)
		}
		return q2.RequestID != "" && q2.RequestID != q1.RequestID
	})
	require.Equal(t, "Keep going?", q2.Message, "asked again by the next attempt")
	_, err = qc.ElicitationRespond(ctxFor(t, time.Minute), id, signals.ElicitationRespondRequest{
		RequestID: q2.RequestID, Action: signals.ActionAccept, Content: json.RawMessage(`{"question_0":"yes"}`), AnsweredBy: "alice",
	})
	require.NoError(t, err)
	evs := turnEndAcrossFailover(t, id, 1)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind, "%v", data)
	byUser, byRestart := 0, 0
	for _, ev := range evs {
		if ev.Kind != signals.EventElicitationResolved {
			continue
		}
		var r signals.ElicitationResolution
		require.NoError(t, json.Unmarshal(ev.Data, &r))
		switch r.DecidedBy {
		case signals.DecidedByUser:
			byUser++
		case signals.DecidedByRestart:
			byRestart++
			require.Equal(t, q1.RequestID, r.RequestID)
		}
	}
	require.Equal(t, 1, byUser, "answered once: %s", journalDump(evs))
	require.Equal(t, 1, byRestart, "the lost attempt's question was withdrawn")
	checkInvariants(t, allEvents(t, id))
}

// An MCP server's question (MCP elicitation/create, testagent/mcpask) reaches a person the
// same way: claude-agent-acp forwards it as ACP elicitation/create, tacp journals it, a
// person answers, and the MCP tool's result — what the person chose — reaches the model.
func TestRealAgentClaudeAnMCPServersQuestionReachesAPerson(t *testing.T) {
	mcpask := filepath.Join(binDir, "mcpask")
	w := startRealAgentWorkerWith(t, fakemodel.Claude, func(o *tacpworker.Options) {
		o.MCP = activities.MCPPolicy{Mode: activities.MCPListed, Commands: []string{mcpask}}
		// MCP tools offered to the model at once, not found through Claude Code's ToolSearch
		// (the fake model calls only what a request offers).
		o.Profiles[0].Env["ENABLE_TOOL_SEARCH"] = "false"
	})
	servers, err := json.Marshal([]acp.McpServer{{Stdio: &acp.McpServerStdio{Name: "asker", Command: mcpask, Args: []string{}, Env: []acp.EnvVariable{}}}})
	require.NoError(t, err)
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id, Policy: signals.PolicyAllowAll, McpServers: servers}
	turn := w.prompt(t, cfg, "tool: mcp-ask Which side? | left | right")
	defer func() {
		if t.Failed() {
			for _, r := range w.fm.MainRequests() {
				t.Logf("the model was offered: %v", r.Tools)
			}
		}
	}()
	q := elicited(t, id, turn)
	require.Equal(t, signals.ElicitationForm, q.Mode)
	require.Equal(t, "Which side?", q.Message)
	require.Contains(t, signals.ElicitationChoices(q.Schema, "choice"), "right")
	_, err = w.sc.ElicitationRespond(ctxFor(t, 10*time.Second), id, signals.ElicitationRespondRequest{
		RequestID: q.RequestID, Action: signals.ActionAccept, Content: json.RawMessage(`{"choice":"up"}`),
	})
	require.ErrorContains(t, err, "choice must be one of left, right", "checked against the MCP server's schema")
	_, err = w.sc.ElicitationRespond(ctxFor(t, 10*time.Second), id, signals.ElicitationRespondRequest{
		RequestID: q.RequestID, Action: signals.ActionAccept, Content: json.RawMessage(`{"choice":"right"}`), AnsweredBy: "erin",
	})
	require.NoError(t, err)
	evs := endedWith(t, id, turn, "end_turn")
	require.Contains(t, strings.Join(agentTexts(t, evs, turn), ""), "the person chose right")
	require.Contains(t, journalDump(evs), `"answered_by":"erin"`)
}

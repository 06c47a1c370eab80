package e2e

// What Temporal's own tools do to a session (docs/operators.md "Cancel, terminate, reset:
// what each does to a session"), through the SDK's client making the calls the Temporal UI
// and CLI make: a cancellation is caught like a close, a termination is seen by the next
// client, and the metadata an operator reads lasts across continue-as-new.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/tacp-dev/tacp/internal/proctree"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
	"github.com/tacp-dev/tacp/tacpclient"
)

// stateListed waits until visibility lists session id with TacpSessionState = state.
func stateListed(t *testing.T, id, state string) {
	t.Helper()
	query := fmt.Sprintf("WorkflowId = '%s' AND %s = '%s'", signals.SessionWorkflowID(id), signals.SearchAttrSessionState, state)
	require.Eventually(t, func() bool {
		resp, err := tc.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		return err == nil && len(resp.GetExecutions()) == 1
	}, 30*time.Second, 100*time.Millisecond, "visibility finds the session by %s", query)
}

// A cancellation requested mid-turn (the Temporal UI's "Request Cancellation", `temporal
// workflow cancel`) closes the session as `starter close` does: the turn is cancelled, the
// agent stopped, session.closed journaled with the operator's cause, the search attribute
// final; the next prompt is refused as for a closed session, and nothing hangs.
func TestOperatorsCancelClosesTheSessionLikeClose(t *testing.T) {
	t.Parallel()
	_, qc, id, agentPID, childPID := lifecycleWorker(t)
	_, err := qc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "/sleep 60s", ClientMessageID: "sleep"})
	require.NoError(t, err)
	waitFor(t, id, func(ev signals.Event) bool { return ev.TurnID == 2 && ev.Kind == signals.EventAgentUpdate })

	wid := signals.SessionWorkflowID(id)
	require.NoError(t, tc.CancelWorkflow(ctxFor(t, 10*time.Second), wid, ""))
	evs := waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventSessionClosed })
	kind, data := terminalData(t, withTurn(evs, 2))
	require.Equal(t, signals.EventTurnEnded, kind)
	require.Equal(t, "cancelled", data["stop_reason"])
	_, closed := terminalData(t, evs)
	require.Equal(t, signals.CloseReasonOperatorCancel, closed["reason"])

	// The run ends, completed: a closed session stays closed.
	require.NoError(t, tc.GetWorkflow(ctxFor(t, 30*time.Second), wid, "").Get(ctxFor(t, 30*time.Second), nil))
	d, err := tc.DescribeWorkflowExecution(ctxFor(t, 10*time.Second), wid, "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, d.GetWorkflowExecutionInfo().GetStatus())

	st, err := qc.Status(ctxFor(t, 30*time.Second), id)
	require.NoError(t, err)
	require.Equal(t, signals.StateClosed, st.State)
	stateListed(t, id, signals.StateClosed)
	require.Eventually(t, func() bool { return !proctree.Alive(agentPID) && !proctree.Alive(childPID) },
		10*time.Second, 50*time.Millisecond, "the cancelled session's agent %d still runs", agentPID)

	_, err = qc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "/chunks 1"})
	rej, ok := rejection.As(err)
	require.True(t, ok, "want a rejection, got %v", err)
	require.Equal(t, signals.RejectSessionClosed, rej.Type)
	_, errOut, code := starter(t, "prompt", "--task-queue", qc.TaskQueue, "--session", id, "/chunks 1")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "closed")
}

// withTurn is the events of turn n.
func withTurn(evs []signals.Event, n int64) []signals.Event {
	var out []signals.Event
	for _, ev := range evs {
		if ev.TurnID == n {
			out = append(out, ev)
		}
	}
	return out
}

// What an operator reads of a session lasts: after continue-as-new the run's Current
// Details still name the session, its agent profile and title (a run started by
// continue-as-new has no static summary of its own: the SDK's continue-as-new carries none);
// the first run's static summary names the session; every handler has a description; a
// refusal is non-retryable.
func TestOperatorsMetadataLastsAcrossContinueAsNew(t *testing.T) {
	t.Parallel()
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id, MaxRunEvents: 40}
	turnEnd(t, id, prompt(t, cfg, "/chunks 3").TurnID)
	_, err := tacpclient.Call(ctxFor(t, 30*time.Second), sc, id, signals.Updates.SetTitle, signals.SetTitleRequest{Title: "parser tests"})
	require.NoError(t, err)
	wid := signals.SessionWorkflowID(id)
	for i := 0; i < 4; i++ {
		turnEnd(t, id, prompt(t, cfg, "/chunks 3").TurnID)
	}
	require.Eventually(t, func() bool {
		st, err := sc.Status(context.Background(), id)
		return err == nil && st.Run > 1
	}, 30*time.Second, 50*time.Millisecond, "the session continued as new")

	v, err := tc.QueryWorkflow(ctxFor(t, time.Minute), wid, "", "__temporal_workflow_metadata")
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	details := md.GetCurrentDetails()
	require.Contains(t, details, "session `"+id+"`")
	require.Contains(t, details, "agent profile default")
	require.Contains(t, details, `"parser tests"`)
	def := md.GetDefinition()
	require.NotEmpty(t, def.GetUpdateDefinitions())
	for _, u := range def.GetUpdateDefinitions() {
		require.NotEmpty(t, u.GetDescription(), "update %s", u.GetName())
	}
	for _, q := range def.GetQueryDefinitions() {
		if !strings.HasPrefix(q.GetName(), "__") {
			require.NotEmpty(t, q.GetDescription(), "query %s", q.GetName())
		}
	}
	for _, s := range def.GetSignalDefinitions() {
		require.NotEmpty(t, s.GetDescription(), "signal %s", s.GetName())
		if s.GetName() == signals.SignalTurnEvents {
			require.True(t, strings.HasPrefix(s.GetDescription(), "internal"), s.GetDescription())
		}
	}

	d, err := tc.DescribeWorkflowExecution(ctxFor(t, 10*time.Second), wid, "")
	require.NoError(t, err)
	first, err := tc.DescribeWorkflowExecution(ctxFor(t, 10*time.Second), wid, d.GetWorkflowExecutionInfo().GetFirstRunId())
	require.NoError(t, err)
	require.NotNil(t, first.GetExecutionConfig().GetUserMetadata().GetSummary())
	var summary string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(first.GetExecutionConfig().GetUserMetadata().GetSummary(), &summary))
	require.Contains(t, summary, "tacp session "+id)

	// A refusal: a steer of a turn that is not live.
	h, err := tc.UpdateWorkflow(ctxFor(t, 30*time.Second), client.UpdateWorkflowOptions{
		WorkflowID: wid, UpdateName: signals.UpdateSteer, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{signals.SteerRequest{Text: "left", ExpectedTurnID: "1", ClientMsgID: "c1"}},
	})
	if err == nil {
		err = h.Get(ctxFor(t, 30*time.Second), nil)
	}
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want an application error, got %v", err)
	require.True(t, appErr.NonRetryable(), "a refusal is non-retryable: %v", err)
}

// A termination, which no workflow can catch, is seen by the next client: status says the
// session was terminated by an operator, not "running"; the worker ends the turn's attempt
// and stops the session's agent (no run will adopt the attempt); the next `starter prompt`
// starts a new session under the id (its journal from seq 1) and follows its turn to the end
// instead of waiting for seqs the old journal had.
func TestOperatorsTerminateIsSeenAndTheNextPromptStartsANewSession(t *testing.T) {
	t.Parallel()
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	pids := prompt(t, cfg, "/pids").TurnID
	f := strings.Fields(strings.Join(agentTexts(t, turnEnd(t, id, pids), pids), ""))
	require.Len(t, f, 3, "pids AGENT CHILD")
	agentPID, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	for i := 0; i < 3; i++ { // a journal longer than the new session's first turn
		turnEnd(t, id, prompt(t, cfg, "/chunks 3").TurnID)
	}
	res := prompt(t, cfg, "/sleep 60s")
	waitFor(t, id, func(ev signals.Event) bool { return ev.TurnID == res.TurnID && ev.Kind == signals.EventAgentUpdate })
	wid := signals.SessionWorkflowID(id)
	require.NoError(t, tc.TerminateWorkflow(ctxFor(t, 10*time.Second), wid, "", "stuck, said the operator"))

	// The attempt's next heartbeat finds its run gone; the worker asks what became of the
	// session and stops its agent, instead of holding the attempt for a run that never comes
	// (AdoptWait, a minute) and the agent for its idle TTL (10 minutes).
	stopped := ctxFor(t, 45*time.Second)
	for proctree.Alive(agentPID) {
		select {
		case <-stopped.Done():
			t.Fatalf("the agent (pid %d) of the terminated session still runs", agentPID)
		case <-time.After(50 * time.Millisecond):
		}
	}

	st, err := sc.Status(ctxFor(t, 30*time.Second), id)
	require.NoError(t, err)
	require.Equal(t, signals.StateTerminated, st.State)
	require.Equal(t, "terminated by an operator: stuck, said the operator", st.Ended)
	out, _, code := starter(t, "status", "--session", id)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "state     terminated")
	require.Contains(t, out, "terminated by an operator: stuck, said the operator")

	out, errOut := promptSettles(t, id, "/chunks 2")
	require.Contains(t, errOut, "starts a new session under its id")
	require.Contains(t, out, "chunk 2")
	evs := allEvents(t, id)
	require.Equal(t, int64(1), evs[0].Seq, "a new session: its journal begins at seq 1")
	require.Equal(t, signals.EventSessionStarted, evs[0].Kind)
	for _, ev := range evs[1:] {
		require.Equal(t, int64(1), ev.TurnID, "the new session's first turn is turn 1: %+v", ev)
	}
	st, err = sc.Status(ctxFor(t, 30*time.Second), id)
	require.NoError(t, err)
	require.Equal(t, signals.StateIdle, st.State)
	require.Empty(t, st.Ended)
}

// A reset to the run's last workflow task (the Temporal UI's Reset, `temporal workflow reset
// --type LastWorkflowTask`) of an idle session repeats nothing and leaves a true session: a
// viewer that follows it across the reset sees the next turn, status is true, the journal
// goes on without a seq used twice, and `starter prompt` ends.
func TestOperatorsResetToTheLastTaskLeavesATrueSession(t *testing.T) {
	t.Parallel()
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	for i := 0; i < 2; i++ {
		turnEnd(t, id, prompt(t, cfg, "/chunks 2").TurnID)
	}
	before := allEvents(t, id)
	last := before[len(before)-1].Seq

	// A viewer attached before the reset, waiting for the next turn's end.
	watched := make(chan error, 1)
	wctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	go func() {
		saw := false
		err := sc.Watch(wctx, id, last, func(ev signals.Event) bool {
			saw = ev.TurnID == 3 && signals.IsTerminal(ev.Kind)
			return !saw
		})
		if err == nil && !saw {
			err = errors.New("the watch ended before turn 3 did")
		}
		watched <- err
	}()

	wid := signals.SessionWorkflowID(id)
	d, err := tc.DescribeWorkflowExecution(ctxFor(t, 10*time.Second), wid, "")
	require.NoError(t, err)
	oldRun := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	var lastTask int64
	it := tc.GetWorkflowHistory(ctxFor(t, 10*time.Second), wid, oldRun, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			lastTask = ev.GetEventId()
		}
	}
	resp, err := tc.ResetWorkflowExecution(ctxFor(t, 10*time.Second), &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 srv.Namespace(),
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: wid, RunId: oldRun},
		Reason:                    "retry a stuck task",
		WorkflowTaskFinishEventId: lastTask,
		RequestId:                 signals.NewID(),
	})
	require.NoError(t, err)
	require.NotEqual(t, oldRun, resp.GetRunId())

	st, err := sc.Status(ctxFor(t, 30*time.Second), id)
	require.NoError(t, err)
	require.Equal(t, signals.StateIdle, st.State)
	require.Empty(t, st.Ended)
	out, _ := promptSettles(t, id, "/chunks 2")
	require.Contains(t, out, "chunk 2")
	require.NoError(t, <-watched, "the viewer attached before the reset sees turn 3 end")

	evs := allEvents(t, id)
	// The events of the task the reset repeats are journaled again, the same but for their
	// time.
	untimed := func(evs []signals.Event) []signals.Event {
		out := slices.Clone(evs)
		for i := range out {
			out[i].At = time.Time{}
		}
		return out
	}
	require.Equal(t, untimed(before), untimed(evs[:len(before)]), "the journal before the reset is kept as it was")
	for i := 1; i < len(evs); i++ {
		require.Equal(t, evs[i-1].Seq+1, evs[i].Seq, "seqs go on one by one: %+v", evs[i])
	}
	require.Equal(t, int64(3), evs[len(evs)-1].TurnID)
}

// Asking which profiles the workers offer, as `starter status`, `starter profiles` and a
// deck's pages do, is one ProfilesWorkflow run for every ask within ProfilesLinger: the
// Temporal UI lists one row for three `starter status`, not three.
func TestOperatorsProfilesAskedThriceAreOneRun(t *testing.T) {
	t.Parallel()
	queue := "tacp-profiles-once-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	startWorkerProcess(t, queue)
	for range 3 {
		ps, err := qc.Profiles(ctxFor(t, 60*time.Second))
		require.NoError(t, err)
		require.NotEmpty(t, ps)
	}
	query := fmt.Sprintf("WorkflowId = '%s'", signals.ProfilesWorkflowID(queue))
	var runs int
	require.Eventually(t, func() bool {
		resp, err := tc.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		runs = len(resp.GetExecutions())
		return err == nil && runs >= 1
	}, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, 1, runs, "one run answered all three")
}

// promptSettles runs `starter prompt` on session id and requires it to end, with success,
// within a minute (a session an operator touched must not leave it waiting forever); it
// returns its stdout and stderr.
func promptSettles(t *testing.T, id, text string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, errOut, code, err := runStarter(ctx, "prompt", "--session", id, text)
	require.NoError(t, err)
	require.NoError(t, ctx.Err(), "starter prompt hung: %s", errOut)
	require.Equal(t, 0, code, errOut)
	return out, errOut
}

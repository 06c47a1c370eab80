package e2e

// Bad input through the real client on the real server (issue 7): every kind of request a
// careless or hostile client can send — wrong JSON types, oversized and empty text, ids that
// name nothing, tokens of the wrong shape, observers acting, unknown and closed sessions,
// invalid session ids and configs — is refused with a clear error (a type a caller can test
// and a message that says what is wrong), and changes nothing: the status, the journal and
// the raw Temporal history are the same before and after. TestBadInputIsRejectedClearly
// (session_test.go) holds the first few kinds; these are the rest.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
)

// sdkDecode marks a request the SDK refuses before tacp sees it (an update the session does
// not have). The client gets an ApplicationError that is no rejection. A payload that does
// not decode into the update's request type is tacp's to refuse: invalid_request, naming the
// update and the field.
const sdkDecode = "sdk:decode"

// badCase is one kind of bad input: do sends it, and it must fail with want (a rejection
// type, or sdkDecode) and a message containing msg.
type badCase struct {
	name string
	want string
	msg  string
	do   func(ctx context.Context) error
}

// rawUpdate sends an update with arbitrary arguments straight through the Temporal client,
// as a client in another language (or a typo) might.
func rawUpdate(ctx context.Context, id, name string, args ...any) error {
	h, err := tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   signals.SessionWorkflowID(id),
		UpdateName:   name,
		Args:         args,
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	return err
}

// snapshot is what a rejected request must not change.
type snapshot struct {
	status  signals.Status
	journal []signals.Event
	history []string // the raw history's event types, in order
}

func takeSnapshot(t *testing.T, id string) snapshot {
	t.Helper()
	st, err := sc.Status(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	// history_length is the worker's count, which includes the workflow task a rejected
	// update ran in; the server drops that task, so the raw history is what must not change.
	st.HistoryLength = 0
	return snapshot{status: st, journal: allEvents(t, id), history: historyEventTypes(t, id)}
}

// historyLength counts the events of the session's current run in the server's history.
func historyLength(t *testing.T, id string) int {
	t.Helper()
	return workflowHistoryLength(t, signals.SessionWorkflowID(id))
}

// historyEventTypes lists the event types of the session's current run in the server's
// history: a failure shows what was added.
func historyEventTypes(t *testing.T, id string) []string {
	t.Helper()
	iter := tc.GetWorkflowHistory(ctxFor(t, 10*time.Second), signals.SessionWorkflowID(id), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var types []string
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		types = append(types, e.GetEventType().String())
	}
	return types
}

// checkRefused asserts that err is the clear refusal c wants.
func checkRefused(t *testing.T, c badCase, err error) {
	t.Helper()
	require.Error(t, err, "accepted")
	if c.want == sdkDecode {
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(err, &appErr), "want an ApplicationError, got %T %v", err, err)
		_, isRejection := rejection.As(err)
		require.False(t, isRejection)
		require.Contains(t, appErr.Error(), c.msg)
		return
	}
	rej, ok := rejection.As(err)
	require.True(t, ok, "want %s, got %T %v", c.want, err, err)
	require.Equal(t, c.want, rej.Type, "%v", rej)
	require.NotEmpty(t, rej.Message)
	require.Contains(t, rej.Error(), c.msg)
}

// sameHistory reports whether after is before with nothing added but empty workflow tasks.
// The server drops the speculative task a rejected update's validator ran in, unless another
// change of the workflow's state lands while it is in flight — the live turn's heartbeat, as
// the turn is the session's own activity — when it keeps that task: scheduled, started and
// completed, with no command and no state after it (contract §3).
func sameHistory(before, after []string) bool {
	if len(after) < len(before) || !slices.Equal(before, after[:len(before)]) {
		return false
	}
	empty := []string{"WorkflowTaskScheduled", "WorkflowTaskStarted", "WorkflowTaskCompleted"}
	for rest := after[len(before):]; len(rest) > 0; rest = rest[len(empty):] {
		if len(rest) < len(empty) || !slices.Equal(rest[:len(empty)], empty) {
			return false
		}
	}
	return true
}

func TestSameHistoryAllowsOnlyEmptyWorkflowTasks(t *testing.T) {
	t.Parallel()
	base := []string{"WorkflowExecutionStarted", "WorkflowTaskScheduled", "WorkflowTaskStarted", "WorkflowTaskCompleted"}
	task := []string{"WorkflowTaskScheduled", "WorkflowTaskStarted", "WorkflowTaskCompleted"}
	require.True(t, sameHistory(base, base))
	require.True(t, sameHistory(base, slices.Concat(base, task, task)))
	require.False(t, sameHistory(base, base[:3]), "shorter")
	require.False(t, sameHistory(base, slices.Concat(base, task, []string{"TimerStarted"})), "a command after the task")
	require.False(t, sameHistory(base, slices.Concat(base, task[:2])), "a task still running")
	require.False(t, sameHistory(base, slices.Concat(base, []string{"WorkflowExecutionSignaled"}, task)), "a signal")
	require.False(t, sameHistory(base, slices.Concat([]string{"WorkflowExecutionStarted", "TimerStarted"}, base[2:])), "a changed prefix")
}

func runBadCases(t *testing.T, id string, cases []badCase) {
	t.Helper()
	before := takeSnapshot(t, id)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.do(ctxFor(t, 30*time.Second))
			checkRefused(t, c, err)
			after := takeSnapshot(t, id)
			require.True(t, sameHistory(before.history, after.history), "raw history changed:\nbefore %v\nafter  %v", before.history, after.history)
			require.Equal(t, before.journal, after.journal, "journal changed")
			require.Equal(t, before.status, after.status, "status changed")
		})
	}
}

func TestBadInputAgainstALiveTurnChangesNothing(t *testing.T) {
	t.Parallel()
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	// A live turn that waits on a person: nothing moves unless a request moves it.
	prompt(t, cfg, "/permission edit")
	req := permissionRequested(t, id)
	waitState(t, id, signals.StateSuspended)
	_, err := sc.Attach(ctxFor(t, 10*time.Second), id, signals.AttachRequest{ViewerID: "obs", Role: signals.RoleObserver, LeaseSeconds: 3600})
	require.NoError(t, err)
	st, err := sc.Status(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	require.Equal(t, "1", st.SteerToken)

	long := strings.Repeat("x", signals.MaxTextBytes+1)
	longID := strings.Repeat("i", signals.MaxClientIDBytes+1)
	steerWith := func(r signals.SteerRequest) func(context.Context) error {
		return func(ctx context.Context) error { _, err := sc.Steer(ctx, id, r); return err }
	}
	respondWith := func(r signals.PermissionRespondRequest) func(context.Context) error {
		return func(ctx context.Context) error { _, err := sc.PermissionRespond(ctx, id, r); return err }
	}
	attachWith := func(r signals.AttachRequest) func(context.Context) error {
		return func(ctx context.Context) error { _, err := sc.Attach(ctx, id, r); return err }
	}
	promptWith := func(r signals.PromptRequest) func(context.Context) error {
		return func(ctx context.Context) error { _, err := sc.Prompt(ctx, cfg, r); return err }
	}
	raw := func(name string, args ...any) func(context.Context) error {
		return func(ctx context.Context) error { return rawUpdate(ctx, id, name, args...) }
	}

	cases := []badCase{
		// Wrong JSON types: the payload does not decode into the request type.
		{"prompt text a number", signals.RejectInvalidRequest, "PromptRequest.text", raw(signals.UpdatePrompt, map[string]any{"text": 42, "client_message_id": "m"})},
		{"prompt payload an array", signals.RejectInvalidRequest, "prompt: json: cannot unmarshal array", raw(signals.UpdatePrompt, []any{"hello"})},
		{"steer token a number", signals.RejectInvalidRequest, "SteerRequest.expected_turn_id", raw(signals.UpdateSteer, map[string]any{"text": "go", "expected_turn_id": 1})},
		{"permission request_id an object", signals.RejectInvalidRequest, "request_id", raw(signals.UpdatePermissionRespond, map[string]any{"request_id": map[string]any{"id": req.RequestID}, "option_id": "allow"})},
		{"attach lease_seconds a string", signals.RejectInvalidRequest, "lease_seconds", raw(signals.UpdateAttach, map[string]any{"viewer_id": "v", "role": "controller", "lease_seconds": "600"})},
		{"set_policy level a bool", signals.RejectInvalidRequest, "level", raw(signals.UpdateSetPolicy, map[string]any{"level": true})},
		{"cancel turn_id a string", signals.RejectInvalidRequest, "turn_id", raw(signals.UpdateCancel, map[string]any{"turn_id": "1"})},
		{"steer text an object", signals.RejectInvalidRequest, "text", raw(signals.UpdateSteer, map[string]any{"text": map[string]any{}, "expected_turn_id": "1"})},
		// Missing or malformed fields the types accept but the contract does not.
		{"prompt with no payload", signals.RejectInvalidRequest, "empty", raw(signals.UpdatePrompt)},
		{"prompt without client_message_id", signals.RejectInvalidRequest, "client_message_id is required", raw(signals.UpdatePrompt, map[string]any{"text": "hi"})},
		{"prompt client_message_id too long", signals.RejectInvalidRequest, "client_message_id", promptWith(signals.PromptRequest{Text: "hi", ClientMessageID: longID})},
		{"prompt content not blocks", signals.RejectInvalidRequest, "JSON array", raw(signals.UpdatePrompt, map[string]any{"text": "hi", "client_message_id": "c1", "content": map[string]any{"type": "text"}})},
		{"prompt null content and no text", signals.RejectInvalidRequest, "empty", raw(signals.UpdatePrompt, map[string]any{"text": "", "client_message_id": "c2", "content": nil})},
		{"prompt content not UTF-8", signals.RejectInvalidRequest, "not valid UTF-8", promptWith(signals.PromptRequest{Text: "hi", ClientMessageID: "c3", Content: json.RawMessage("[{\"type\":\"text\",\"text\":\"\x83\"}]")})},
		{"steer empty text", signals.RejectInvalidRequest, "empty", steerWith(signals.SteerRequest{Text: "  \n", ExpectedTurnID: "1"})},
		{"steer text over MaxTextBytes", signals.RejectInvalidRequest, "limit", steerWith(signals.SteerRequest{Text: long, ExpectedTurnID: "1"})},
		{"steer client_msg_id too long", signals.RejectInvalidRequest, "client_msg_id", steerWith(signals.SteerRequest{Text: "go", ExpectedTurnID: "1", ClientMsgID: longID})},
		// Tokens of the wrong shape: compared as strings, so each is stale, with the live one.
		{"steer token not a number", signals.RejectStaleTurn, `expected turn abc, the live turn is 1`, steerWith(signals.SteerRequest{Text: "go", ExpectedTurnID: "abc"})},
		{"steer token negative", signals.RejectStaleTurn, "expected turn -1", steerWith(signals.SteerRequest{Text: "go", ExpectedTurnID: "-1"})},
		{"steer token with offset zero", signals.RejectStaleTurn, "expected turn 1.0", steerWith(signals.SteerRequest{Text: "go", ExpectedTurnID: "1.0"})},
		{"steer token with a leading zero", signals.RejectStaleTurn, "expected turn 01", steerWith(signals.SteerRequest{Text: "go", ExpectedTurnID: "01"})},
		{"steer token with spaces", signals.RejectStaleTurn, "expected turn  1 ", steerWith(signals.SteerRequest{Text: "go", ExpectedTurnID: " 1 "})},
		{"steer token from the future", signals.RejectStaleTurn, "expected turn 1.1", steerWith(signals.SteerRequest{Text: "go", ExpectedTurnID: "1.1"})},
		{"steer token of three parts", signals.RejectStaleTurn, "expected turn 1.1.1", steerWith(signals.SteerRequest{Text: "go", ExpectedTurnID: "1.1.1"})},
		// Ids that name nothing.
		{"cancel a turn that is not live", signals.RejectNoLiveTurn, "no turn 99", func(ctx context.Context) error {
			_, err := sc.Cancel(ctx, id, signals.CancelRequest{TurnID: 99})
			return err
		}},
		{"cancel a negative turn", signals.RejectNoLiveTurn, "no turn -1", func(ctx context.Context) error {
			_, err := sc.Cancel(ctx, id, signals.CancelRequest{TurnID: -1})
			return err
		}},
		{"permission unknown request id", signals.RejectUnknownRequest, "p9.9.9", respondWith(signals.PermissionRespondRequest{RequestID: "p9.9.9", OptionID: "allow"})},
		{"permission empty request id", signals.RejectInvalidRequest, "request_id is required", respondWith(signals.PermissionRespondRequest{OptionID: "allow"})},
		{"permission unknown option id", signals.RejectInvalidOption, `no option "allow_forever"`, respondWith(signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: "allow_forever"})},
		{"permission option id of another case", signals.RejectInvalidOption, `"ALLOW"`, respondWith(signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: "ALLOW"})},
		{"permission bad outcome", signals.RejectInvalidRequest, `outcome "maybe"`, respondWith(signals.PermissionRespondRequest{RequestID: req.RequestID, Outcome: "maybe"})},
		{"permission outcome expired from a client", signals.RejectInvalidRequest, `outcome "expired"`, respondWith(signals.PermissionRespondRequest{RequestID: req.RequestID, Outcome: signals.OutcomeExpired})},
		// Bad levels and viewer shapes.
		{"bad policy level", signals.RejectInvalidRequest, `policy "yolo"`, func(ctx context.Context) error {
			_, err := sc.SetPolicy(ctx, id, signals.SetPolicyRequest{Level: "yolo"})
			return err
		}},
		{"empty policy level", signals.RejectInvalidRequest, `policy ""`, func(ctx context.Context) error {
			_, err := sc.SetPolicy(ctx, id, signals.SetPolicyRequest{})
			return err
		}},
		{"policy level in the wrong case", signals.RejectInvalidRequest, "ALLOW_ALL", func(ctx context.Context) error {
			_, err := sc.SetPolicy(ctx, id, signals.SetPolicyRequest{Level: "ALLOW_ALL"})
			return err
		}},
		{"forget a blank tool", signals.RejectInvalidRequest, "tool is required", func(ctx context.Context) error {
			_, err := sc.PermissionForget(ctx, id, signals.PermissionForgetRequest{Tool: " \t"})
			return err
		}},
		{"attach without viewer id", signals.RejectInvalidRequest, "viewer_id is required", attachWith(signals.AttachRequest{Role: "controller", LeaseSeconds: 60})},
		{"attach viewer id too long", signals.RejectInvalidRequest, "viewer_id", attachWith(signals.AttachRequest{ViewerID: longID, Role: "controller", LeaseSeconds: 60})},
		{"attach unknown role", signals.RejectInvalidRequest, `role "admin"`, attachWith(signals.AttachRequest{ViewerID: "v", Role: "admin", LeaseSeconds: 60})},
		{"attach zero lease", signals.RejectInvalidRequest, "lease_seconds 0", attachWith(signals.AttachRequest{ViewerID: "v", Role: "controller"})},
		{"attach negative lease", signals.RejectInvalidRequest, "lease_seconds -5", attachWith(signals.AttachRequest{ViewerID: "v", Role: "controller", LeaseSeconds: -5})},
		{"attach lease over a day", signals.RejectInvalidRequest, "lease_seconds 86401", attachWith(signals.AttachRequest{ViewerID: "v", Role: "controller", LeaseSeconds: 86401})},
		// An observer may watch, not act.
		{"observer prompts", signals.RejectForbidden, "observer", promptWith(signals.PromptRequest{Text: "hi", ViewerID: "obs"})},
		{"observer steers", signals.RejectForbidden, "observer", steerWith(signals.SteerRequest{Text: "go", ExpectedTurnID: "1", ViewerID: "obs"})},
		{"observer cancels", signals.RejectForbidden, "observer", func(ctx context.Context) error {
			_, err := sc.Cancel(ctx, id, signals.CancelRequest{ViewerID: "obs"})
			return err
		}},
		{"observer answers a permission", signals.RejectForbidden, "observer", respondWith(signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: "allow", ViewerID: "obs"})},
		// Not an update of the contract at all.
		{"unknown update name", sdkDecode, "unknown update steer_now", raw("steer_now", map[string]any{"text": "go"})},
	}
	runBadCases(t, id, cases)

	// Queries answer bad arguments without a rejection type of their own, and change nothing.
	t.Run("events with a negative after_seq start at the beginning", func(t *testing.T) {
		ctx := ctxFor(t, 10*time.Second)
		neg, err := sc.Events(ctx, id, -5, 0)
		require.NoError(t, err)
		zero, err := sc.Events(ctx, id, 0, 0)
		require.NoError(t, err)
		require.Equal(t, zero, neg)
		require.False(t, neg.Gap)
		past, err := sc.Events(ctx, id, 1<<40, -3)
		require.NoError(t, err)
		require.Empty(t, past.Events)
		require.False(t, past.Gap)
	})
	t.Run("events with an after_seq of the wrong type", func(t *testing.T) {
		_, err := tc.QueryWorkflow(ctxFor(t, 10*time.Second), signals.SessionWorkflowID(id), "", signals.QueryEvents, map[string]any{"after_seq": "x"})
		var qf *serviceerror.QueryFailed
		require.True(t, errors.As(err, &qf), "%T %v", err, err)
		require.Contains(t, qf.Error(), "EventsRequest.after_seq")
	})
	t.Run("unknown query", func(t *testing.T) {
		_, err := tc.QueryWorkflow(ctxFor(t, 10*time.Second), signals.SessionWorkflowID(id), "", "journal")
		require.ErrorContains(t, err, "unknown queryType journal")
	})
	// The turn is still live and answerable after all of it.
	_, err = sc.PermissionRespond(ctxFor(t, 10*time.Second), id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: "allow"})
	require.NoError(t, err)
	turnEnd(t, id, 1)
	checkInvariants(t, allEvents(t, id))
}

// waitState waits until the session's status shows state.
func waitState(t *testing.T, id, state string) signals.Status {
	t.Helper()
	var st signals.Status
	require.Eventually(t, func() bool {
		var err error
		st, err = sc.Status(ctxFor(t, 10*time.Second), id)
		require.NoError(t, err)
		return st.State == state
	}, 60*time.Second, 20*time.Millisecond, "state %s never reached", state)
	return st
}

func TestBadInputForSessionsThatCannotTakeIt(t *testing.T) {
	t.Parallel()
	closed := session(t)
	prompt(t, signals.SessionConfig{SessionID: closed}, "/chunks 1")
	turnEnd(t, closed, 1)
	_, err := sc.Close(ctxFor(t, 10*time.Second), closed, signals.CloseRequest{Reason: "done"})
	require.NoError(t, err)
	waitFor(t, closed, func(ev signals.Event) bool { return ev.Kind == signals.EventSessionClosed })
	require.Eventually(t, func() bool {
		d, err := tc.DescribeWorkflowExecution(ctxFor(t, 10*time.Second), signals.SessionWorkflowID(closed), "")
		require.NoError(t, err)
		return d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	}, 30*time.Second, 50*time.Millisecond)

	// A closed session refuses every request, and its history stays as it ended.
	runBadCases(t, closed, []badCase{
		{"steer a closed session", signals.RejectSessionClosed, "is closed", func(ctx context.Context) error {
			_, err := sc.Steer(ctx, closed, signals.SteerRequest{Text: "go", ExpectedTurnID: "1"})
			return err
		}},
		{"cancel in a closed session", signals.RejectSessionClosed, "is closed", func(ctx context.Context) error {
			_, err := sc.Cancel(ctx, closed, signals.CancelRequest{})
			return err
		}},
		{"answer a permission in a closed session", signals.RejectSessionClosed, "is closed", func(ctx context.Context) error {
			_, err := sc.PermissionRespond(ctx, closed, signals.PermissionRespondRequest{RequestID: "p1.1.1", OptionID: "allow"})
			return err
		}},
		{"attach to a closed session", signals.RejectSessionClosed, "is closed", func(ctx context.Context) error {
			_, err := sc.Attach(ctx, closed, signals.AttachRequest{ViewerID: "v", Role: "controller", LeaseSeconds: 60})
			return err
		}},
		{"set the policy of a closed session", signals.RejectSessionClosed, "is closed", func(ctx context.Context) error {
			_, err := sc.SetPolicy(ctx, closed, signals.SetPolicyRequest{Level: "allow_all"})
			return err
		}},
		{"close a closed session", signals.RejectSessionClosed, "is closed", func(ctx context.Context) error {
			_, err := sc.Close(ctx, closed, signals.CloseRequest{})
			return err
		}},
	})

	// Sessions that do not exist, and ids that cannot name one: refused before any workflow
	// is touched, and none is started.
	unknown := "never-started-" + session(t)
	noSession := []badCase{
		{"cancel in an unknown session", signals.RejectUnknownSession, "no session", func(ctx context.Context) error {
			_, err := sc.Cancel(ctx, unknown, signals.CancelRequest{})
			return err
		}},
		{"answer a permission in an unknown session", signals.RejectUnknownSession, "no session", func(ctx context.Context) error {
			_, err := sc.PermissionRespond(ctx, unknown, signals.PermissionRespondRequest{RequestID: "r", OptionID: "allow"})
			return err
		}},
		{"attach to an unknown session", signals.RejectUnknownSession, "no session", func(ctx context.Context) error {
			_, err := sc.Attach(ctx, unknown, signals.AttachRequest{ViewerID: "v", Role: "controller", LeaseSeconds: 60})
			return err
		}},
		{"close an unknown session", signals.RejectUnknownSession, "no session", func(ctx context.Context) error {
			_, err := sc.Close(ctx, unknown, signals.CloseRequest{})
			return err
		}},
		{"events of an unknown session", signals.RejectUnknownSession, "no session", func(ctx context.Context) error {
			_, err := sc.Events(ctx, unknown, 0, 0)
			return err
		}},
	}
	for _, bad := range []string{"", ".", "..", strings.Repeat("s", 129), "ünïcode", "a b", "tab\t", "new\nline"} {
		noSession = append(noSession,
			badCase{"steer with session id " + safeName(bad), signals.RejectInvalidRequest, "invalid session id", func(ctx context.Context) error {
				_, err := sc.Steer(ctx, bad, signals.SteerRequest{Text: "go", ExpectedTurnID: "1"})
				return err
			}},
			badCase{"prompt with session id " + safeName(bad), signals.RejectInvalidRequest, "invalid session id", func(ctx context.Context) error {
				_, err := sc.Prompt(ctx, signals.SessionConfig{SessionID: bad}, signals.PromptRequest{Text: "hi"})
				return err
			}},
		)
	}
	// A config the workflow would refuse is refused by the client before it starts anything,
	// so the session id stays free for a good config.
	fresh := session(t) + "-cfg"
	for _, bad := range []struct {
		name, msg string
		cfg       signals.SessionConfig
	}{
		{"grace_window not a duration", `grace_window "soon"`, signals.SessionConfig{GraceWindow: "soon"}},
		{"grace_window without a unit", `grace_window "15"`, signals.SessionConfig{GraceWindow: "15"}},
		{"turn_deadline negative", `turn_deadline "-5m"`, signals.SessionConfig{TurnDeadline: "-5m"}},
		{"turn_deadline past time.Duration with the activity slack", `turn_deadline "2562047h47m"`, signals.SessionConfig{TurnDeadline: "2562047h47m"}},
		{"permission_timeout zero", `permission_timeout "0s"`, signals.SessionConfig{PermissionTimeout: "0s"}},
		{"policy unknown", `policy "yolo"`, signals.SessionConfig{Policy: "yolo"}},
		{"sharing unknown", `sharing "public"`, signals.SessionConfig{Access: signals.Access{Sharing: "public"}}},
		{"owner not a name", `owner "deck:alice"`, signals.SessionConfig{Access: signals.Access{Owner: "deck:alice"}}},
		{"share with no role", `role "admin"`, signals.SessionConfig{Access: signals.Access{SharedWith: []signals.Share{{Who: "bob", Role: "admin"}}}}},
	} {
		cfg := bad.cfg
		cfg.SessionID = fresh
		noSession = append(noSession, badCase{"config with " + bad.name, signals.RejectInvalidRequest, bad.msg, func(ctx context.Context) error {
			_, err := sc.Prompt(ctx, cfg, signals.PromptRequest{Text: "hi"})
			return err
		}})
	}
	// So is a prompt the session would refuse: no session is started only to hold the refusal.
	for _, bad := range []struct {
		name, msg string
		req       signals.PromptRequest
	}{
		{"empty text", "empty", signals.PromptRequest{Text: " \n"}},
		{"text over MaxTextBytes", "limit", signals.PromptRequest{Text: strings.Repeat("x", signals.MaxTextBytes+1)}},
		{"a client_message_id over MaxClientIDBytes", "client_message_id", signals.PromptRequest{Text: "hi", ClientMessageID: strings.Repeat("c", signals.MaxClientIDBytes+1)}},
		{"content that is no array", "content", signals.PromptRequest{Content: json.RawMessage(`{"type":"text"}`)}},
		{"a by over MaxByBytes", "by: at most", signals.PromptRequest{Text: "hi", By: strings.Repeat("b", signals.MaxByBytes+1)}},
	} {
		req := bad.req
		noSession = append(noSession, badCase{"prompt with " + bad.name, signals.RejectInvalidRequest, bad.msg, func(ctx context.Context) error {
			_, err := sc.Prompt(ctx, signals.SessionConfig{SessionID: fresh}, req)
			return err
		}})
	}
	for _, c := range noSession {
		t.Run(c.name, func(t *testing.T) {
			checkRefused(t, c, c.do(ctxFor(t, 30*time.Second)))
			for _, sid := range []string{unknown, fresh} {
				_, err := tc.DescribeWorkflowExecution(ctxFor(t, 10*time.Second), signals.SessionWorkflowID(sid), "")
				var nf *serviceerror.NotFound
				require.True(t, errors.As(err, &nf), "no workflow started for %s: %v", sid, err)
			}
		})
	}
	// The id refused with a bad config takes a good one.
	prompt(t, signals.SessionConfig{SessionID: fresh}, "/chunks 1")
	turnEnd(t, fresh, 1)

	// A client that skips the check (Update-with-Start by hand, as another language would)
	// gets the reason for its prompt, not "unknown update".
	raw := session(t) + "-raw"
	start := tc.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: signals.SessionWorkflowID(raw), TaskQueue: signals.DefaultTaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, signals.SessionWorkflowType, signals.SessionConfig{SessionID: raw, TurnDeadline: "an hour"})
	h, err := tc.UpdateWithStartWorkflow(ctxFor(t, 30*time.Second), client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: signals.UpdatePrompt, WaitForStage: client.WorkflowUpdateStageCompleted,
			Args: []any{signals.PromptRequest{Text: "hi", ClientMessageID: "m1"}}},
	})
	if err == nil {
		err = h.Get(ctxFor(t, 30*time.Second), nil)
	}
	checkRefused(t, badCase{want: signals.RejectInvalidRequest, msg: `invalid session config: invalid turn_deadline "an hour"`}, err)
}

// safeName makes a subtest name of an arbitrary id.
func safeName(s string) string { return fmt.Sprintf("%.10q", s) }

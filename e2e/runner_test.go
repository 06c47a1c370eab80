package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
)

// steeringAgent is the testagent advertising and honouring _session/steering.
// steeringAgent is the profile of the test agent with the steering extension.
func steeringAgent() string { return profileSteering }

func steer(t *testing.T, id, token, text, msgID string) (signals.SteerResult, error) {
	t.Helper()
	return sc.Steer(ctxFor(t, 30*time.Second), id, signals.SteerRequest{Text: text, ExpectedTurnID: token, ClientMsgID: msgID})
}

func requireRejection(t *testing.T, err error, typ string) *signals.Rejection {
	t.Helper()
	rej, ok := rejection.As(err)
	require.True(t, ok, "want %s, got %v", typ, err)
	require.Equal(t, typ, rej.Type)
	return rej
}

// delivered waits for n steer.delivered events and returns their data.
func delivered(t *testing.T, id string, n int) []signals.SteerDeliveredData {
	t.Helper()
	var out []signals.SteerDeliveredData
	waitFor(t, id, func(ev signals.Event) bool {
		if ev.Kind == signals.EventSteerDelivered {
			var d signals.SteerDeliveredData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			out = append(out, d)
		}
		return len(out) == n
	})
	return out
}

func TestSteerVocabularyAndChainedTokens(t *testing.T) {
	t.Parallel()
	id := session(t)
	prompt(t, signals.SessionConfig{SessionID: id, Agent: steeringAgent()}, "/sleep 60s")
	waitRunning(t, id, 1)

	rej := requireRejection(t, func() error { _, err := steer(t, id, "0", "x", "a"); return err }(), signals.RejectStaleTurn)
	require.Equal(t, signals.StaleTurnDetails{Expected: "0", Actual: "1"}, rej.Details)

	res, err := steer(t, id, "1", "go left", "s1")
	require.NoError(t, err)
	require.Equal(t, signals.SteerResult{Outcome: "accepted", Ref: signals.SteerRef{TurnID: 1, Offset: 1, ClientMsgID: "s1"}, NextExpectedTurnID: "1.1"}, res)
	res, err = steer(t, id, "1.1", "now right", "s2")
	require.NoError(t, err)
	require.Equal(t, "1.2", res.NextExpectedTurnID)

	dup, err := steer(t, id, "1", "go left", "s1")
	require.NoError(t, err)
	require.Equal(t, "duplicate", dup.Outcome)
	require.Equal(t, signals.SteerRef{TurnID: 1, Offset: 1, ClientMsgID: "s1"}, dup.Ref)
	requireRejection(t, func() error { _, err := steer(t, id, "1.2", "other text", "s1"); return err }(), signals.RejectClientMsgIDReuse)
	rej = requireRejection(t, func() error { _, err := steer(t, id, "1.1", "late", "s3"); return err }(), signals.RejectStaleTurn)
	require.Equal(t, signals.StaleTurnDetails{Expected: "1.1", Actual: "1.2"}, rej.Details)

	for _, d := range delivered(t, id, 2) {
		require.Equal(t, signals.HowInjected, d.How, "the agent advertises _session/steering")
	}
	// The agent saw both steers inside the running turn.
	waitFor(t, id, func(ev signals.Event) bool { return strings.Contains(string(ev.Data), "steered: now right") })
	_, err = sc.Cancel(ctxFor(t, 10*time.Second), id, signals.CancelRequest{})
	require.NoError(t, err)
	checkInvariants(t, turnEnd(t, id, 1))
}

func TestSteerInterruptAndContinueWithoutTheExtension(t *testing.T) {
	t.Parallel()
	id := session(t)
	prompt(t, signals.SessionConfig{SessionID: id}, "/sleep 60s")
	waitRunning(t, id, 1)
	_, err := steer(t, id, "1", "/echo\nsteered by interrupt", "i1")
	require.NoError(t, err)
	require.Equal(t, []signals.SteerDeliveredData{{Offset: 1, How: signals.HowInterrupted}}, delivered(t, id, 1))
	// The turn goes on with the steer text as a prompt and ends normally.
	evs := turnEnd(t, id, 1)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind)
	require.Equal(t, "end_turn", data["stop_reason"])
	texts := strings.Join(agentTexts(t, evs, 1), "")
	require.True(t, strings.HasSuffix(texts, "steered by interrupt"), texts)
	checkInvariants(t, allEvents(t, id))
}

func TestSteeringSwitchedOffIsNoSteerChannel(t *testing.T) {
	t.Parallel()
	id := session(t)
	off := false
	prompt(t, signals.SessionConfig{SessionID: id, Steering: &off}, "/sleep 60s")
	waitRunning(t, id, 1)
	requireRejection(t, func() error { _, err := steer(t, id, "1", "x", ""); return err }(), signals.RejectNoSteerChannel)
	_, err := sc.Cancel(ctxFor(t, 10*time.Second), id, signals.CancelRequest{})
	require.NoError(t, err)
	turnEnd(t, id, 1)
}

func TestCancelIsDeliveredIntoTheTurn(t *testing.T) {
	t.Parallel()
	id := session(t)
	prompt(t, signals.SessionConfig{SessionID: id}, "/sleep 60s")
	waitRunning(t, id, 1)
	_, err := sc.Cancel(ctxFor(t, 10*time.Second), id, signals.CancelRequest{})
	require.NoError(t, err)
	evs := turnEnd(t, id, 1)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind)
	require.Equal(t, "cancelled", data["stop_reason"])
	// After session/cancel the agent streamed at most a tick or two more (one in flight, one
	// in the batch being flushed): delivery, not the heartbeat, carried the cancel. Behaviour,
	// not a timing assertion: /sleep ticks every 100 ms, and a cancel carried only by the
	// activity's cancellation waits for a heartbeat's answer, seconds in which the agent
	// streams on.
	var after int
	seen := false
	for _, ev := range evs {
		if ev.Kind == signals.EventTurnCancelling {
			seen = true
		} else if seen && ev.Kind == signals.EventAgentUpdate {
			after++
		}
	}
	require.True(t, seen, "turn.cancelling is journaled")
	t.Logf("%d chunks after turn.cancelling", after)
	require.LessOrEqual(t, after, maxChunksAfterCancel, "chunks after turn.cancelling: the cancel was not delivered into the turn")
}

// maxChunksAfterCancel is how many /sleep ticks may follow turn.cancelling when the cancel is
// delivered: one the agent wrote as the cancel reached it, one in the batch being flushed.
const maxChunksAfterCancel = 3

// permissionRequested waits for the first permission.requested of session id.
func permissionRequested(t *testing.T, id string) signals.PermissionRequestedData {
	t.Helper()
	return permissionRequestedIn(t, id, 0)
}

// permissionRequestedIn waits for the first permission.requested of turn (any turn if 0).
func permissionRequestedIn(t *testing.T, id string, turn int64) signals.PermissionRequestedData {
	t.Helper()
	var d signals.PermissionRequestedData
	waitFor(t, id, func(ev signals.Event) bool {
		if ev.Kind != signals.EventPermissionRequested || (turn != 0 && ev.TurnID != turn) {
			return false
		}
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		return true
	})
	return d
}

func TestPermissionIsAskedAnsweredAndDelivered(t *testing.T) {
	t.Parallel()
	id := session(t)
	ctx := ctxFor(t, 60*time.Second)
	prompt(t, signals.SessionConfig{SessionID: id}, "/permission edit")
	req := permissionRequested(t, id)
	require.Len(t, req.Options, 3)

	st, err := sc.Status(ctx, id)
	require.NoError(t, err)
	require.Equal(t, signals.StateSuspended, st.State)
	require.Len(t, st.PendingPermissions, 1)
	require.Equal(t, "edit", st.PendingPermissions[0].Kind)
	// Visibility finds it among the sessions waiting for a person.
	require.Eventually(t, func() bool {
		list, err := sc.ListAwaitingApproval(ctx, 0)
		require.NoError(t, err)
		for _, s := range list {
			if s.SessionID == id {
				return s.AwaitingApproval && s.State == signals.StateSuspended
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond)

	_, err = sc.PermissionRespond(ctx, id, signals.PermissionRespondRequest{RequestID: "nope", OptionID: "allow"})
	requireRejection(t, err, signals.RejectUnknownRequest)
	_, err = sc.PermissionRespond(ctx, id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: "bogus"})
	requireRejection(t, err, signals.RejectInvalidOption)

	res, err := sc.PermissionRespond(ctx, id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: "allow"})
	require.NoError(t, err)
	want := signals.PermissionResolution{RequestID: req.RequestID, Outcome: "selected", OptionID: "allow", DecidedBy: "user"}
	require.Equal(t, want, res.Resolution)
	// A later answer gets the existing resolution back and changes nothing.
	again, err := sc.PermissionRespond(ctx, id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: "reject"})
	require.NoError(t, err)
	require.Equal(t, want, again.Resolution)

	evs := turnEnd(t, id, 1)
	require.Contains(t, strings.Join(agentTexts(t, evs, 1), ""), "permission: selected allow")
	// The request is journaled after the tool call it is about.
	var order []string
	for _, ev := range evs {
		switch {
		case ev.Kind == signals.EventAgentUpdate && strings.Contains(string(ev.Data), `"tool_call"`):
			order = append(order, "tool_call")
		case ev.Kind == signals.EventPermissionRequested, ev.Kind == signals.EventPermissionResolved:
			order = append(order, ev.Kind)
		}
	}
	require.Equal(t, []string{"tool_call", "permission.requested", "permission.resolved"}, order)
	checkInvariants(t, allEvents(t, id))
}

func TestCancelResolvesOpenPermissionsCancelled(t *testing.T) {
	t.Parallel()
	id := session(t)
	prompt(t, signals.SessionConfig{SessionID: id}, "/permission execute")
	req := permissionRequested(t, id)
	_, err := sc.Cancel(ctxFor(t, 10*time.Second), id, signals.CancelRequest{})
	require.NoError(t, err)
	evs := turnEnd(t, id, 1)
	var res signals.PermissionResolution
	for _, ev := range evs {
		if ev.Kind == signals.EventPermissionResolved {
			require.NoError(t, json.Unmarshal(ev.Data, &res))
		}
	}
	require.Equal(t, signals.PermissionResolution{RequestID: req.RequestID, Outcome: "cancelled", DecidedBy: "cancel", Reason: "user"}, res)
	_, data := terminalData(t, evs)
	require.Equal(t, "cancelled", data["stop_reason"])
}

func TestAgentProcessIsReusedAcrossTurns(t *testing.T) {
	t.Parallel()
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	prompt(t, cfg, "/chunks 1")
	turnEnd(t, id, 1)
	pid := worker.Host.AgentPID(id)
	require.NotZero(t, pid)
	prompt(t, cfg, "/chunks 1")
	turnEnd(t, id, 2)
	require.Equal(t, pid, worker.Host.AgentPID(id), "the same agent process served both turns")
}

func TestUsageIsJournaled(t *testing.T) {
	t.Parallel()
	id := session(t)
	prompt(t, signals.SessionConfig{SessionID: id}, "/usage")
	evs := turnEnd(t, id, 1)
	var usage map[string]any
	for _, ev := range evs {
		if ev.Kind == signals.EventUsageUpdated {
			require.NoError(t, json.Unmarshal(ev.Data, &usage))
		}
	}
	require.NotNil(t, usage, "usage.updated")
	st, err := sc.Status(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	require.EqualValues(t, 38, st.Usage["totalTokens"])
	require.EqualValues(t, 5, st.Usage["cachedReadTokens"], "every field the agent reports")
	require.EqualValues(t, 3, st.Usage["thoughtTokens"])
	require.Equal(t, map[string]any{"used": float64(30), "size": float64(200000)}, st.Usage["context"], "the usage_update's gauge, the latest")
}

func TestPermissionPoliciesWithTheRealAgent(t *testing.T) {
	t.Parallel()
	id := session(t)
	ctx := ctxFor(t, 60*time.Second)
	cfg := signals.SessionConfig{SessionID: id, Policy: "allow_all"}
	prompt(t, cfg, "/permission execute")
	evs := turnEnd(t, id, 1)
	require.Contains(t, strings.Join(agentTexts(t, evs, 1), ""), "permission: selected allow", "allow_all answered at once")

	_, err := sc.SetPolicy(ctx, id, signals.SetPolicyRequest{Level: "ask_always"})
	require.NoError(t, err)
	prompt(t, cfg, "/permission edit")
	req := permissionRequestedIn(t, id, 2)
	_, err = sc.PermissionRespond(ctx, id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: "allow_always"})
	require.NoError(t, err)
	turnEnd(t, id, 2)
	st, err := sc.Status(ctx, id)
	require.NoError(t, err)
	require.Equal(t, []string{"tool:Edit"}, st.Rules, "the tool the tool_call named, not the one file")

	// The remembered tool is allowed by rule, on another file too: nobody is asked.
	prompt(t, cfg, "/permission edit other.go")
	evs = turnEnd(t, id, 3)
	require.Contains(t, strings.Join(agentTexts(t, evs, 3), ""), "permission: selected allow_always")
	var deciders []string
	for _, ev := range evs {
		if ev.Kind == signals.EventPermissionResolved && ev.TurnID == 3 {
			var r signals.PermissionResolution
			require.NoError(t, json.Unmarshal(ev.Data, &r))
			deciders = append(deciders, r.DecidedBy)
		}
	}
	require.Equal(t, []string{"rule"}, deciders)
}

func TestExpiredPermissionAnswersTheAgentWithItsRejectOption(t *testing.T) {
	t.Parallel()
	id := session(t)
	prompt(t, signals.SessionConfig{SessionID: id, PermissionTimeout: "1s"}, "/permission delete")
	evs := turnEnd(t, id, 1)
	require.Contains(t, strings.Join(agentTexts(t, evs, 1), ""), "permission: selected reject", "fail closed")
}

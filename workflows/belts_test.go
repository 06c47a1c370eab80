package workflows

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// Belts, permissions and policies under the test environment's skipped time.

func permissionSignal(turn int64, id, kind string) signals.PermissionRequestedSignal {
	tc, _ := json.Marshal(map[string]any{"toolCallId": "call_1", "title": kind + " something", "kind": kind})
	return signals.PermissionRequestedSignal{TurnID: turn, Attempt: 1, RequestID: id, ToolCall: tc, Options: []signals.PermissionOption{
		{OptionID: "allow", Name: "Allow once", Kind: "allow_once"},
		{OptionID: "allow_always", Name: "Always allow", Kind: "allow_always"},
		{OptionID: "reject", Name: "Reject", Kind: "reject_once"},
	}}
}

func resolutions(t *testing.T, evs []signals.Event) []signals.PermissionResolution {
	t.Helper()
	var out []signals.PermissionResolution
	for _, ev := range evs {
		if ev.Kind == signals.EventPermissionResolved {
			var r signals.PermissionResolution
			require.NoError(t, json.Unmarshal(ev.Data, &r))
			out = append(out, r)
		}
	}
	return out
}

func (h *harness) finishTurn(turn int64, reason string) {
	h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: turn, StopReason: reason})
}

func TestSession_PolicyLevelsRulesAndForget(t *testing.T) {
	h := newHarness(t)
	h.step(func() { h.prompt("work", "m1", func(signals.PromptResult, error) {}) })
	h.step(func() {
		// ask_for_risky (default): a read passes, an edit is asked.
		h.env.SignalWorkflow(signals.SignalPermissionRequested, permissionSignal(1, "p1", "read"))
		h.env.SignalWorkflow(signals.SignalPermissionRequested, permissionSignal(1, "p2", "edit"))
	})
	h.step(func() {
		st := h.status()
		require.Equal(t, signals.StateSuspended, st.State)
		require.Nil(t, st.TurnDeadline, "the turn clock is paused while a permission waits")
		require.Len(t, st.PendingPermissions, 1)
		h.update(signals.UpdatePermissionRespond, signals.PermissionRespondRequest{RequestID: "p2", OptionID: "allow_always"}, func(res any, err error) {
			require.NoError(t, err)
			require.True(t, res.(signals.PermissionRespondResult).Resolution.Remember)
		})
	})
	h.step(func() {
		st := h.status()
		require.Equal(t, []string{"edit:edit something"}, st.Rules)
		require.NotNil(t, st.TurnDeadline, "the clock runs again")
		// A remembered tool resolves by rule; ask_always asks anything else.
		h.update(signals.UpdateSetPolicy, signals.SetPolicyRequest{Level: "ask_always"}, func(_ any, err error) { require.NoError(t, err) })
		h.update(signals.UpdateSetPolicy, signals.SetPolicyRequest{Level: "sometimes"}, func(_ any, err error) {
			require.Equal(t, signals.RejectInvalidRequest, rejectionType(t, err))
		})
	})
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalPermissionRequested, permissionSignal(1, "p3", "edit"))
		h.env.SignalWorkflow(signals.SignalPermissionRequested, permissionSignal(1, "p4", "read"))
	})
	h.step(func() {
		require.Len(t, h.status().PendingPermissions, 1, "p4 (a read) is asked under ask_always")
		h.update(signals.UpdatePermissionForget, signals.PermissionForgetRequest{Tool: "edit:edit something"}, func(res any, err error) {
			require.NoError(t, err)
			require.True(t, res.(signals.PermissionForgetResult).Forgotten)
		})
		h.update(signals.UpdateSetPolicy, signals.SetPolicyRequest{Level: "allow_all"}, func(_ any, err error) { require.NoError(t, err) })
	})
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalPermissionRequested, permissionSignal(1, "p5", "execute"))
	})
	h.step(func() {
		want := []signals.PermissionResolution{
			{RequestID: "p1", Outcome: "selected", OptionID: "allow", DecidedBy: "policy"},
			{RequestID: "p2", Outcome: "selected", OptionID: "allow_always", DecidedBy: "user", Remember: true},
			{RequestID: "p3", Outcome: "selected", OptionID: "allow_always", DecidedBy: "rule"},
			{RequestID: "p5", Outcome: "selected", OptionID: "allow", DecidedBy: "policy"},
		}
		require.Equal(t, want, resolutions(t, h.events()))
		kinds := kinds(h.events())
		require.Contains(t, kinds, signals.EventPolicyChanged)
		require.Contains(t, kinds, signals.EventPermissionForgotten)
		require.Empty(t, h.status().Rules)
		h.finishTurn(1, "end_turn")
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
	// p4 was still open when the turn ended: resolved cancelled.
	last := resolutions(t, h.events())
	require.Equal(t, signals.PermissionResolution{RequestID: "p4", Outcome: "cancelled", DecidedBy: "cancel", Reason: "turn ended"}, last[len(last)-1])
}

func TestSession_AskedPermissionExpiresFailingClosed(t *testing.T) {
	h := newHarness(t)
	h.step(func() { h.prompt("work", "m1", func(signals.PromptResult, error) {}) })
	h.step(func() { h.env.SignalWorkflow(signals.SignalPermissionRequested, permissionSignal(1, "p1", "execute")) })
	h.env.RegisterDelayedCallback(func() {
		require.Equal(t, []signals.PermissionResolution{{RequestID: "p1", Outcome: "expired", OptionID: "reject", DecidedBy: "deadline"}}, resolutions(t, h.events()))
		require.Equal(t, signals.StateRunning, h.status().State)
		// A late answer gets the existing resolution back.
		h.update(signals.UpdatePermissionRespond, signals.PermissionRespondRequest{RequestID: "p1", OptionID: "allow"}, func(res any, err error) {
			require.NoError(t, err)
			require.Equal(t, "expired", res.(signals.PermissionRespondResult).Resolution.Outcome)
		})
		h.finishTurn(1, "end_turn")
	}, 11*time.Minute)
	h.at = 12 * time.Minute
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1", PermissionTimeout: "10m"}))
}

func TestSession_TurnDeadlineCountsWorkingTimeOnly(t *testing.T) {
	h := newHarness(t)
	h.step(func() { h.prompt("work", "m1", func(signals.PromptResult, error) {}) })
	// At 5 min a permission is asked and answered 20 min later: the clock stood still.
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(signals.SignalPermissionRequested, permissionSignal(1, "p1", "edit")) }, 5*time.Minute)
	h.env.RegisterDelayedCallback(func() {
		h.update(signals.UpdatePermissionRespond, signals.PermissionRespondRequest{RequestID: "p1", OptionID: "allow"}, func(_ any, err error) { require.NoError(t, err) })
	}, 25*time.Minute)
	h.env.RegisterDelayedCallback(func() {
		require.Equal(t, signals.StateRunning, h.status().State, "only ~9 minutes of work so far")
	}, 29*time.Minute)
	h.env.RegisterDelayedCallback(func() {
		// The test environment ends a cancelled activity at once: the turn has passed
		// through cancelling (asserted on the journal below) to its end.
		require.Equal(t, signals.StateIdle, h.status().State, "10 minutes of work: the deadline cancelled the turn")
	}, 32*time.Minute)
	h.at = 33 * time.Minute
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1", TurnDeadline: "10m", PermissionTimeout: "1h"}))
	evs := h.events()
	var cancelling, failed signals.Event
	for _, ev := range evs {
		switch ev.Kind {
		case signals.EventTurnCancelling:
			cancelling = ev
		case signals.EventTurnFailed:
			failed = ev
		}
	}
	require.JSONEq(t, `{"reason":"deadline"}`, string(cancelling.Data))
	require.Contains(t, string(failed.Data), "deadline")
}

func TestSession_GraceAfterTheLastViewerLeaves(t *testing.T) {
	h := newHarness(t)
	attach := func(id, role string, lease int) {
		h.update(signals.UpdateAttach, signals.AttachRequest{ViewerID: id, Role: role, LeaseSeconds: lease}, func(_ any, err error) { require.NoError(t, err) })
	}
	h.step(func() {
		attach("v1", "controller", 600)
		h.prompt("work", "m1", func(signals.PromptResult, error) {})
	})
	h.step(func() {
		h.update(signals.UpdateDetach, signals.DetachRequest{ViewerID: "v1"}, func(_ any, err error) { require.NoError(t, err) })
	})
	h.step(func() {
		require.Equal(t, signals.StateGrace, h.status().State)
		attach("v2", "observer", 30) // inside the window: grace is cancelled; its lease lapses in 30 s
	})
	h.env.RegisterDelayedCallback(func() {
		require.Equal(t, signals.StateGrace, h.status().State, "the observer's lease lapsed: grace again")
	}, 2*time.Minute)
	h.env.RegisterDelayedCallback(func() {
		// The test environment ends a cancelled activity at once (the journal below shows
		// turn.cancelling before turn.ended).
		require.Equal(t, signals.StateIdle, h.status().State, "grace_window passed: the turn is cancelled")
	}, 20*time.Minute)
	h.at = 21 * time.Minute
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1", GraceWindow: "15m"}))
	var got []string
	for _, ev := range h.events() {
		switch ev.Kind {
		case signals.EventViewerGraceStarted, signals.EventViewerGraceCancelled, signals.EventTurnCancelling, signals.EventTurnEnded:
			got = append(got, ev.Kind)
		}
	}
	require.Equal(t, []string{"viewer.grace_started", "viewer.grace_cancelled", "viewer.grace_started", "turn.cancelling", "turn.ended"}, got)
}

func TestSession_ObserversCanWatchButNotAct(t *testing.T) {
	h := newHarness(t)
	h.step(func() {
		h.update(signals.UpdateAttach, signals.AttachRequest{ViewerID: "o1", Role: "observer", LeaseSeconds: 600}, func(_ any, err error) { require.NoError(t, err) })
		h.update(signals.UpdateAttach, signals.AttachRequest{ViewerID: "o2", Role: "boss", LeaseSeconds: 600}, func(_ any, err error) {
			require.Equal(t, signals.RejectInvalidRequest, rejectionType(t, err))
		})
	})
	h.step(func() {
		h.update(signals.UpdatePrompt, signals.PromptRequest{Text: "x", ClientMessageID: "m0", ViewerID: "o1"}, func(_ any, err error) {
			require.Equal(t, signals.RejectForbidden, rejectionType(t, err))
		})
		h.prompt("work", "m1", func(signals.PromptResult, error) {})
	})
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalPermissionRequested, permissionSignal(1, "p1", "edit"))
		h.update(signals.UpdateSteer, signals.SteerRequest{Text: "x", ExpectedTurnID: "1", ViewerID: "o1"}, func(_ any, err error) {
			require.Equal(t, signals.RejectForbidden, rejectionType(t, err))
		})
		h.update(signals.UpdateCancel, signals.CancelRequest{ViewerID: "o1"}, func(_ any, err error) {
			require.Equal(t, signals.RejectForbidden, rejectionType(t, err))
		})
	})
	h.step(func() {
		h.update(signals.UpdatePermissionRespond, signals.PermissionRespondRequest{RequestID: "p1", OptionID: "allow", ViewerID: "o1"}, func(_ any, err error) {
			require.Equal(t, signals.RejectForbidden, rejectionType(t, err))
		})
		st := h.status()
		require.Equal(t, []signals.Viewer{{ViewerID: "o1", Role: "observer", LeaseUntil: st.Viewers[0].LeaseUntil}}, st.Viewers)
		h.finishTurn(1, "end_turn")
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
}

func TestSession_ContinueAsNewWhileAPermissionWaitsKeepsItsDeadline(t *testing.T) {
	h := newHarness(t)
	h.step(func() {
		h.update(signals.UpdateAttach, signals.AttachRequest{ViewerID: "v1", Role: "controller", LeaseSeconds: 3600}, func(_ any, err error) { require.NoError(t, err) })
		h.prompt("work", "m1", func(signals.PromptResult, error) {})
	})
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 1, HostQueue: "host1"})
		h.env.SignalWorkflow(signals.SignalPermissionRequested, permissionSignal(1, "p1", "execute"))
	})
	h.step(func() { h.env.SetContinueAsNewSuggested(true) })
	next := canInput(t, h.run(signals.SessionConfig{SessionID: "s1", PermissionTimeout: "10m"}))

	h2 := newHarness(t)
	h2.step(func() {
		st := h2.status()
		require.Equal(t, signals.StateSuspended, st.State)
		require.Len(t, st.PendingPermissions, 1)
		require.Len(t, st.Viewers, 1)
	})
	// The deadline was armed in run 1 for t0+10m; run 2 re-arms it from the absolute time.
	h2.env.RegisterDelayedCallback(func() {
		require.Equal(t, []signals.PermissionResolution{{RequestID: "p1", Outcome: "expired", OptionID: "reject", DecidedBy: "deadline"}}, resolutions(t, h2.events()))
		h2.finishTurn(1, "end_turn")
	}, 11*time.Minute)
	h2.at = 12 * time.Minute
	h2.closeSession()
	require.NoError(t, h2.run(next))
}

// Reference: issue 15 — a restarted turn's re-asked permission can be answered by the id an
// operator holds, and turn.restarted says why the attempt was given up.
func TestSession_AWithdrawnRequestIsAnsweredThroughTheOneAskedAgain(t *testing.T) {
	h := newHarness(t)
	h.step(func() { h.prompt("work", "m1", func(signals.PromptResult, error) {}) })
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: 1, Attempt: 1, HostQueue: "host-a"})
		h.env.SignalWorkflow(signals.SignalPermissionRequested, permissionSignal(1, "p1.1.1", "edit"))
	})
	h.step(func() {
		require.Len(t, h.status().PendingPermissions, 1)
		// Attempt 1 is lost; attempt 2 asks the same thing again under a new id.
		sig := permissionSignal(1, "p1.2.1", "edit")
		sig.Attempt = 2
		h.env.SignalWorkflow(signals.SignalPermissionRequested, sig)
	})
	h.step(func() {
		st := h.status()
		require.Len(t, st.PendingPermissions, 1)
		require.Equal(t, "p1.2.1", st.PendingPermissions[0].RequestID)
		require.Equal(t, []string{"p1.1.1"}, st.PendingPermissions[0].Replaces)
		h.update(signals.UpdatePermissionRespond, signals.PermissionRespondRequest{RequestID: "p1.1.1", OptionID: "allow"}, func(res any, err error) {
			require.NoError(t, err)
			r := res.(signals.PermissionRespondResult)
			require.Equal(t, "p1.2.1", r.RequestID)
			require.Equal(t, signals.PermissionResolution{RequestID: "p1.2.1", Outcome: "selected", OptionID: "allow", DecidedBy: "user", Via: "p1.1.1"}, r.Resolution)
		})
	})
	h.step(func() {
		require.Empty(t, h.status().PendingPermissions)
		evs := h.events()
		res := resolutions(t, evs)
		require.Equal(t, signals.DecidedByRestart, res[0].DecidedBy)
		require.Contains(t, res[0].Reason, "attempt 1 on host-a")
		for _, ev := range evs {
			if ev.Kind == signals.EventTurnRestarted {
				var d signals.TurnStartedData
				require.NoError(t, json.Unmarshal(ev.Data, &d))
				require.Contains(t, d.Cause, "attempt 1 on host-a stopped reporting")
			}
		}
		h.finishTurn(1, "end_turn")
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
}

// claude-agent-acp names its tools only on the tool_call update (_meta.claudeCode.toolName);
// its permission request carries kind and a title naming the file or command. The runner
// passes the name along (PermissionRequestedSignal.ToolName), and "always allow" remembers
// the tool, not the one file.
func TestSession_AllowAlwaysRemembersTheToolTheRunnerNamed(t *testing.T) {
	h := newHarness(t)
	edit := func(id, file string) signals.PermissionRequestedSignal {
		sig := permissionSignal(1, id, "edit")
		sig.ToolCall, _ = json.Marshal(map[string]any{"toolCallId": "toolu_" + id, "title": "Edit " + file, "kind": "edit"})
		sig.ToolName = "Edit"
		return sig
	}
	h.step(func() { h.prompt("work", "m1", func(signals.PromptResult, error) {}) })
	h.step(func() { h.env.SignalWorkflow(signals.SignalPermissionRequested, edit("p1", "a.go")) })
	h.step(func() {
		h.update(signals.UpdatePermissionRespond, signals.PermissionRespondRequest{RequestID: "p1", OptionID: "allow_always"}, func(_ any, err error) {
			require.NoError(t, err)
		})
	})
	h.step(func() {
		require.Equal(t, []string{"tool:Edit"}, h.status().Rules)
		h.env.SignalWorkflow(signals.SignalPermissionRequested, edit("p2", "b.go"))
	})
	h.step(func() {
		res := resolutions(t, h.events())
		require.Equal(t, signals.PermissionResolution{RequestID: "p2", Outcome: "selected", OptionID: "allow_always", DecidedBy: "rule"}, res[len(res)-1],
			"another file, the same tool: decided by the rule")
		h.finishTurn(1, "end_turn")
	})
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))
}

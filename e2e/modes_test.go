package e2e

// The session's policy is the agent's ceiling, end to end (docs/real-agents.md, "What each
// policy does to each agent"): a testagent that answers initialize as claude-agent-acp and
// starts its sessions in acceptEdits, as Claude Code starts in auto, is put in its asking
// mode before every prompt, on the first worker and on the one that takes the session after
// a kill -9; an editor's self-deciding mode is refused until the policy is allow_all; one
// that will not leave its mode gets no prompt.

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
	"github.com/tacp-dev/tacp/tacpclient"
)

// claudeLike is a testagent that answers initialize as claude-agent-acp does and starts
// every session in acceptEdits, a mode in which it decides by itself.
func claudeLike(flags ...string) string {
	return testAgentCmd(append([]string{"-settings", "-initial-mode", "acceptEdits", "-name", "@agentclientprotocol/claude-agent-acp"}, flags...)...)
}

func TestAnAskingPolicyPutsEveryAgentProcessInItsAskingMode(t *testing.T) {
	t.Parallel()
	queue := "tacp-modes-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	roots := "TACP_E2E_ROOTS=" + strings.Join(suiteRoots(), string(filepath.ListSeparator))
	first := startWorkerProcess(t, queue, "TACP_E2E_AGENT="+claudeLike(), roots)
	a := startACP(t, "--task-queue", queue)
	ctx := ctxFor(t, 180*time.Second)
	id := a.newSession()
	require.Equal(t, "settings mode=default model=sonnet", a.said(id, "/settings"), "put in its asking mode before the prompt")

	// An editor's self-deciding mode is refused under ask_for_risky, naming allow_all; a
	// mode that asks or does not act is taken.
	before := allEvents(t, id)
	_, err := a.conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: acp.SessionId(id), ModeId: "acceptEdits"})
	require.ErrorContains(t, err, "Forbidden")
	require.ErrorContains(t, err, "allow_all")
	_, err = a.conn.SetSessionConfigOption(ctx, acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{SessionId: acp.SessionId(id), ConfigId: "mode", Value: "acceptEdits"}})
	require.ErrorContains(t, err, "allow_all")
	out, err := starterCmd(ctx, "mode", "--session", id, "--task-queue", queue, "acceptEdits").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "allow_all")
	require.Equal(t, len(before), len(allEvents(t, id)), "a refusal journals nothing")

	// allow_all, set by a person, lets the editor choose it; the agent has it.
	out, err = starterCmd(ctx, "policy", "--session", id, "--task-queue", queue, "--as", "ann", "allow_all").CombinedOutput()
	require.NoError(t, err, "%s", out)
	_, err = a.conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: acp.SessionId(id), ModeId: "acceptEdits"})
	require.NoError(t, err)
	require.Equal(t, "settings mode=acceptEdits model=sonnet", a.said(id, "/settings"))

	// Back to an asking policy: the agent is put back in its asking mode, and so is the new
	// agent process of the worker that takes the session after a kill -9.
	_, err = qc.SetPolicy(ctx, id, signals.SetPolicyRequest{Level: signals.PolicyAskAlways, By: "bob"})
	require.NoError(t, err)
	a.waitUpdate(modeIs("default"))
	startWorkerProcess(t, queue, "TACP_E2E_AGENT="+claudeLike(), roots)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	require.Equal(t, "settings mode=default model=sonnet", a.said(id, "/settings"))
	out, err = starterCmd(ctx, "status", "--session", id, "--task-queue", queue).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "policy    ask_always · agent mode default (modes that ask: default, plan)\n")

	var trail []string
	for _, ev := range allEvents(t, id) {
		switch ev.Kind {
		case signals.EventPolicyChanged, signals.EventModeChanged:
			var d map[string]any
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			editors := ev.Kind == signals.EventModeChanged && d["by_policy"] == nil
			require.Equal(t, editors, d["viewer_id"] != nil, "the editor's change names its viewer")
			if editors {
				by, _ := d["by"].(string)
				require.True(t, strings.HasPrefix(by, "acp:"), "the editor's change names its client: %q", by)
				delete(d, "by")
			}
			delete(d, "viewer_id")
			b, _ := json.Marshal(d)
			trail = append(trail, ev.Kind+" "+string(b))
		}
	}
	require.Equal(t, []string{
		`policy.changed {"by":"ann","level":"allow_all","previous":"ask_for_risky"}`,
		`mode.changed {"mode_id":"acceptEdits","previous":"default"}`,
		`policy.changed {"by":"bob","level":"ask_always","previous":"allow_all"}`,
		`mode.changed {"by_policy":true,"mode_id":"default","previous":"acceptEdits"}`,
	}, trail)
	checkInvariants(t, allEvents(t, id))
}

// An agent that stays in a mode in which it decides by itself gets no prompt under an
// asking policy: the turn fails closed, naming the mode and the fix; allow_all lets it run.
func TestAnAgentThatWillNotAskGetsNoPrompt(t *testing.T) {
	t.Parallel()
	queue := "tacp-modes-stuck-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	startWorkerProcess(t, queue, "TACP_E2E_AGENT="+claudeLike("-ignore-set-mode"))
	id := session(t)
	ctx := ctxFor(t, 120*time.Second)
	_, err := qc.Prompt(ctx, signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "/settings", ClientMessageID: "m1"})
	require.NoError(t, err)
	evs := turnEnd(t, id, 1)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnFailed, kind)
	msg, _ := data["error"].(string)
	for _, want := range []string{`"acceptEdits"`, "ask_for_risky", "no prompt was sent", "starter policy allow_all"} {
		require.Contains(t, msg, want)
	}
	require.Empty(t, agentTexts(t, evs, 1), "the agent was never prompted")

	_, err = qc.SetPolicy(ctx, id, signals.SetPolicyRequest{Level: signals.PolicyAllowAll})
	require.NoError(t, err)
	_, err = qc.Prompt(ctx, signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "/settings", ClientMessageID: "m2"})
	require.NoError(t, err)
	evs = turnEnd(t, id, 2)
	kind, data = terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind, "%v", data)
	require.Equal(t, "settings mode=acceptEdits model=sonnet", strings.Join(agentTexts(t, evs, 2), ""))
}

// A profile whose operator forbids allow_all (a managed team's ceiling): an allow_all
// session is lowered to ask_for_risky before its agent acts, journaled; allow_all is refused
// after; `starter profiles` says so.
func TestAProfileThatForbidsAllowAllKeepsItsSessionsAsking(t *testing.T) {
	t.Parallel()
	queue := "tacp-modes-ceiling-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	no := false
	profile, err := json.Marshal(activities.Profile{Name: "managed", Command: claudeLike(), AllowAll: &no})
	require.NoError(t, err)
	startWorkerProcess(t, queue, "TACP_E2E_PROFILE="+string(profile))
	ctx := ctxFor(t, 120*time.Second)
	out, err := starterCmd(ctx, "profiles", "--task-queue", queue).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "policy: at most ask_for_risky (allow_all forbidden by the worker's operator)")

	id := session(t)
	_, err = qc.Prompt(ctx, signals.SessionConfig{SessionID: id, Agent: "managed", Policy: signals.PolicyAllowAll}, signals.PromptRequest{Text: "/settings", ClientMessageID: "m1"})
	require.NoError(t, err)
	evs := turnEnd(t, id, 1)
	require.Equal(t, "settings mode=default model=sonnet", strings.Join(agentTexts(t, evs, 1), ""))
	var lowered bool
	for _, ev := range evs {
		lowered = lowered || (ev.Kind == signals.EventPolicyChanged && strings.Contains(string(ev.Data), `"level":"ask_for_risky","previous":"allow_all"`))
	}
	require.True(t, lowered, "the ceiling's change is journaled")
	_, err = qc.SetPolicy(ctx, id, signals.SetPolicyRequest{Level: signals.PolicyAllowAll})
	rej, ok := rejection.As(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, signals.RejectForbidden, rej.Type)
}

package e2e

// A mode and a model chosen together, through `starter acp` in front of Claude Code: both
// stand, turn after turn and across a kill -9 of the worker. claude-agent-acp answers
// set_mode with a config_option_update that still lists the old model (tacp sets the model
// next); that answer is not a change of the agent's, so it must not undo the model.

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/internal/testkit/fakemodel"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

// modelOf is the model the agent asked for when it answered text (its last main request
// carrying it).
func (w *realAgentWorker) modelOf(t *testing.T, text string) string {
	t.Helper()
	model := ""
	for _, r := range w.fm.MainRequests() {
		if r.Contains("user", text) {
			model = r.Model
		}
	}
	require.NotEmpty(t, model, "no model request carried %q", text)
	return model
}

// otherValue is a value of the session's config option id other than its current one.
func otherValue(t *testing.T, st signals.Status, id string) (current, other string) {
	t.Helper()
	require.NotNil(t, st.AgentSettings)
	for _, raw := range st.AgentSettings.ConfigOptions {
		var o acp.SessionConfigOption
		require.NoError(t, json.Unmarshal(raw, &o))
		if o.Select == nil || string(o.Select.Id) != id || o.Select.Options.Ungrouped == nil {
			continue
		}
		// Claude's "default" is an alias of one of the others: prefer a model that is
		// surely another (sonnet, haiku) to the first other value.
		for _, want := range []string{"sonnet", "haiku", ""} {
			for _, v := range *o.Select.Options.Ungrouped {
				if v.Value != o.Select.CurrentValue && strings.Contains(string(v.Value), want) {
					return string(o.Select.CurrentValue), string(v.Value)
				}
			}
		}
	}
	t.Fatalf("the agent offers no second value of %q: %s", id, st.AgentSettings.ConfigOptions)
	return "", ""
}

func TestRealAgentClaudeModeAndModelChosenTogetherStand(t *testing.T) {
	t.Parallel()
	w := startRealAgentWorker(t, fakemodel.Claude)
	queue := "tacp-real-settings-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	roots := "TACP_E2E_ROOTS=" + strings.Join([]string{filepath.Join(w.dataDir, "workspaces"), filepath.Join(binDir, "projects")}, string(filepath.ListSeparator))
	first := startWorkerProcess(t, queue, "TACP_E2E_AGENT="+w.cmdline, "TACP_E2E_DATA="+w.dataDir, roots)
	ctx := ctxFor(t, 8*time.Minute)

	a := startACP(t, "--task-queue", queue)
	res, err := a.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: projectDir(t), McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	id := string(res.SessionId)
	replied(t, "turn one", a.said(id, "reply: turn one"))
	before := w.modelOf(t, "reply: turn one")
	st, err := qc.Status(ctx, id)
	require.NoError(t, err)
	_, chosen := otherValue(t, st, signals.ConfigModel)

	// Between turns, as an editor does: the mode, then the model.
	_, err = a.conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: acp.SessionId(id), ModeId: "plan"})
	require.NoError(t, err)
	_, err = a.conn.SetSessionConfigOption(ctx, acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{SessionId: acp.SessionId(id), ConfigId: signals.ConfigModel, Value: acp.SessionConfigValueId(chosen)}})
	require.NoError(t, err)

	replied(t, "turn two", a.said(id, "reply: turn two"))
	after := w.modelOf(t, "reply: turn two")
	require.NotEqual(t, before, after, "the chosen model %q reached the model API", chosen)
	replied(t, "turn three", a.said(id, "reply: turn three"))
	require.Equal(t, after, w.modelOf(t, "reply: turn three"), "the choice stands for the next turn")

	// kill -9: the next worker's agent gets the mode and the model re-applied.
	startWorkerProcess(t, queue, "TACP_E2E_AGENT="+w.cmdline, "TACP_E2E_DATA="+w.dataDir, roots)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	replied(t, "turn four", a.said(id, "reply: turn four"))
	require.Equal(t, after, w.modelOf(t, "reply: turn four"), "the choice survives the failover")
	st, err = qc.Status(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "plan", st.AgentSettings.CurrentModeID)
	current, _ := otherValue(t, st, signals.ConfigModel)
	require.Equal(t, chosen, current, "the session's view keeps the chosen model")
}

// replied checks that the agent's text of a turn is the reply asked for. Claude Code may
// follow it with a notice of its own (`_meta.claudeCode.kind: informational`: its auto mode's
// classifier billing, when a model that offers auto mode is chosen behind a gateway).
func replied(t *testing.T, want, said string) {
	t.Helper()
	require.True(t, strings.HasPrefix(said, want), "want %q, said %q", want, said)
}

package e2e

// What the agent offers, end to end (contract §10): editors (acp-go-sdk clients through
// `starter acp`) pick a mode and a model, they reach the agent, survive a kill -9 of the
// worker (the new agent process gets them re-applied before its first prompt), and every
// attached client sees the change; refusals journal nothing; MCP servers from session/new
// reach the agent's session/new after the worker's policy; session/close closes.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

// settingsWorker runs a worker process on queue whose default agent offers modes and
// config options (testagent -settings -commands) and that takes http MCP servers.
func settingsWorker(t *testing.T, queue string) *os.Process {
	t.Helper()
	cmd := startWorkerProcess(t, queue,
		"TACP_E2E_AGENT="+testAgentCmd("-settings", "-commands"),
		"TACP_E2E_MCP=http",
		"TACP_E2E_ROOTS="+strings.Join(suiteRoots(), string(filepath.ListSeparator)),
	)
	return cmd.Process
}

// waitUpdate waits until the client got an update that match accepts.
func (p *acpPeer) waitUpdate(match func(acp.SessionUpdate) bool) {
	p.t.Helper()
	require.Eventually(p.t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return slices.ContainsFunc(p.updates, func(n acp.SessionNotification) bool { return match(n.Update) })
	}, 60*time.Second, 20*time.Millisecond)
}

func modeIs(id string) func(acp.SessionUpdate) bool {
	return func(u acp.SessionUpdate) bool {
		return u.CurrentModeUpdate != nil && string(u.CurrentModeUpdate.CurrentModeId) == id
	}
}

// said prompts and returns the agent's text of that turn.
func (p *acpPeer) said(id, text string) string {
	p.t.Helper()
	before := len(p.texts(false))
	res, err := p.prompt(id, text)
	require.NoError(p.t, err)
	require.Equal(p.t, acp.StopReasonEndTurn, res.StopReason)
	return strings.Join(p.texts(false)[before:], "")
}

func TestACPSettingsReachTheAgentSurviveAKillAndReachEveryClient(t *testing.T) {
	t.Parallel()
	queue := "tacp-settings-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	first := settingsWorker(t, queue)
	a := startACP(t, "--task-queue", queue)
	ctx := ctxFor(t, 180*time.Second)

	// A stdio MCP server is refused: this worker takes http ones only. Nothing is stored.
	_, err := a.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: editorCwd(), McpServers: []acp.McpServer{
		{Stdio: &acp.McpServerStdio{Name: "tools", Command: "/bin/sh", Args: []string{}, Env: []acp.EnvVariable{}}},
	}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "not one this worker's operator listed")

	res, err := a.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: editorCwd(), McpServers: []acp.McpServer{
		{Http: &acp.McpServerHttpInline{Name: "docs", Type: "http", Url: "http://127.0.0.1:1/mcp", Headers: []acp.HttpHeader{}}},
	}})
	require.NoError(t, err)
	id := string(res.SessionId)
	require.Equal(t, "settings mode=default model=sonnet", a.said(id, "/settings"))
	require.Equal(t, "mcp: http:docs", a.said(id, "/mcp"), "the editor's MCP servers reach the agent's session/new")
	a.waitUpdate(modeIs("default")) // the agent's offer, sent when its first turn reported it

	// A second editor resumes: it is answered with the modes and options, and gets the
	// slash commands at once.
	b := startACP(t, "--task-queue", queue)
	rb, err := b.conn.ResumeSession(ctx, acp.ResumeSessionRequest{SessionId: acp.SessionId(id), Cwd: editorCwd()})
	require.NoError(t, err)
	require.NotNil(t, rb.Modes)
	require.Equal(t, acp.SessionModeId("default"), rb.Modes.CurrentModeId)
	require.Len(t, rb.ConfigOptions, 2)
	b.waitUpdate(func(u acp.SessionUpdate) bool { return u.AvailableCommandsUpdate != nil })

	// Refused: a mode or value the agent does not offer, and anything from an observer.
	before := allEvents(t, id)
	_, err = a.conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: acp.SessionId(id), ModeId: "dontAsk"})
	require.ErrorContains(t, err, "not offered")
	_, err = a.conn.SetSessionConfigOption(ctx, acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{SessionId: acp.SessionId(id), ConfigId: "model", Value: "gpt-9"}})
	require.ErrorContains(t, err, "no value")
	o := startACP(t, "--task-queue", queue, "--observe")
	_, err = o.conn.ResumeSession(ctx, acp.ResumeSessionRequest{SessionId: acp.SessionId(id), Cwd: editorCwd()})
	require.NoError(t, err)
	_, err = o.conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: acp.SessionId(id), ModeId: "plan"})
	require.ErrorContains(t, err, "Forbidden")
	require.Equal(t, len(before), len(allEvents(t, id)), "a refusal journals nothing")

	// The editor picks plan and opus: every attached client sees it, the agent has it.
	_, err = a.conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: acp.SessionId(id), ModeId: "plan"})
	require.NoError(t, err)
	set, err := a.conn.SetSessionConfigOption(ctx, acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{SessionId: acp.SessionId(id), ConfigId: "model", Value: "opus"}})
	require.NoError(t, err)
	require.Equal(t, acp.SessionConfigValueId("opus"), set.ConfigOptions[1].Select.CurrentValue)
	b.waitUpdate(modeIs("plan"))
	o.waitUpdate(modeIs("plan"))
	b.waitUpdate(func(u acp.SessionUpdate) bool {
		return u.ConfigOptionUpdate != nil && slices.ContainsFunc(u.ConfigOptionUpdate.ConfigOptions, func(c acp.SessionConfigOption) bool {
			return c.Select != nil && c.Select.Id == "model" && c.Select.CurrentValue == "opus"
		})
	})
	require.Equal(t, "settings mode=plan model=opus", a.said(id, "/settings"))

	// The CLI reads and changes the same state.
	out, err := starterCmd(ctx, "mode", "--session", id, "--task-queue", queue, "--json").Output()
	require.NoError(t, err)
	require.Contains(t, string(out), `"current_mode_id":"plan"`)
	_, err = starterCmd(ctx, "mode", "--session", id, "--task-queue", queue, "nope").Output()
	require.Error(t, err, "an unknown mode is refused")
	out, err = starterCmd(ctx, "config", "--session", id, "--task-queue", queue, "model", "opus").Output()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "model = opus\n", string(out), "setting the value it has changes nothing")

	// kill -9 the worker: the next one's agent process loads the session and gets the
	// mode and model re-applied before its first prompt.
	settingsWorker(t, queue)
	require.NoError(t, first.Signal(syscall.SIGKILL))
	_, _ = first.Wait()
	require.Equal(t, "settings mode=plan model=opus", a.said(id, "/settings"))
	st, err := qc.Status(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "plan", st.AgentSettings.CurrentModeID)

	var changed []string
	for _, ev := range allEvents(t, id) {
		switch ev.Kind {
		case signals.EventModeChanged, signals.EventConfigOptionChanged:
			var d map[string]any
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			changed = append(changed, ev.Kind)
		}
	}
	require.Equal(t, []string{signals.EventModeChanged, signals.EventConfigOptionChanged}, changed)

	// session/close closes the session.
	_, err = a.conn.CloseSession(ctx, acp.CloseSessionRequest{SessionId: acp.SessionId(id)})
	require.NoError(t, err)
	waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventSessionClosed })
	checkInvariants(t, allEvents(t, id))
}

// initialize advertises what the worker learned of its agent at its last start (before any
// start: nothing, and --prompt-capabilities overrides it); authenticate says what the
// operator must set; the legacy session/set_model maps to the model config option, and an
// observer's is refused; the MCP servers of session/load and session/resume become the
// session's.
func TestACPInitializeAdvertisesTheWorkersAgentAndSetModelIsTheModelOption(t *testing.T) {
	t.Parallel()
	queue := "tacp-caps-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	settingsWorker(t, queue)
	ctx := ctxFor(t, 120*time.Second)

	a := startACP(t, "--task-queue", queue)
	first, err := a.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	require.NoError(t, err)
	require.Equal(t, acp.PromptCapabilities{}, first.AgentCapabilities.PromptCapabilities, "the worker has not started its agent yet")
	res, err := a.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: editorCwd(), McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	id := string(res.SessionId)
	require.Equal(t, "settings mode=default model=sonnet", a.said(id, "/settings"))
	st, err := qc.Status(ctx, id)
	require.NoError(t, err)
	require.JSONEq(t, `{"image":true,"embeddedContext":true}`, string(st.AgentSettings.PromptCapabilities))

	b := startACP(t, "--task-queue", queue)
	learned, err := b.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	require.NoError(t, err)
	require.Equal(t, acp.PromptCapabilities{Image: true, EmbeddedContext: true}, learned.AgentCapabilities.PromptCapabilities)
	require.Equal(t, acp.McpCapabilities{Http: true, Sse: true}, learned.AgentCapabilities.McpCapabilities, "this worker takes http MCP servers")
	require.Empty(t, learned.AuthMethods, "an agent that opened a session on the worker needs no client to authenticate")
	// A new session is answered with the agent's modes and options before its agent runs:
	// the offer the worker learned from the first session's first turn.
	fresh, err := b.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: editorCwd(), McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	require.NotNil(t, fresh.Modes, "the editor's mode picker is not empty at the start")
	require.Equal(t, acp.SessionModeId("default"), fresh.Modes.CurrentModeId)
	require.Len(t, fresh.Modes.AvailableModes, 3)
	require.Len(t, fresh.ConfigOptions, 2)
	_, err = b.conn.Authenticate(ctx, acp.AuthenticateRequest{MethodId: "api-key"})
	require.ErrorContains(t, err, "the worker's operator must")

	over := startACP(t, "--task-queue", queue, "--prompt-capabilities", "none")
	forced, err := over.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	require.NoError(t, err)
	require.Equal(t, acp.PromptCapabilities{}, forced.AgentCapabilities.PromptCapabilities, "--prompt-capabilities overrides")

	// session/set_model (legacy) is the model config option.
	_, err = a.conn.UnstableSetSessionModel(ctx, acp.UnstableSetSessionModelRequest{SessionId: acp.SessionId(id), ModelId: "gpt-9"})
	require.ErrorContains(t, err, "no value")
	o := startACP(t, "--task-queue", queue, "--observe")
	_, err = o.conn.ResumeSession(ctx, acp.ResumeSessionRequest{SessionId: acp.SessionId(id), Cwd: editorCwd()})
	require.NoError(t, err)
	_, err = o.conn.UnstableSetSessionModel(ctx, acp.UnstableSetSessionModelRequest{SessionId: acp.SessionId(id), ModelId: "opus"})
	require.ErrorContains(t, err, "Forbidden")
	_, err = o.conn.SetSessionConfigOption(ctx, acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{SessionId: acp.SessionId(id), ConfigId: "model", Value: "opus"}})
	require.ErrorContains(t, err, "Forbidden")
	_, err = a.conn.UnstableSetSessionModel(ctx, acp.UnstableSetSessionModelRequest{SessionId: acp.SessionId(id), ModelId: "opus"})
	require.NoError(t, err)
	o.waitUpdate(func(u acp.SessionUpdate) bool {
		return u.ConfigOptionUpdate != nil && slices.ContainsFunc(u.ConfigOptionUpdate.ConfigOptions, func(c acp.SessionConfigOption) bool {
			return c.Select != nil && c.Select.Id == "model" && c.Select.CurrentValue == "opus"
		})
	})
	require.Equal(t, "settings mode=default model=opus", a.said(id, "/settings"))

	// The project's MCP servers, sent on every load and resume, become the session's: the
	// live agent loads its session again with them (the model chosen is re-applied); a
	// stdio one this worker does not allow fails the load and changes nothing.
	require.Equal(t, "mcp: ", a.said(id, "/mcp"))
	_, err = b.conn.ResumeSession(ctx, acp.ResumeSessionRequest{SessionId: acp.SessionId(id), Cwd: editorCwd(), McpServers: []acp.McpServer{
		{Http: &acp.McpServerHttpInline{Name: "docs", Type: "http", Url: "http://127.0.0.1:1/mcp", Headers: []acp.HttpHeader{}}},
	}})
	require.NoError(t, err)
	_, err = b.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: acp.SessionId(id), Cwd: editorCwd(), McpServers: []acp.McpServer{
		{Stdio: &acp.McpServerStdio{Name: "tools", Command: "/bin/sh", Args: []string{}, Env: []acp.EnvVariable{}}},
	}})
	require.ErrorContains(t, err, "not one this worker's operator listed")
	require.Equal(t, "mcp: http:docs", a.said(id, "/mcp"))
	require.Equal(t, "settings mode=default model=opus", a.said(id, "/settings"))
	_, err = a.conn.CloseSession(ctx, acp.CloseSessionRequest{SessionId: acp.SessionId(id)})
	require.NoError(t, err)
}

package e2e

// The ACP face end to end: `starter acp` (the real binary) as the agent of ACP clients
// built on acp-go-sdk's client side, over real stdio pipes, against the in-process server
// and worker with the real testagent behind the sessions.

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// acpPeer is an ACP client connected to a `starter acp` process.
type acpPeer struct {
	t    *testing.T
	cmd  *exec.Cmd
	conn *acp.ClientSideConnection

	mu      sync.Mutex
	updates []acp.SessionNotification
	asked   []acp.RequestPermissionRequest
	// answer decides permission requests; nil leaves them waiting until withdrawn.
	answer    func(acp.RequestPermissionRequest) acp.RequestPermissionResponse
	withdrawn int
}

// startACP starts `starter acp args...` and connects an ACP client to it.
func startACP(t *testing.T, args ...string) *acpPeer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	return connectACP(t, starterCmd(ctx, append([]string{"acp"}, args...)...), cancel)
}

// connectACP starts cmd, an ACP agent on stdio that cancel stops, and connects an ACP client
// to it.
func connectACP(t *testing.T, cmd *exec.Cmd, cancel context.CancelFunc) *acpPeer {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &testLog{t: t, prefix: "starter acp: "}
	require.NoError(t, cmd.Start())
	p := &acpPeer{t: t, cmd: cmd}
	p.conn = acp.NewClientSideConnection(p, stdin, stdout)
	t.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cancel()
			<-done
		}
		cancel()
	})
	res, err := p.conn.Initialize(ctxFor(t, 30*time.Second), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	require.NoError(t, err)
	require.True(t, res.AgentCapabilities.LoadSession)
	return p
}

// testLog writes a process's stderr to the test log.
type testLog struct {
	t      *testing.T
	prefix string
}

func (l *testLog) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.t.Log(l.prefix + line)
	}
	return len(p), nil
}

func (p *acpPeer) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	p.mu.Lock()
	p.updates = append(p.updates, n)
	p.mu.Unlock()
	return nil
}

func (p *acpPeer) RequestPermission(ctx context.Context, r acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	p.mu.Lock()
	p.asked = append(p.asked, r)
	answer := p.answer
	p.mu.Unlock()
	if answer != nil {
		return answer(r), nil
	}
	<-ctx.Done()
	p.mu.Lock()
	p.withdrawn++
	p.mu.Unlock()
	return acp.RequestPermissionResponse{}, ctx.Err()
}

func (p *acpPeer) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsReadTextFile)
}

func (p *acpPeer) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsWriteTextFile)
}

func (p *acpPeer) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalCreate)
}

func (p *acpPeer) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalKill)
}

func (p *acpPeer) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalOutput)
}

func (p *acpPeer) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalRelease)
}

func (p *acpPeer) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalWaitForExit)
}

// newSession creates a session through the gateway.
func (p *acpPeer) newSession() string {
	p.t.Helper()
	res, err := p.conn.NewSession(ctxFor(p.t, 30*time.Second), acp.NewSessionRequest{Cwd: editorCwd(), McpServers: []acp.McpServer{}})
	require.NoError(p.t, err)
	return string(res.SessionId)
}

func (p *acpPeer) load(id string) error {
	_, err := p.conn.LoadSession(ctxFor(p.t, 30*time.Second), acp.LoadSessionRequest{SessionId: acp.SessionId(id), Cwd: editorCwd(), McpServers: []acp.McpServer{}})
	return err
}

func (p *acpPeer) prompt(id, text string) (acp.PromptResponse, error) {
	return p.conn.Prompt(ctxFor(p.t, 90*time.Second), acp.PromptRequest{SessionId: acp.SessionId(id), Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
}

// kinds returns the sessionUpdate kind of every update the client got, in order.
func (p *acpPeer) kinds() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, n := range p.updates {
		b, _ := json.Marshal(n.Update)
		var k struct {
			Kind string `json:"sessionUpdate"`
		}
		_ = json.Unmarshal(b, &k)
		out = append(out, k.Kind)
	}
	return out
}

// texts returns the text of every agent_message_chunk (or user_message_chunk with user).
func (p *acpPeer) texts(user bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, n := range p.updates {
		switch {
		case !user && n.Update.AgentMessageChunk != nil && n.Update.AgentMessageChunk.Content.Text != nil:
			out = append(out, n.Update.AgentMessageChunk.Content.Text.Text)
		case user && n.Update.UserMessageChunk != nil && n.Update.UserMessageChunk.Content.Text != nil:
			out = append(out, n.Update.UserMessageChunk.Content.Text.Text)
		}
	}
	return out
}

func (p *acpPeer) askedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.asked)
}

// gatewayAgent is the agent of sessions the gateway tests create: the testagent with
// steering, so that the steering extensions have a channel.
func gatewayAgent() string { return profileSteering }

func TestACPGatewayStreamsAPromptAndAnswersWithItsStopReason(t *testing.T) {
	t.Parallel()
	p := startACP(t, "--agent", gatewayAgent())
	id := p.newSession()
	res, err := p.prompt(id, "/chunks 5")
	require.NoError(t, err)
	require.Equal(t, acp.StopReasonEndTurn, res.StopReason)
	// Every chunk arrived before the answer, in the journal's order.
	evs := allEvents(t, id)
	require.Equal(t, agentTexts(t, evs, 1), p.texts(false))
	require.Empty(t, p.texts(true), "a client is not shown its own prompt")

	// A second prompt while one runs queues behind it; each answer comes with its turn.
	// The first sleeps long enough to still be running when a loaded machine's status
	// query sees it.
	var wg sync.WaitGroup
	stops := make([]acp.StopReason, 2)
	for i, text := range []string{"/sleep 3s", "second"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := p.prompt(id, text)
			require.NoError(t, err)
			stops[i] = r.StopReason
		}()
		if i == 0 {
			waitRunning(t, id, 2)
		}
	}
	wg.Wait()
	require.Equal(t, []acp.StopReason{acp.StopReasonEndTurn, acp.StopReasonEndTurn}, stops)
	require.Contains(t, strings.Join(p.texts(false), ""), "second")
	checkInvariants(t, allEvents(t, id))

	// session/list finds it.
	list, err := p.conn.ListSessions(ctxFor(t, 30*time.Second), acp.ListSessionsRequest{})
	require.NoError(t, err)
	found := false
	for _, s := range list.Sessions {
		found = found || string(s.SessionId) == id
	}
	require.True(t, found, "session/list lists %s", id)
}

func TestACPTwoClientsWatchOneSessionAndTheFirstAnswerWins(t *testing.T) {
	t.Parallel()
	a := startACP(t, "--agent", gatewayAgent())
	b := startACP(t)
	id := a.newSession()
	require.NoError(t, b.load(id))
	a.mu.Lock()
	a.answer = func(r acp.RequestPermissionRequest) acp.RequestPermissionResponse {
		for _, o := range r.Options {
			if o.Kind == acp.PermissionOptionKindAllowOnce {
				return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(o.OptionId)}
			}
		}
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}
	}
	a.mu.Unlock()
	// b leaves its copy of the request unanswered: it is withdrawn once a's answer wins.
	res, err := a.prompt(id, "/permission edit")
	require.NoError(t, err)
	require.Equal(t, acp.StopReasonEndTurn, res.StopReason)
	require.Equal(t, 1, a.askedCount())
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.asked) == 1 && b.withdrawn == 1
	}, 30*time.Second, 20*time.Millisecond, "b was asked, then the request was withdrawn")
	evs := allEvents(t, id)
	var resolved signals.PermissionResolution
	for _, ev := range evs {
		if ev.Kind == signals.EventPermissionResolved {
			require.NoError(t, json.Unmarshal(ev.Data, &resolved))
		}
	}
	require.Equal(t, "selected", resolved.Outcome)
	// Both saw the whole turn, and the resolution as a tool_call_update.
	require.Eventually(t, func() bool { return len(b.texts(false)) == len(agentTexts(t, evs, 1)) }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, a.texts(false), b.texts(false))
	require.Equal(t, []string{"/permission edit"}, b.texts(true), "b sees a's prompt as the user's message")
	for _, p := range []*acpPeer{a, b} {
		p.mu.Lock()
		n := 0
		for _, u := range p.updates {
			if u.Update.ToolCallUpdate != nil && strings.Contains(string(mustJSON(u.Update.ToolCallUpdate.Meta)), "permission_resolved") {
				n++
			}
		}
		p.mu.Unlock()
		require.Equal(t, 1, n, "the resolution is shown once")
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestACPObserverSeesEverythingAndCanChangeNothing(t *testing.T) {
	t.Parallel()
	a := startACP(t, "--agent", gatewayAgent())
	obs := startACP(t, "--observe")
	id := a.newSession()
	require.NoError(t, obs.load(id))
	before := len(allEvents(t, id))

	_, err := obs.prompt(id, "not allowed")
	requireRPCError(t, err, -32003)
	_, err = obs.conn.NewSession(ctxFor(t, 10*time.Second), acp.NewSessionRequest{Cwd: editorCwd(), McpServers: []acp.McpServer{}})
	requireRPCError(t, err, -32003)
	_, err = obs.conn.CallExtension(ctxFor(t, 10*time.Second), "_tacp/session.steer", map[string]any{"sessionId": id, "text": "x", "expectedTurnId": "1"})
	requireRPCError(t, err, -32003)
	require.Len(t, allEvents(t, id), before, "nothing reached the journal")

	_, err = a.prompt(id, "/chunks 3")
	require.NoError(t, err)
	want := agentTexts(t, allEvents(t, id), 1)
	require.Eventually(t, func() bool { return len(obs.texts(false)) == len(want) }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, want, obs.texts(false))
}

func requireRPCError(t *testing.T, err error, code int) {
	t.Helper()
	require.Error(t, err)
	var re *acp.RequestError
	require.ErrorAs(t, err, &re)
	require.Equal(t, code, re.Code, "error: %v", err)
}

func TestACPClientThatDisconnectsMidTurnSeesTheWholeTurnOnLoad(t *testing.T) {
	t.Parallel()
	a := startACP(t, "--agent", gatewayAgent())
	id := a.newSession()
	done := make(chan error, 1)
	go func() {
		_, err := a.prompt(id, "/chunks 30 every 50ms")
		done <- err
	}()
	require.Eventually(t, func() bool { return len(a.texts(false)) >= 3 }, 60*time.Second, 10*time.Millisecond)
	// The editor goes away mid-turn.
	require.NoError(t, a.cmd.Process.Kill())
	<-done

	evs := turnEnd(t, id, 1)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind)
	require.Equal(t, "end_turn", data["stop_reason"], "a disconnect never cancels the turn")
	require.Len(t, agentTexts(t, evs, 1), 30)

	b := startACP(t)
	require.NoError(t, b.load(id))
	require.Equal(t, []string{"/chunks 30 every 50ms"}, b.texts(true))
	require.Equal(t, agentTexts(t, allEvents(t, id), 1), b.texts(false), "the replay holds the whole turn, in order")
	require.Equal(t, "user_message_chunk", b.kinds()[0])

	// session/resume goes live without a replay.
	c := startACP(t)
	_, err := c.conn.ResumeSession(ctxFor(t, 30*time.Second), acp.ResumeSessionRequest{SessionId: acp.SessionId(id), Cwd: editorCwd()})
	require.NoError(t, err)
	res, err := c.prompt(id, "after")
	require.NoError(t, err)
	require.Equal(t, acp.StopReasonEndTurn, res.StopReason)
	require.Equal(t, "after", strings.Join(c.texts(false), ""))
}

func TestACPSteeringExtensions(t *testing.T) {
	t.Parallel()
	p := startACP(t, "--agent", gatewayAgent())
	id := p.newSession()
	ctx := ctxFor(t, 60*time.Second)
	// No turn runs: _session/steering starts one.
	raw, err := p.conn.CallExtension(ctx, "_session/steering", map[string]any{"sessionId": id, "prompt": "steered-new"})
	require.NoError(t, err)
	require.JSONEq(t, `{"outcome":"startedNewTurn"}`, string(raw))
	turnEnd(t, id, 1)

	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := p.prompt(id, "/sleep 5s")
		require.NoError(t, err)
	}()
	st := waitRunning(t, id, 2)
	raw, err = p.conn.CallExtension(ctx, "_session/steering", map[string]any{"sessionId": id, "prompt": "go left"})
	require.NoError(t, err)
	require.JSONEq(t, `{"outcome":"injected"}`, string(raw))

	// _tacp/session.steer speaks the whole CAS vocabulary: the old token is stale now.
	raw, err = p.conn.CallExtension(ctx, "_tacp/session.steer", map[string]any{"sessionId": id, "text": "go right", "expectedTurnId": st.SteerToken, "clientMsgId": "m1"})
	require.NoError(t, err)
	var stale struct {
		Outcome string                   `json:"outcome"`
		Details signals.StaleTurnDetails `json:"details"`
	}
	require.NoError(t, json.Unmarshal(raw, &stale))
	require.Equal(t, "stale_turn", stale.Outcome)
	require.Equal(t, "2.1", stale.Details.Actual)
	for range 2 {
		raw, err = p.conn.CallExtension(ctx, "_tacp/session.steer", map[string]any{"sessionId": id, "text": "go right", "expectedTurnId": "2.1", "clientMsgId": "m1"})
		require.NoError(t, err)
	}
	var dup struct {
		Outcome string           `json:"outcome"`
		Ref     signals.SteerRef `json:"ref"`
		Next    string           `json:"nextExpectedTurnId"`
	}
	require.NoError(t, json.Unmarshal(raw, &dup))
	require.Equal(t, "duplicate", dup.Outcome)
	require.Equal(t, signals.SteerRef{TurnID: 2, Offset: 2, ClientMsgID: "m1"}, dup.Ref)
	require.Equal(t, "2.2", dup.Next)
	require.NoError(t, p.conn.Cancel(ctx, acp.CancelNotification{SessionId: acp.SessionId(id)}))
	<-done
	require.Contains(t, p.texts(false), "steered: go left")
}

func TestACPBadInputGetsJSONRPCErrorsAndChangesNothing(t *testing.T) {
	t.Parallel()
	p := startACP(t, "--agent", gatewayAgent())
	id := p.newSession()
	requireRPCError(t, p.load("no-such-session-"+signals.NewID()), -32002)
	requireRPCError(t, p.load("bad id!"), -32602)
	_, err := p.conn.Prompt(ctxFor(t, 10*time.Second), acp.PromptRequest{SessionId: acp.SessionId(id), Prompt: []acp.ContentBlock{acp.ImageBlock("aGVsbG8=", "image/png")}})
	requireRPCError(t, err, -32602)
	_, err = p.prompt(id, strings.Repeat("x", signals.MaxTextBytes+1))
	requireRPCError(t, err, -32602)
	require.Len(t, allEvents(t, id), 1, "only session.started: nothing was queued")

	// Malformed JSON-RPC on a raw connection: errors, and the connection keeps working.
	ctx := ctxFor(t, 60*time.Second)
	cmd := starterCmd(ctx, "acp")
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 1<<20)
	send := func(s string) map[string]any {
		_, err := io.WriteString(in, s+"\n")
		require.NoError(t, err)
		require.True(t, lines.Scan(), "an answer to %s", s)
		var m map[string]any
		require.NoError(t, json.Unmarshal(lines.Bytes(), &m))
		return m
	}
	code := func(m map[string]any) float64 { return m["error"].(map[string]any)["code"].(float64) }
	require.Equal(t, -32700.0, code(send(`{"jsonrpc":"2.0","id":1,"method":`)))
	require.Equal(t, -32600.0, code(send(`[]`)), "an empty batch is an invalid request")
	require.Equal(t, -32600.0, code(send(`[{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":1}}]`)), "batches are refused")
	require.Equal(t, -32600.0, code(send(`{"jsonrpc":"2.0"}`)))
	require.Equal(t, -32601.0, code(send(`{"jsonrpc":"2.0","id":2,"method":"no/such"}`)))
	require.Equal(t, -32602.0, code(send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":7}}`)))
	ok := send(`{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":1}}`)
	require.Nil(t, ok["error"])
	require.Equal(t, 4.0, ok["id"])
}

func TestACPClientThatNeverReadsStallsNothingElse(t *testing.T) {
	t.Parallel()
	a := startACP(t, "--agent", gatewayAgent())
	id := a.newSession()
	// A client that loads the session and then never reads its stdout: its pipe fills.
	ctx := ctxFor(t, 120*time.Second)
	cmd := starterCmd(ctx, "acp")
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	_, err = cmd.StdoutPipe() // never read
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i, m := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"` + id + `","cwd":"/","mcpServers":[]}}`,
	} {
		_, err := io.WriteString(in, m+"\n")
		require.NoError(t, err, "message %d", i)
	}
	// Far more than a pipe buffer of updates.
	res, err := a.prompt(id, "/chunks 600 stamp")
	require.NoError(t, err)
	require.Equal(t, acp.StopReasonEndTurn, res.StopReason)
	require.Len(t, a.texts(false), 600)
	res, err = a.prompt(id, "still fine")
	require.NoError(t, err)
	require.Equal(t, acp.StopReasonEndTurn, res.StopReason)
}

// $/cancel_request on a running session/prompt cancels that prompt's turn, as session/cancel
// would; one that names a prompt that has ended cancels nothing, so the session's next turn
// runs to its end. Raw JSON-RPC: the Go SDK's client sends a session/cancel of its own with
// it, which would hide a $/cancel_request the gateway ignored.
func TestACPCancelRequestCancelsThePromptsTurn(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t, 90*time.Second)
	cmd := starterCmd(ctx, "acp", "--agent", gatewayAgent())
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &testLog{t: t, prefix: "starter acp: "}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 1<<20)
	send := func(s string) {
		_, err := io.WriteString(in, s+"\n")
		require.NoError(t, err)
	}
	// answer reads until the response to id (notifications in between are skipped).
	answer := func(id float64) map[string]any {
		for lines.Scan() {
			var m map[string]any
			require.NoError(t, json.Unmarshal(lines.Bytes(), &m))
			if m["id"] == id && m["method"] == nil {
				require.Nil(t, m["error"], "%s", lines.Bytes())
				return m["result"].(map[string]any)
			}
		}
		t.Fatalf("no answer to request %v", id)
		return nil
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	answer(1)
	cwd, _ := json.Marshal(editorCwd())
	send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":` + string(cwd) + `,"mcpServers":[]}}`)
	id := answer(2)["sessionId"].(string)

	send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"` + id + `","prompt":[{"type":"text","text":"/sleep 60s"}]}}`)
	waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventTurnStarted })
	send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}`)
	require.Equal(t, "cancelled", answer(3)["stopReason"], "the prompt's turn was cancelled, not left to sleep")

	// A late $/cancel_request of the ended prompt while the next one runs: nothing happens.
	send(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"` + id + `","prompt":[{"type":"text","text":"/chunks 3"}]}}`)
	send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}`)
	require.Equal(t, "end_turn", answer(4)["stopReason"])
}

// A client that asks for a protocol newer than 1 (claude-agent-acp and codex-acp already
// speak a draft 2) is answered 1, the version tacp speaks.
func TestACPClientAskingForProtocolTwoGetsOne(t *testing.T) {
	t.Parallel()
	p := startACP(t)
	res, err := p.conn.Initialize(ctxFor(t, 30*time.Second), acp.InitializeRequest{ProtocolVersion: 2})
	require.NoError(t, err)
	require.Equal(t, acp.ProtocolVersion(1), res.ProtocolVersion)
}

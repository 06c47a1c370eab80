package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"
)

// testClient records session updates and answers permission requests with
// the outcome chosen by permit (selected "allow" when nil).
type testClient struct {
	permit func(ctx context.Context, req acp.RequestPermissionRequest) acp.RequestPermissionOutcome

	mu      sync.Mutex
	updates []acp.SessionNotification
	perms   []acp.RequestPermissionRequest
	changed chan struct{} // signalled (non-blocking) on every update
}

func (c *testClient) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	c.mu.Lock()
	c.updates = append(c.updates, n)
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
	return nil
}

func (c *testClient) RequestPermission(ctx context.Context, req acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.perms = append(c.perms, req)
	c.mu.Unlock()
	if c.permit == nil {
		return acp.RequestPermissionResponse{Outcome: selected("allow")}, nil
	}
	return acp.RequestPermissionResponse{Outcome: c.permit(ctx, req)}, nil
}

func (c *testClient) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsReadTextFile)
}

func (c *testClient) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsWriteTextFile)
}

func (c *testClient) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalCreate)
}

func (c *testClient) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalKill)
}

func (c *testClient) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalOutput)
}

func (c *testClient) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalRelease)
}

func (c *testClient) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalWaitForExit)
}

func selected(id string) acp.RequestPermissionOutcome {
	return acp.RequestPermissionOutcome{Selected: &acp.RequestPermissionOutcomeSelected{OptionId: acp.PermissionOptionId(id), Outcome: "selected"}}
}

func cancelledOutcome() acp.RequestPermissionOutcome {
	return acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{Outcome: "cancelled"}}
}

// take returns and clears the recorded updates.
func (c *testClient) take() []acp.SessionNotification {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.updates
	c.updates = nil
	return u
}

// waitFor blocks until an agent message chunk with text appears.
func (c *testClient) waitFor(t *testing.T, text string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		c.mu.Lock()
		for _, n := range c.updates {
			if m := n.Update.AgentMessageChunk; m != nil && m.Content.Text != nil && m.Content.Text.Text == text {
				c.mu.Unlock()
				return
			}
		}
		c.mu.Unlock()
		select {
		case <-c.changed:
		case <-deadline:
			t.Fatalf("no agent message %q", text)
		}
	}
}

// wire is a concurrency-safe copy of everything the agent wrote.
type wire struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *wire) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// lines returns every line the agent wrote so far.
func (w *wire) lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Split(strings.TrimSpace(w.buf.String()), "\n")
}

// updates returns the raw "update" objects of all session/update lines.
func (w *wire) updates(t *testing.T) []map[string]any {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(w.buf.Bytes()))
	for sc.Scan() {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Update map[string]any `json:"update"`
			} `json:"params"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("agent wrote invalid JSON %q: %v", sc.Text(), err)
		}
		if m.Method == acp.ClientMethodSessionUpdate {
			out = append(out, m.Params.Update)
		}
	}
	return out
}

type harness struct {
	conn   *acp.ClientSideConnection
	client *testClient
	wire   *wire // what the agent wrote
	sent   *wire // what the client wrote
	sid    acp.SessionId
}

// start serves an agent in-process over pipes, initializes it and opens a session.
func start(t *testing.T, opts Options) *harness {
	t.Helper()
	h := startNoSession(t, opts)
	resp, err := h.conn.NewSession(context.Background(), acp.NewSessionRequest{Cwd: "/", McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	h.sid = resp.SessionId
	return h
}

func startNoSession(t *testing.T, opts Options) *harness {
	t.Helper()
	if opts.TranscriptDir == "" {
		opts.TranscriptDir = t.TempDir()
	}
	toAgentR, toAgentW := io.Pipe()
	fromAgentR, fromAgentW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), opts, toAgentR, fromAgentW) }()

	h := &harness{client: &testClient{changed: make(chan struct{}, 1)}, wire: &wire{}, sent: &wire{}}
	h.conn = acp.NewClientSideConnection(h.client, io.MultiWriter(toAgentW, h.sent), io.TeeReader(fromAgentR, h.wire))
	t.Cleanup(func() {
		toAgentW.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after the client hung up")
		}
		fromAgentW.Close()
	})
	if _, err := h.conn.Initialize(context.Background(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return h
}

func (h *harness) prompt(t *testing.T, text string) (acp.PromptResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return h.conn.Prompt(ctx, acp.PromptRequest{SessionId: h.sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
}

func (h *harness) mustPrompt(t *testing.T, text string, want acp.StopReason) acp.PromptResponse {
	t.Helper()
	resp, err := h.prompt(t, text)
	if err != nil {
		t.Fatalf("prompt %q: %v", text, err)
	}
	if resp.StopReason != want {
		t.Fatalf("prompt %q: stopReason %q, want %q", text, resp.StopReason, want)
	}
	return resp
}

// texts returns the agent message chunk texts among updates.
func texts(updates []acp.SessionNotification) []string {
	var out []string
	for _, n := range updates {
		if m := n.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
			out = append(out, m.Content.Text.Text)
		}
	}
	return out
}

func wantRequestError(t *testing.T, err error, code int, substr string) {
	t.Helper()
	var re *acp.RequestError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T), want *acp.RequestError", err, err)
	}
	if re.Code != code || !strings.Contains(re.Error(), substr) {
		t.Fatalf("error %v, want code %d mentioning %q", re, code, substr)
	}
}

func TestInitialize(t *testing.T) {
	for _, steering := range []bool{false, true} {
		h := startNoSession(t, Options{Name: "custom", Steering: steering})
		resp, err := h.conn.Initialize(context.Background(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
		if err != nil {
			t.Fatal(err)
		}
		if resp.ProtocolVersion != acp.ProtocolVersionNumber || !resp.AgentCapabilities.LoadSession {
			t.Errorf("initialize = %+v", resp)
		}
		if pc := resp.AgentCapabilities.PromptCapabilities; pc.Image || pc.Audio || pc.EmbeddedContext {
			t.Errorf("prompt capabilities %+v, want all false", pc)
		}
		if resp.AgentInfo == nil || resp.AgentInfo.Name != "custom" || resp.AgentInfo.Version != Version {
			t.Errorf("agentInfo = %+v", resp.AgentInfo)
		}
		got, _ := json.Marshal(resp.Meta)
		want := "null"
		if steering {
			want = `{"steering":{"supported":true}}`
		}
		if string(got) != want {
			t.Errorf("steering=%v: _meta = %s, want %s", steering, got, want)
		}
	}
}

func TestEcho(t *testing.T) {
	h := start(t, Options{})
	for _, tc := range []struct {
		prompt, want string
		chunks       int
	}{
		{"hello world, this is plain text", "hello world, this is plain text", 5},
		{"/echo\nabc", "abc", 3},
		{"/echo\nhéllo wörld ünïcödé ✓\nsecond line", "héllo wörld ünïcödé ✓\nsecond line", 5},
		{"/echo", "", 0},
	} {
		h.mustPrompt(t, tc.prompt, acp.StopReasonEndTurn)
		got := texts(h.client.take())
		if len(got) != tc.chunks || strings.Join(got, "") != tc.want {
			t.Errorf("%q: chunks %q, want %d chunks of %q", tc.prompt, got, tc.chunks, tc.want)
		}
		for _, c := range got {
			if !utf8.ValidString(c) || c == "" {
				t.Errorf("%q: bad chunk %q", tc.prompt, c)
			}
		}
	}
}

func TestChunks(t *testing.T) {
	h := start(t, Options{})
	h.mustPrompt(t, "/chunks 3 every 1ms", acp.StopReasonEndTurn)
	if got, want := strings.Join(texts(h.client.take()), ""), "chunk 1\nchunk 2\nchunk 3\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	begin := time.Now()
	h.mustPrompt(t, "/chunks 4", acp.StopReasonEndTurn) // default 10ms apart
	if d := time.Since(begin); d < 30*time.Millisecond {
		t.Errorf("4 chunks at 10ms took %v", d)
	}
	if got := texts(h.client.take()); len(got) != 4 || got[3] != "chunk 4\n" {
		t.Errorf("got %q", got)
	}
	for _, bad := range []string{"/chunks", "/chunks x", "/chunks 3 every", "/chunks 3 each 1ms", "/chunks 3 every -1s",
		"/chunks stamp", "/chunks 3 stamp every 1ms", "/chunks 3 every 1ms stamp stamp"} {
		_, err := h.prompt(t, bad)
		wantRequestError(t, err, -32602, "/chunks")
	}
}

func TestChunksStamp(t *testing.T) {
	h := start(t, Options{})
	for _, prompt := range []string{"/chunks 3 every 1ms stamp", "/chunks 3 stamp"} {
		before := time.Now().UnixNano()
		h.mustPrompt(t, prompt, acp.StopReasonEndTurn)
		after := time.Now().UnixNano()
		got := texts(h.client.take())
		if len(got) != 3 {
			t.Fatalf("%q: chunks %q, want 3", prompt, got)
		}
		prev := before
		for i, text := range got {
			var n int
			var at int64
			if _, err := fmt.Sscanf(text, "chunk %d @%d\n", &n, &at); err != nil || n != i+1 || text != fmt.Sprintf("chunk %d @%d\n", n, at) {
				t.Fatalf("%q: chunk %d is %q, want \"chunk %d @<unix nanos>\\n\"", prompt, i+1, text, i+1)
			}
			if at < prev || at > after {
				t.Errorf("%q: chunk %d stamped %d, want within [%d, %d] and not before the previous chunk", prompt, n, at, prev, after)
			}
			prev = at
		}
	}
}

func TestSleep(t *testing.T) {
	h := start(t, Options{})
	h.mustPrompt(t, "/sleep 350ms", acp.StopReasonEndTurn)
	if got := texts(h.client.take()); len(got) < 1 || len(got) > 4 || got[0] != "." {
		t.Errorf("got %q, want about 3 dots", got)
	}
}

func TestSleepCancel(t *testing.T) {
	h := start(t, Options{})
	type result struct {
		resp acp.PromptResponse
		err  error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := h.prompt(t, "/sleep 30s")
		res <- result{resp, err}
	}()
	h.client.waitFor(t, ".")
	begin := time.Now()
	if err := h.conn.Cancel(context.Background(), acp.CancelNotification{SessionId: h.sid}); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil || r.resp.StopReason != acp.StopReasonCancelled {
		t.Fatalf("cancelled prompt = %+v, %v; want stopReason cancelled", r.resp, r.err)
	}
	if d := time.Since(begin); d > time.Second {
		t.Errorf("cancel took %v", d)
	}
	// The session is usable again afterwards.
	h.mustPrompt(t, "/echo\nok", acp.StopReasonEndTurn)
}

func TestNewPromptPreemptsRunningTurn(t *testing.T) {
	h := start(t, Options{})
	first := make(chan acp.StopReason, 1)
	go func() {
		resp, err := h.prompt(t, "/sleep 10s")
		if err != nil {
			t.Errorf("first prompt: %v", err)
		}
		first <- resp.StopReason
	}()
	h.client.waitFor(t, ".")
	h.mustPrompt(t, "/echo\nsecond", acp.StopReasonEndTurn)
	if got := <-first; got != acp.StopReasonCancelled {
		t.Errorf("pre-empted turn: stopReason %q, want cancelled", got)
	}
	got := texts(h.client.take())
	if i := slices.Index(got, "s"); i < 1 || strings.Join(got[i:], "") != "second" || slices.Contains(got[i:], ".") {
		t.Errorf("updates %q: want dots, then \"second\" with no overlap", got)
	}
}

func TestPermission(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outcome acp.RequestPermissionOutcome
		status  acp.ToolCallStatus
		text    string
	}{
		{"allow", selected("allow"), acp.ToolCallStatusCompleted, "permission: selected allow"},
		{"allow_always", selected("allow_always"), acp.ToolCallStatusCompleted, "permission: selected allow_always"},
		{"reject", selected("reject"), acp.ToolCallStatusFailed, "permission: selected reject"},
		{"cancelled", cancelledOutcome(), acp.ToolCallStatusFailed, "permission: cancelled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, Options{})
			h.client.permit = func(context.Context, acp.RequestPermissionRequest) acp.RequestPermissionOutcome { return tc.outcome }
			h.mustPrompt(t, "/permission edit", acp.StopReasonEndTurn)
			u := h.client.take()
			if len(u) != 3 {
				t.Fatalf("got %d updates, want tool_call, tool_call_update, message", len(u))
			}
			tcall := u[0].Update.ToolCall
			if tcall == nil || tcall.ToolCallId != "call_1" || tcall.Title != "edit something" ||
				tcall.Kind != acp.ToolKindEdit || tcall.Status != acp.ToolCallStatusPending {
				t.Fatalf("tool_call = %+v", tcall)
			}
			if raw, _ := json.Marshal(tcall.RawInput); string(raw) != `{"path":"README.md"}` {
				t.Errorf("rawInput = %s", raw)
			}
			h.client.mu.Lock()
			req := h.client.perms[0]
			h.client.mu.Unlock()
			var opts []string
			for _, o := range req.Options {
				opts = append(opts, string(o.Kind)+"/"+o.Name+"/"+string(o.OptionId))
			}
			if got := strings.Join(opts, ","); got != "allow_once/Allow once/allow,allow_always/Always allow/allow_always,reject_once/Reject/reject" {
				t.Errorf("options = %s", got)
			}
			if req.ToolCall.ToolCallId != "call_1" || req.SessionId != h.sid {
				t.Errorf("permission request = %+v", req)
			}
			if up := u[1].Update.ToolCallUpdate; up == nil || up.ToolCallId != "call_1" || up.Status == nil || *up.Status != tc.status {
				t.Errorf("tool_call_update = %+v, want status %s", up, tc.status)
			}
			if got := texts(u[2:]); len(got) != 1 || got[0] != tc.text {
				t.Errorf("message %q, want %q", got, tc.text)
			}
		})
	}
}

func TestPermissionCancelledTurn(t *testing.T) {
	h := start(t, Options{})
	asked := make(chan struct{})
	h.client.permit = func(ctx context.Context, _ acp.RequestPermissionRequest) acp.RequestPermissionOutcome {
		close(asked)
		<-ctx.Done() // the agent withdraws the request when the turn is cancelled
		return cancelledOutcome()
	}
	res := make(chan acp.StopReason, 1)
	go func() {
		resp, err := h.prompt(t, "/permission execute")
		if err != nil {
			t.Errorf("prompt: %v", err)
		}
		res <- resp.StopReason
	}()
	<-asked
	h.conn.Cancel(context.Background(), acp.CancelNotification{SessionId: h.sid})
	if got := <-res; got != acp.StopReasonCancelled {
		t.Fatalf("stopReason %q, want cancelled", got)
	}
	u := h.client.take()
	if got := texts(u); len(got) != 1 || got[0] != "permission: cancelled" {
		t.Errorf("messages %q", got)
	}
	if up := u[1].Update.ToolCallUpdate; up == nil || *up.Status != acp.ToolCallStatusFailed {
		t.Errorf("tool_call_update = %+v, want failed", up)
	}

	_, err := h.prompt(t, "/permission teleport")
	wantRequestError(t, err, -32602, "/permission")
}

func TestFail(t *testing.T) {
	h := start(t, Options{})
	_, err := h.prompt(t, "/fail\nwhatever")
	wantRequestError(t, err, -32603, "testagent: scripted failure")
}

func TestUsage(t *testing.T) {
	h := start(t, Options{})
	resp := h.mustPrompt(t, "/usage", acp.StopReasonEndTurn)
	require.Equal(t, &acp.Usage{InputTokens: 10, OutputTokens: 20, TotalTokens: 38, CachedReadTokens: acp.Ptr(5), ThoughtTokens: acp.Ptr(3)}, resp.Usage)
	u := h.client.take()
	if got := texts(u); len(got) != 1 || got[0] != "usage" {
		t.Errorf("messages %q", got)
	}
	require.Len(t, u, 2)
	require.NotNil(t, u[1].Update.UsageUpdate, "a usage_update after the message")
	require.Equal(t, 30, u[1].Update.UsageUpdate.Used)
	require.Equal(t, &acp.Cost{Amount: 0.0125, Currency: "USD"}, u[1].Update.UsageUpdate.Cost)

	// Cancelled, the turn still reports what it spent.
	res := make(chan acp.PromptResponse, 1)
	go func() { resp, _ := h.prompt(t, "/usage 30s"); res <- resp }()
	h.client.waitFor(t, ".")
	require.NoError(t, h.conn.Cancel(context.Background(), acp.CancelNotification{SessionId: h.sid}))
	resp = <-res
	require.Equal(t, acp.StopReasonCancelled, resp.StopReason)
	require.NotNil(t, resp.Usage)
	require.Equal(t, 38, resp.Usage.TotalTokens)
}

func TestIgnoreCancel(t *testing.T) {
	h := start(t, Options{IgnoreCancel: true})
	res := make(chan acp.StopReason, 1)
	go func() { resp, _ := h.prompt(t, "/sleep 300ms"); res <- resp.StopReason }()
	h.client.waitFor(t, ".")
	require.NoError(t, h.conn.Cancel(context.Background(), acp.CancelNotification{SessionId: h.sid}))
	require.Equal(t, acp.StopReasonEndTurn, <-res, "the turn ran to its end")
}

func TestUnknownKind(t *testing.T) {
	h := start(t, Options{})
	h.mustPrompt(t, "/unknown", acp.StopReasonEndTurn)
	var found bool
	for _, u := range h.wire.updates(t) {
		if u["sessionUpdate"] == unknownKind {
			found = true
			if p, _ := json.Marshal(u["payload"]); string(p) != `{"x":1}` {
				t.Errorf("payload = %s", p)
			}
		}
	}
	if !found {
		t.Errorf("no %s update on the wire", unknownKind)
	}
}

func TestUnknownDirective(t *testing.T) {
	h := start(t, Options{})
	_, err := h.prompt(t, "/bogus 1 2\nbody")
	wantRequestError(t, err, -32602, "/bogus")
	_, err = h.prompt(t, "/echo extra\nbody")
	wantRequestError(t, err, -32602, "/echo")
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	h1 := start(t, Options{TranscriptDir: dir})
	h1.mustPrompt(t, "/echo\nhello", acp.StopReasonEndTurn)
	h1.mustPrompt(t, "/chunks 2 every 1ms", acp.StopReasonEndTurn)
	h1.mustPrompt(t, "/unknown", acp.StopReasonEndTurn)
	live := h1.wire.updates(t)

	// A fresh agent (as if in another process) replays the session.
	h2 := startNoSession(t, Options{TranscriptDir: dir})
	ctx := context.Background()
	if _, err := h2.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: h1.sid, Cwd: "/", McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("load: %v", err)
	}
	replayed := h2.wire.updates(t)
	var want []map[string]any
	for i, prompt := range []string{"/echo\nhello", "/chunks 2 every 1ms", "/unknown"} {
		want = append(want, map[string]any{"sessionUpdate": "user_message_chunk", "content": map[string]any{"type": "text", "text": prompt}})
		n := []int{5, 2, 1}[i]
		want, live = append(want, live[:n]...), live[n:]
	}
	gotJSON, _ := json.Marshal(replayed)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("replay:\n got %s\nwant %s", gotJSON, wantJSON)
	}
	if got := h2.client.take(); len(got) != len(want) {
		t.Errorf("client saw %d replayed updates, want %d", len(got), len(want))
	}

	// The loaded session accepts prompts.
	h2.sid = h1.sid
	h2.mustPrompt(t, "/echo\nagain", acp.StopReasonEndTurn)

	for _, id := range []acp.SessionId{"ts_doesnotexist", "../etc/passwd", "a/b", ""} {
		_, err := h2.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: id, Cwd: "/", McpServers: []acp.McpServer{}})
		wantRequestError(t, err, -32602, "session")
	}
	h2.sid = "ts_neverloaded"
	_, err := h2.prompt(t, "hi")
	wantRequestError(t, err, -32602, "unknown session")
}

func TestSteering(t *testing.T) {
	h := start(t, Options{Steering: true})
	ctx := context.Background()
	blocks := []acp.ContentBlock{acp.TextBlock("go left")}
	promptRequired := map[string]any{"steering": map[string]any{"idleBehavior": "promptRequired"}}
	steer := func(params map[string]any) map[string]string {
		t.Helper()
		raw, err := h.conn.CallExtension(ctx, "_session/steering", params)
		if err != nil {
			t.Fatalf("steering: %v", err)
		}
		var r map[string]string
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	idle := map[string]any{"sessionId": h.sid, "prompt": blocks, "_meta": promptRequired}
	if got := steer(idle); got["outcome"] != "promptRequired" || got["reason"] != "noRunningTurn" {
		t.Errorf("idle session with idleBehavior promptRequired: %v", got)
	}
	res := make(chan acp.StopReason, 1)
	go func() {
		resp, _ := h.prompt(t, "/sleep 30s")
		res <- resp.StopReason
	}()
	h.client.waitFor(t, ".")
	if got := steer(map[string]any{"sessionId": h.sid, "prompt": blocks}); got["outcome"] != "injected" {
		t.Errorf("running turn: %v, want injected", got)
	}
	h.client.waitFor(t, "steered: go left")
	h.conn.Cancel(ctx, acp.CancelNotification{SessionId: h.sid})
	if got := <-res; got != acp.StopReasonCancelled {
		t.Errorf("stopReason %q", got)
	}
	// Without idleBehavior an idle agent starts a turn of its own, as claude-agent-acp does.
	if got := steer(map[string]any{"sessionId": h.sid, "prompt": []acp.ContentBlock{acp.TextBlock("alone")}}); got["outcome"] != "startedNewTurn" {
		t.Errorf("after turn: %v, want startedNewTurn", got)
	}
	h.client.waitFor(t, "steered: alone")

	plain := start(t, Options{})
	_, err := plain.conn.CallExtension(ctx, "_session/steering", map[string]any{"sessionId": plain.sid, "prompt": blocks})
	wantRequestError(t, err, -32601, "Method not found")
}

// The real agents' refusals of steering params (claude-agent-acp 0.101.0), -32602 each.
func TestSteeringRefusesWhatClaudeAgentACPRefuses(t *testing.T) {
	h := start(t, Options{Steering: true})
	blocks := []acp.ContentBlock{acp.TextBlock("x")}
	tests := []struct {
		name   string
		params any
		want   string
	}{
		{"prompt as a string", map[string]any{"sessionId": h.sid, "prompt": "go left"}, "steer params require a non-empty prompt array"},
		{"empty prompt", map[string]any{"sessionId": h.sid, "prompt": []any{}}, "steer params require a non-empty prompt array"},
		{"no prompt", map[string]any{"sessionId": h.sid}, "steer params require a non-empty prompt array"},
		{"no session", map[string]any{"prompt": blocks}, "steer params require a non-empty sessionId"},
		{"not an object", []any{1}, "steer params must be an object"},
		{"unknown idleBehavior", map[string]any{"sessionId": h.sid, "prompt": blocks, "_meta": map[string]any{"steering": map[string]any{"idleBehavior": "queue"}}}, "unsupported steering idleBehavior"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.conn.CallExtension(context.Background(), "_session/steering", tt.params)
			wantRequestError(t, err, -32602, tt.want)
		})
	}
}

func TestOtherMethods(t *testing.T) {
	h := start(t, Options{})
	ctx := context.Background()
	if _, err := h.conn.Authenticate(ctx, acp.AuthenticateRequest{MethodId: "none"}); err != nil {
		t.Errorf("authenticate: %v", err)
	}
	if _, err := h.conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: h.sid, ModeId: "x"}); err != nil {
		t.Errorf("set mode: %v", err)
	}
	_, err := h.conn.ListSessions(ctx, acp.ListSessionsRequest{})
	wantRequestError(t, err, -32601, "session/list")
	// Cancelling an idle or unknown session is harmless.
	if err := h.conn.Cancel(ctx, acp.CancelNotification{SessionId: "nope"}); err != nil {
		t.Error(err)
	}
}

func TestMainFlags(t *testing.T) {
	if code := Main([]string{"-no-such-flag"}); code != 2 {
		t.Errorf("bad flag: exit %d, want 2", code)
	}
	if code := Main([]string{"extra"}); code != 2 {
		t.Errorf("extra arg: exit %d, want 2", code)
	}
	if code := Main([]string{"-h"}); code != 0 {
		t.Errorf("-h: exit %d, want 0", code)
	}
}

// With -commands the agent advertises its commands right after answering session/new and
// session/load, outside any prompt, as claude-agent-acp does.
func TestCommandsFollowTheAnswerToNewAndLoad(t *testing.T) {
	dir := t.TempDir()
	h := start(t, Options{Commands: true, TranscriptDir: dir})
	afterAnswer := func(h *harness, sid acp.SessionId) {
		t.Helper()
		require.Eventually(t, func() bool {
			lines := h.wire.lines()
			for i, l := range lines {
				if strings.Contains(l, `"available_commands_update"`) {
					require.Contains(t, l, string(sid))
					require.Contains(t, lines[i-1], `"result"`, "the update follows the answer")
					return true
				}
			}
			return false
		}, 5*time.Second, time.Millisecond)
	}
	afterAnswer(h, h.sid)
	for _, u := range h.wire.updates(t) {
		if u["sessionUpdate"] == "available_commands_update" {
			require.NotEmpty(t, u["availableCommands"])
		}
	}
	h.mustPrompt(t, "hello", acp.StopReasonEndTurn)

	h2 := startNoSession(t, Options{Commands: true, TranscriptDir: dir})
	_, err := h2.conn.LoadSession(context.Background(), acp.LoadSessionRequest{SessionId: h.sid, Cwd: "/", McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	afterAnswer(h2, h.sid)

	plain := start(t, Options{})
	plain.mustPrompt(t, "hello", acp.StopReasonEndTurn)
	for _, u := range plain.wire.updates(t) {
		require.NotEqual(t, "available_commands_update", u["sessionUpdate"], "only with -commands")
	}
}

// /read and /write use the client's file system only when initialize offered it.
func TestReadWriteNeedTheClientsOffer(t *testing.T) {
	h := start(t, Options{})
	h.mustPrompt(t, "/read notes.txt", acp.StopReasonEndTurn)
	h.mustPrompt(t, "/write notes.txt\nx", acp.StopReasonEndTurn)
	require.Equal(t, []string{"read: the client offers no fs/read_text_file", "write: the client offers no fs/write_text_file"}, texts(h.client.take()))
	_, err := h.prompt(t, "/read")
	wantRequestError(t, err, -32602, "usage: /read PATH")
}

// The tool_call names its tool as claude-agent-acp names it (_meta.claudeCode.toolName);
// the permission request about it does not, and its title names the target.
func TestPermissionNamesTheToolOnTheToolCallOnly(t *testing.T) {
	h := start(t, Options{})
	h.mustPrompt(t, "/permission edit main.go", acp.StopReasonEndTurn)
	var call map[string]any
	for _, u := range h.wire.updates(t) {
		if u["sessionUpdate"] == "tool_call" {
			call = u
		}
	}
	require.NotNil(t, call)
	require.Equal(t, "edit main.go", call["title"])
	require.Equal(t, map[string]any{"claudeCode": map[string]any{"toolName": "Edit"}}, call["_meta"])
	h.client.mu.Lock()
	defer h.client.mu.Unlock()
	require.Len(t, h.client.perms, 1)
	require.Nil(t, h.client.perms[0].ToolCall.Meta, "the request names no tool")
	require.Equal(t, "edit main.go", *h.client.perms[0].ToolCall.Title)
}

package e2e

// The real coding agents over a direct ACP pipe, no tacp in between: each agent started as
// a subprocess on real stdio pipes, spoken to with acp-go-sdk (the SDK tacp's turn runner
// uses), its model a fake one (internal/testkit/fakemodel) scripted by the prompt. These pin down
// what the agents themselves do, so that a failure of e2e/realagents_test.go (the same
// agents through tacp) can be told apart from a change in the agent.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/internal/testkit/fakemodel"
)

// realAgents are the agents tested, each against its provider's fake.
var realAgents = fakemodel.Agents

// realAgentEnv starts a fake model for a, prepares a HOME for it, and returns the fake, the
// agent's executable and its environment.
func realAgentEnv(t *testing.T, a fakemodel.Agent) (*fakemodel.Server, string, []string) {
	t.Helper()
	bin := requirePeer(t, filepath.Join(".bin", a.Bin))
	fm := fakemodel.New(a.Provider)
	t.Cleanup(fm.Close)
	env, err := a.Setup(filepath.Join(t.TempDir(), "home"), fm)
	require.NoError(t, err)
	return fm, bin, env
}

// directClient is the ACP client side of a direct pipe: it records every update and
// answers permission requests with the option of the kind answer names.
type directClient struct {
	mu      sync.Mutex
	updates []acp.SessionNotification
	asked   []acp.RequestPermissionRequest
	answer  acp.PermissionOptionKind
	// files, when set, serves fs/* under that directory and records the paths asked for.
	files   string
	fsCalls []string
}

func (c *directClient) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates = append(c.updates, n)
	return nil
}

func (c *directClient) RequestPermission(_ context.Context, r acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, r)
	for _, o := range r.Options {
		if o.Kind == c.answer {
			return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Selected: &acp.RequestPermissionOutcomeSelected{OptionId: o.OptionId}}}, nil
		}
	}
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}, nil
}

// take returns the updates and permission requests since the last take.
func (c *directClient) take() ([]acp.SessionNotification, []acp.RequestPermissionRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, a := c.updates, c.asked
	c.updates, c.asked = nil, nil
	return u, a
}

func (c *directClient) ReadTextFile(_ context.Context, r acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files == "" {
		return acp.ReadTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsReadTextFile)
	}
	c.fsCalls = append(c.fsCalls, "read "+r.Path)
	b, err := os.ReadFile(r.Path)
	if os.IsNotExist(err) {
		return acp.ReadTextFileResponse{}, &acp.RequestError{Code: -32002, Message: "Resource not found", Data: map[string]any{"path": r.Path}}
	}
	return acp.ReadTextFileResponse{Content: string(b)}, err
}

func (c *directClient) WriteTextFile(_ context.Context, r acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files == "" {
		return acp.WriteTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsWriteTextFile)
	}
	c.fsCalls = append(c.fsCalls, "write "+r.Path)
	if !strings.HasPrefix(r.Path, c.files+string(filepath.Separator)) {
		return acp.WriteTextFileResponse{}, acp.NewInvalidParams(map[string]any{"path": "outside the workspace"})
	}
	return acp.WriteTextFileResponse{}, os.WriteFile(r.Path, []byte(r.Content), 0o644)
}

func (c *directClient) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalCreate)
}

func (c *directClient) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalKill)
}

func (c *directClient) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalOutput)
}

func (c *directClient) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalRelease)
}

func (c *directClient) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalWaitForExit)
}

// startDirect starts bin with env in dir and connects to it; the agent's whole process
// group is killed at cleanup.
func startDirect(t *testing.T, bin string, args, env []string, dir string) (*acp.ClientSideConnection, *directClient) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = &testLog{t: t, prefix: filepath.Base(bin) + ": "}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	c := &directClient{answer: acp.PermissionOptionKindAllowOnce}
	return acp.NewClientSideConnection(c, stdin, stdout), c
}

// replyText joins the agent_message_chunk texts of updates; chunks counts them.
func replyText(updates []acp.SessionNotification) (text string, chunks int) {
	var b strings.Builder
	for _, u := range updates {
		if m := u.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
			b.WriteString(m.Content.Text.Text)
			chunks++
		}
	}
	return b.String(), chunks
}

func TestRealAgentDirect(t *testing.T) {
	for _, a := range realAgents {
		t.Run(a.Name, func(t *testing.T) {
			t.Parallel()
			fm, bin, env := realAgentEnv(t, a)
			ws := t.TempDir()
			// A direct client governs the agent as tacp's worker does: the permission
			// configuration of an agent without modes, the asking mode below.
			conn, client := startDirect(t, bin, a.Args, append(env, a.AskingEnv...), ws)
			ctx := ctxFor(t, 3*time.Minute)

			init, err := conn.Initialize(ctx, acp.InitializeRequest{
				ProtocolVersion:    acp.ProtocolVersionNumber,
				ClientCapabilities: acp.ClientCapabilities{},
				ClientInfo:         &acp.Implementation{Name: "tacp-e2e", Version: "0"},
			})
			require.NoError(t, err)
			require.True(t, init.AgentCapabilities.LoadSession, "%s advertises loadSession", a.Name)
			meta, _ := json.Marshal(init.Meta)
			steering := strings.Contains(string(meta), `"steering":{"supported":true}`)
			require.Equal(t, a.Steering, steering, "%s: _meta.steering.supported", a.Name)

			sess, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: ws, McpServers: []acp.McpServer{}})
			require.NoError(t, err)
			var configs []string
			for _, o := range sess.ConfigOptions {
				b, _ := json.Marshal(o)
				var c struct {
					ID string `json:"id"`
				}
				_ = json.Unmarshal(b, &c)
				configs = append(configs, c.ID)
			}
			t.Logf("%s: config options %v", a.Name, configs)
			if a.AskingMode != "" {
				require.NotNil(t, sess.Modes, "%s offers modes", a.Name)
				t.Logf("%s: starts in mode %s", a.Name, sess.Modes.CurrentModeId)
				if string(sess.Modes.CurrentModeId) != a.AskingMode {
					_, err := conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: sess.SessionId, ModeId: acp.SessionModeId(a.AskingMode)})
					require.NoError(t, err)
				}
				var ids []string
				for _, m := range sess.Modes.AvailableModes {
					ids = append(ids, string(m.Id))
				}
				t.Logf("%s: modes %v", a.Name, ids)
			}
			prompt := func(text string) acp.PromptResponse {
				t.Helper()
				resp, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
				require.NoError(t, err, "prompt %q", text)
				return resp
			}

			// A reply streams in chunks and ends end_turn.
			resp := prompt("reply: the quick brown fox jumps over the lazy dog")
			require.Equal(t, acp.StopReasonEndTurn, resp.StopReason)
			updates, asked := client.take()
			text, chunks := replyText(updates)
			require.Equal(t, "the quick brown fox jumps over the lazy dog", text)
			require.GreaterOrEqual(t, chunks, 3, "the reply streamed")
			require.Empty(t, asked)
			if a.ReportsUsage { // Gemini CLI reports usage only in _meta.quota
				require.NotNil(t, resp.Usage, "%s reports the prompt's usage", a.Name)
				require.Positive(t, resp.Usage.TotalTokens)
			}
			main := fm.MainRequests()
			require.NotEmpty(t, main)
			require.NotEmpty(t, main[0].Model)

			// A write asks permission; approved, it is performed.
			approved := filepath.Join(ws, "approved.txt")
			resp = prompt("tool: write " + approved + " approved content")
			require.Equal(t, acp.StopReasonEndTurn, resp.StopReason)
			updates, asked = client.take()
			require.Len(t, asked, 1, "the write asked permission")
			got, err := os.ReadFile(approved)
			require.NoError(t, err, "the approved write happened")
			require.Equal(t, "approved content", strings.TrimSpace(string(got)))
			text, _ = replyText(updates)
			require.Contains(t, text, "tool result: ")

			// Denied, it is not.
			client.answer = acp.PermissionOptionKindRejectOnce
			denied := filepath.Join(ws, "denied.txt")
			resp = prompt("tool: write " + denied + " denied content")
			_, asked = client.take()
			require.Len(t, asked, 1, "the write asked permission")
			require.NoFileExists(t, denied)
			t.Logf("%s after a denied write: stop reason %s", a.Name, resp.StopReason)

			// A command asks too.
			client.answer = acp.PermissionOptionKindAllowOnce
			ran := filepath.Join(ws, "ran.txt")
			resp = prompt("tool: bash echo ran > " + ran)
			require.Equal(t, acp.StopReasonEndTurn, resp.StopReason)
			_, asked = client.take()
			require.Len(t, asked, 1, "the command asked permission")
			require.FileExists(t, ran)

			if !steering {
				return
			}
			// Steering: _session/steering takes the prompt as content blocks, as session/prompt
			// does; a string is refused. A steer is answered inside the running prompt.
			done := make(chan acp.PromptResponse, 1)
			go func() {
				resp, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("slow: 40 tick")}})
				if err != nil {
					t.Errorf("slow prompt: %v", err)
				}
				done <- resp
			}()
			require.Eventually(t, func() bool {
				client.mu.Lock()
				defer client.mu.Unlock()
				_, n := replyText(client.updates)
				return n >= 2
			}, time.Minute, 10*time.Millisecond, "the slow reply streams")
			_, err = conn.CallExtension(ctx, "_session/steering", map[string]any{"sessionId": sess.SessionId, "prompt": "reply: steered by a string"})
			t.Logf("%s: _session/steering with a string prompt: %v", a.Name, err)
			require.Error(t, err, "a string prompt is refused")
			raw, err := conn.CallExtension(ctx, "_session/steering", map[string]any{
				"sessionId": sess.SessionId, "prompt": []acp.ContentBlock{acp.TextBlock("reply: steered answer")},
			})
			require.NoError(t, err)
			t.Logf("%s: _session/steering with content blocks: %s", a.Name, raw)
			require.Contains(t, string(raw), `"outcome":"injected"`)
			resp = <-done
			require.Equal(t, acp.StopReasonEndTurn, resp.StopReason)
			updates, _ = client.take()
			text, _ = replyText(updates)
			require.Contains(t, text, "steered answer", "the steer is answered inside the prompt")
			steered := false
			for _, r := range fm.MainRequests() {
				steered = steered || r.Contains("user", "reply: steered answer")
			}
			require.True(t, steered, "the steer's text reached the model")

			// The model saw the conversation: the last main request carries the first reply.
			main = fm.MainRequests()
			last := main[len(main)-1]
			require.True(t, last.Contains("user", "reply: the quick brown fox"), "history has the first prompt")
			require.True(t, last.Contains("assistant", "the quick brown fox jumps over the lazy dog"), "history has the first reply")
		})
	}
}

// TestRealAgentDirectUsesTheClientsFilesWhenOffered: Gemini CLI reads and writes files
// through the client (fs/read_text_file, fs/write_text_file) when initialize offers them,
// which tacp's does not yet (its sandbox would serve them). Its quirk: it cannot create a
// file that way. It reads the file first and takes only a thrown Error whose message says
// "Resource not found" as "no such file", but its ACP SDK throws the JSON-RPC error as a
// plain object, so every missing file is "Error checking existing file" and the write is
// not made; an existing file is rewritten through the client.
func TestRealAgentDirectUsesTheClientsFilesWhenOffered(t *testing.T) {
	a := fakemodel.GeminiCLI
	_, bin, env := realAgentEnv(t, a)
	ws := t.TempDir()
	conn, client := startDirect(t, bin, a.Args, env, ws)
	client.files = ws
	ctx := ctxFor(t, 3*time.Minute)
	_, err := conn.Initialize(ctx, acp.InitializeRequest{
		ProtocolVersion:    acp.ProtocolVersionNumber,
		ClientCapabilities: acp.ClientCapabilities{Fs: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}},
	})
	require.NoError(t, err)
	sess, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: ws, McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	write := func(path, content string) string {
		t.Helper()
		resp, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("tool: write " + path + " " + content)}})
		require.NoError(t, err)
		require.Equal(t, acp.StopReasonEndTurn, resp.StopReason)
		updates, _ := client.take()
		text, _ := replyText(updates)
		return text
	}
	fsCalls := func() []string {
		client.mu.Lock()
		defer client.mu.Unlock()
		calls := client.fsCalls
		client.fsCalls = nil
		return calls
	}

	existing := filepath.Join(ws, "existing.txt")
	require.NoError(t, os.WriteFile(existing, []byte("old content"), 0o644))
	write(existing, "rewritten by the client")
	require.Contains(t, fsCalls(), "write "+existing, "the write went through the client")
	got, err := os.ReadFile(existing)
	require.NoError(t, err)
	require.Equal(t, "rewritten by the client", string(got))

	missing := filepath.Join(ws, "new.txt")
	text := write(missing, "never written")
	require.Equal(t, []string{"read " + missing}, slices.Compact(fsCalls()), "it only reads")
	require.Contains(t, text, "Error checking existing file")
	require.NoFileExists(t, missing)
}

// TestRealAgentDirectClaudeUnderRootNeedsIS_SANDBOX: as root, Claude Code refuses to start
// a session (claude-agent-acp runs it with --dangerously-skip-permissions, so that a session
// can switch to bypassPermissions) when IS_SANDBOX is set to anything but 1 (this machine's
// environment has IS_SANDBOX=yes).
func TestRealAgentDirectClaudeUnderRootNeedsIS_SANDBOX(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs as root only: Claude Code's refusal is about root")
	}
	a := fakemodel.Claude
	_, bin, env := realAgentEnv(t, a)
	for _, sandbox := range []string{"yes", "true", "0", "1"} {
		conn, _ := startDirect(t, bin, a.Args, append(env, "IS_SANDBOX="+sandbox), t.TempDir())
		ctx := ctxFor(t, time.Minute)
		_, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
		require.NoError(t, err)
		_, err = conn.NewSession(ctx, acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
		if sandbox == "1" {
			require.NoError(t, err, "IS_SANDBOX=1")
			continue
		}
		require.Error(t, err, "IS_SANDBOX=%q", sandbox)
		require.Contains(t, err.Error(), "cannot be used with root/sudo privileges")
	}
}

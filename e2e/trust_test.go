package e2e

// The worker is the trust boundary (contract §10): nothing a client sends chooses a program the
// worker runs or a directory outside the roots its operator allowed. Each probe checks a
// marker file a hostile command would write and, where an agent runs, the directory it ran in.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

// trustWorker is a worker whose only workspace root is base/ws, with base/ws-evil (a
// sibling sharing the root's prefix), base/outside, and base/ws/escape → base/outside.
type trustWorker struct {
	w      *tacpworker.Worker
	qc     *tacpclient.Client
	queue  string
	base   string
	root   string
	marker string
}

func newTrustWorker(t *testing.T) *trustWorker {
	t.Helper()
	base := t.TempDir()
	for _, d := range []string{"ws", "ws-evil", "outside"} {
		require.NoError(t, os.MkdirAll(filepath.Join(base, d), 0o755))
	}
	require.NoError(t, os.Symlink(filepath.Join(base, "outside"), filepath.Join(base, "ws", "escape")))
	require.NoError(t, os.WriteFile(filepath.Join(base, "outside", "secret.txt"), []byte("secret"), 0o600))
	tw := &trustWorker{queue: "tacp-trust-" + signals.NewID()[:8], base: base, root: filepath.Join(base, "ws"), marker: filepath.Join(base, "pwned")}
	tw.w, tw.qc = extraWorker(t, tc, tacpworker.Options{TaskQueue: tw.queue, WorkspaceRoots: []string{tw.root}})
	return tw
}

// refusedBeforeAnything checks that session id ran nothing: no marker, no agent process,
// and (when its workflow exists) no RunTurn activity in its history.
func (tw *trustWorker) refusedBeforeAnything(t *testing.T, id string) {
	t.Helper()
	require.NoFileExists(t, tw.marker, "a client's command ran on the worker")
	require.Zero(t, tw.w.Host.AgentPID(id), "an agent was started")
	if _, err := tc.DescribeWorkflowExecution(context.Background(), signals.SessionWorkflowID(id), ""); err != nil {
		return
	}
	iter := tc.GetWorkflowHistory(ctxFor(t, 10*time.Second), signals.SessionWorkflowID(id), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			require.NotEqual(t, signals.ActivityRunTurn, a.GetActivityType().GetName(), "a turn was started")
		}
	}
}

func TestTrustACommandLineAsAgentRunsNothing(t *testing.T) {
	t.Parallel()
	tw := newTrustWorker(t)
	hostile := "/bin/sh -c 'echo pwned > " + tw.marker + "'"

	// Through the real CLI: refused by the client before anything starts.
	id := session(t)
	_, errOut, code := starter(t, "prompt", "--task-queue", tw.queue, "--session", id, "--agent", hostile, "hello")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "invalid_request")
	require.Contains(t, errOut, "no longer a command line")
	tw.refusedBeforeAnything(t, id)

	// A client that skips the check (the raw SDK, Update-with-Start): the worker refuses it
	// at the session's start; the session fails and its first prompt gets the reason.
	id = session(t)
	err := rawPromptWithStart(t, tw.queue, signals.SessionConfig{SessionID: id, Agent: hostile})
	rej := requireRejection(t, err, signals.RejectInvalidRequest)
	require.Contains(t, rej.Message, "no longer a command line")
	tw.refusedBeforeAnything(t, id)
	requireSessionFailed(t, id)
}

func TestTrustAnUnknownProfileIsRefusedWithTheNames(t *testing.T) {
	t.Parallel()
	tw := newTrustWorker(t)
	const offered = `unknown agent profile "claude": this worker offers default, exits, garbage, hangs, missing, settings, steering`
	// The client asks the workers what they offer before it starts a session: the refusal
	// leaves no workflow.
	id := session(t)
	_, err := tw.qc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id, Agent: "claude"}, signals.PromptRequest{Text: "hello"})
	rej := requireRejection(t, err, signals.RejectInvalidRequest)
	require.Contains(t, rej.Message, offered)
	tw.refusedBeforeAnything(t, id)
	_, err = tc.DescribeWorkflowExecution(ctxFor(t, 10*time.Second), signals.SessionWorkflowID(id), "")
	var nf *serviceerror.NotFound
	require.ErrorAs(t, err, &nf, "a refused prompt starts no session")

	// A client that skips the check: the worker refuses the session at its start, and
	// every client is told why it failed.
	err = rawPromptWithStart(t, tw.queue, signals.SessionConfig{SessionID: id, Agent: "claude"})
	require.ErrorContains(t, err, offered)
	tw.refusedBeforeAnything(t, id)
	requireSessionFailed(t, id)
	// status, list and the ACP face say why it failed, not Temporal's "unknown queryType".
	out, errOut, code := starter(t, "status", "--session", id)
	require.NotEqual(t, 0, code, out)
	require.Contains(t, errOut, `session_failed: session `+id+` failed: unknown agent profile "claude"`)
	require.NotContains(t, errOut, "queryType")
	// starter list shows SessionInfo.Ended under the row; the suite's sessions outnumber its
	// page, so this one is read with a visibility filter.
	rows, err := tw.qc.ListWhere(ctxFor(t, 30*time.Second), "WorkflowId = '"+signals.SessionWorkflowID(id)+"'", 1)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Contains(t, rows[0].Ended, `failed: unknown agent profile "claude"`)
	p := startACP(t, "--task-queue", tw.queue)
	_, err = p.conn.LoadSession(ctxFor(t, 30*time.Second), acp.LoadSessionRequest{SessionId: acp.SessionId(id), Cwd: filepath.Join(tw.root, "editor"), McpServers: []acp.McpServer{}})
	var reqErr *acp.RequestError
	require.ErrorAs(t, err, &reqErr)
	require.Contains(t, reqErr.Message, `unknown agent profile "claude"`)

	// The session failed before anything ran: the same id starts with a profile it offers.
	_, err = tw.qc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id, Agent: profileSteering}, signals.PromptRequest{Text: "/pwd"})
	require.NoError(t, err)
	evs := turnEnd(t, id, 1)
	require.Contains(t, strings.Join(agentTexts(t, evs, 1), ""), "pwd: "+filepath.Join(tw.root, id), "the session's own folder in the root")

	// The CLI lists what the workers offer, and status names the profile.
	out, errOut, code = starter(t, "profiles", "--task-queue", tw.queue)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "default")
	require.Contains(t, out, "steering")
	out, _, code = starter(t, "status", "--session", id)
	require.Equal(t, 0, code)
	require.Contains(t, out, "agent     steering")
	require.Contains(t, out, "profiles  default, exits, garbage, hangs, missing, settings, steering")
}

func TestTrustWorkspacesOutsideTheRootsAreRefused(t *testing.T) {
	t.Parallel()
	tw := newTrustWorker(t)
	for name, ws := range map[string]string{
		"/etc":                  "/etc",
		"../x":                  "../x",
		"a symlink out":         filepath.Join(tw.root, "escape"),
		"below a symlink out":   filepath.Join(tw.root, "escape", "project"),
		"a sibling with prefix": filepath.Join(tw.base, "ws-evil"),
		"the root itself":       tw.root,
	} {
		t.Run(name, func(t *testing.T) {
			id := session(t)
			_, errOut, code := starter(t, "prompt", "--task-queue", tw.queue, "--session", id, "--workspace", ws, "/pwd")
			require.Equal(t, 2, code, errOut)
			require.Contains(t, errOut, "invalid_request")
			require.Contains(t, errOut, "outside the workspace roots")
			tw.refusedBeforeAnything(t, id)
		})
	}
	// Inside the root, relative or absolute, the agent runs exactly there.
	for _, ws := range []string{"proj", filepath.Join(tw.root, "other")} {
		id := session(t)
		out, errOut, code := starter(t, "prompt", "--task-queue", tw.queue, "--session", id, "--workspace", ws, "/pwd")
		require.Equal(t, 0, code, errOut)
		want := ws
		if !filepath.IsAbs(ws) {
			want = filepath.Join(tw.root, ws)
		}
		require.Contains(t, out, "pwd: "+want)
	}
}

func TestTrustAnEditorsCwdOutsideTheRootsIsRefused(t *testing.T) {
	t.Parallel()
	tw := newTrustWorker(t)
	p := startACP(t, "--task-queue", tw.queue)
	_, err := p.conn.NewSession(ctxFor(t, 30*time.Second), acp.NewSessionRequest{Cwd: "/etc", McpServers: []acp.McpServer{}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "outside the workspace roots")
	require.NoFileExists(t, tw.marker)

	res, err := p.conn.NewSession(ctxFor(t, 30*time.Second), acp.NewSessionRequest{Cwd: filepath.Join(tw.root, "editor"), McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	_, err = p.prompt(string(res.SessionId), "/pwd")
	require.NoError(t, err)
	require.Contains(t, strings.Join(p.texts(false), ""), "pwd: "+filepath.Join(tw.root, "editor"))
}

// A refused MCP server is refused with its reason in the error's message, which is what an
// editor shows (not only in error.data): the server's name and the worker flag that allows it.
func TestTrustARefusedMCPServerSaysWhyInItsMessage(t *testing.T) {
	t.Parallel()
	tw := newTrustWorker(t)
	p := startACP(t, "--task-queue", tw.queue)
	_, err := p.conn.NewSession(ctxFor(t, 30*time.Second), acp.NewSessionRequest{
		Cwd:        filepath.Join(tw.root, "editor"),
		McpServers: []acp.McpServer{{Http: &acp.McpServerHttpInline{Name: "github", Type: "http", Url: "http://127.0.0.1:1/mcp", Headers: []acp.HttpHeader{}}}},
	})
	var reqErr *acp.RequestError
	require.ErrorAs(t, err, &reqErr)
	require.Equal(t, -32602, reqErr.Code)
	require.Contains(t, reqErr.Message, `MCP server "github" refused`)
	require.Contains(t, reqErr.Message, "-mcp")
	require.NoFileExists(t, tw.marker)
}

func TestTrustReadsOutsideTheWorkspaceAreAsked(t *testing.T) {
	t.Parallel()
	tw := newTrustWorker(t)
	id := session(t)
	ctx := ctxFor(t, 60*time.Second)
	// Inside the workspace, ask_for_risky lets a read through without asking.
	_, err := tw.qc.Prompt(ctx, signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "/permission read notes/todo.md"})
	require.NoError(t, err)
	evs := turnEnd(t, id, 1)
	res := resolutions(t, evs, 1)
	require.Len(t, res, 1)
	require.Equal(t, signals.DecidedByPolicy, res[0].DecidedBy)

	// Outside it (through a symlink too), the read is asked of a person: the session waits.
	// In order: the session numbers its turns as the prompts come.
	for i, path := range []string{"/etc/passwd", filepath.Join(tw.root, id, "link", "secret.txt")} {
		turn := int64(2 + i)
		if turn == 3 {
			require.NoError(t, os.Symlink(filepath.Join(tw.base, "outside"), filepath.Join(tw.root, id, "link")))
		}
		_, err = tw.qc.Prompt(ctx, signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "/permission read " + path})
		require.NoError(t, err)
		req := permissionRequestedIn(t, id, turn)
		require.Equal(t, signals.PathsOutside, req.Paths)
		st := waitState(t, id, signals.StateSuspended)
		require.Len(t, st.PendingPermissions, 1, "nobody answered: the request waits for a person")
		_, err = tw.qc.PermissionRespond(ctx, id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: "reject"})
		require.NoError(t, err)
		evs = turnEnd(t, id, turn)
		res = resolutions(t, evs, turn)
		require.Len(t, res, 1)
		require.Equal(t, signals.DecidedByUser, res[0].DecidedBy)
	}
}

// rawPromptWithStart sends a prompt with Update-with-Start straight through the SDK, with
// none of tacpclient.Client's checks.
func rawPromptWithStart(t *testing.T, queue string, cfg signals.SessionConfig) error {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	start := tc.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: signals.SessionWorkflowID(cfg.SessionID), TaskQueue: queue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, signals.SessionWorkflowType, cfg)
	h, err := tc.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateName: signals.UpdatePrompt, Args: []any{signals.PromptRequest{Text: "hello", ClientMessageID: signals.NewID()}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	return err
}

func requireSessionFailed(t *testing.T, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		d, err := tc.DescribeWorkflowExecution(context.Background(), signals.SessionWorkflowID(id), "")
		return err == nil && d.WorkflowExecutionInfo.Status == enumspb.WORKFLOW_EXECUTION_STATUS_FAILED
	}, 30*time.Second, 50*time.Millisecond, "the refused session's workflow failed")
}

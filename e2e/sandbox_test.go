package e2e

// Every agent in a kernel sandbox (issue 26), with the test agent's own shell (/sh) as the
// tool: a sandboxed profile's agent reads and writes its session's workspace and nothing of
// other sessions, the worker's data dir or the host's /tmp, keeps its state per session,
// never reaches the Temporal frontend, and still fails over. realagents_sandbox_test.go holds
// the same for the real agents.

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/internal/sandbox"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/testagent/agent"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

// sandboxWorker is a worker whose only profile is the test agent, sandboxed, with a data
// dir of its own.
type sandboxWorker struct {
	w    *tacpworker.Worker
	qc   *tacpclient.Client
	data string
}

// sandboxedTestAgent is the test agent's profile in a sandbox: its transcripts (its
// conversations) per session.
func sandboxedTestAgent(data string) activities.Profile {
	p := activities.Profile{
		Name: activities.DefaultProfile, Command: testagent + " -steering", Sandbox: activities.SandboxOn,
		Env: map[string]string{agent.TranscriptsEnv: filepath.Join(data, "transcripts")},
	}
	p.State = map[string]string{agent.TranscriptsEnv: ""}
	return p
}

func newSandboxWorker(t *testing.T) *sandboxWorker {
	t.Helper()
	data := t.TempDir()
	sw := &sandboxWorker{data: data}
	sw.w, sw.qc = extraWorker(t, tc, tacpworker.Options{
		Profiles: []activities.Profile{sandboxedTestAgent(data)}, DataDir: data,
		WorkspaceRoots: []string{filepath.Join(data, "workspaces")}, MaxAgents: 16,
		SandboxDenyPorts: []uint16{sandbox.PortOf(srv.HostPort())},
	})
	return sw
}

func (sw *sandboxWorker) workspace(id string) string { return filepath.Join(sw.data, "workspaces", id) }

// sh runs command with the agent's shell in session id and returns what it said, the turn
// ended end_turn.
func (sw *sandboxWorker) sh(t *testing.T, id, command string) string {
	t.Helper()
	res, err := sw.qc.Prompt(ctxFor(t, time.Minute), signals.SessionConfig{SessionID: id, Policy: signals.PolicyAllowAll},
		signals.PromptRequest{Text: "/sh " + command, ClientMessageID: signals.NewID()})
	require.NoError(t, err)
	evs := endedWith(t, id, res.TurnID, "end_turn")
	return strings.Join(agentTexts(t, evs, res.TurnID), "")
}

// journalHas reports whether any event of session id carries text.
func journalHas(t *testing.T, id, text string) bool {
	t.Helper()
	for _, ev := range allEvents(t, id) {
		if strings.Contains(string(ev.Data), text) {
			return true
		}
	}
	return false
}

func TestSandboxTestAgent(t *testing.T) {
	t.Parallel()
	sw := newSandboxWorker(t)
	a, b := session(t)+"-a", session(t)+"-b"
	const secret = "the-secret-of-session-b"
	require.Contains(t, sw.sh(t, b, "echo "+secret+" > secret && echo written"), "exit 0: written", "inside its own workspace the agent writes")

	t.Run("AnotherSessionsWorkspaceIsRefused", func(t *testing.T) {
		out := sw.sh(t, a, "cat ../"+b+"/secret; ls ..")
		require.Contains(t, out, "Permission denied", out)
		require.NotContains(t, out, secret)
		require.False(t, journalHas(t, a, secret), "the secret is in no journal")
	})
	t.Run("WritesToTheHostTmpAndTheDataDirAreRefused", func(t *testing.T) {
		out := sw.sh(t, a, fmt.Sprintf("echo x > /tmp/outside-%s; echo x > %s/planted", a, sw.data))
		require.Equal(t, 2, strings.Count(out, "Permission denied"), out)
		require.NoFileExists(t, "/tmp/outside-"+a)
		require.NoFileExists(t, filepath.Join(sw.data, "planted"))
	})
	t.Run("TmpIsTheSessionsOwn", func(t *testing.T) {
		out := sw.sh(t, a, `echo t > "$TMPDIR/t" && echo "$TMPDIR"`)
		require.Contains(t, out, "exit 0: "+filepath.Join(sw.data, "sandbox", a, "tmp"), out)
	})
	t.Run("ReadsWritesAndGitInsideTheWorkspaceWork", func(t *testing.T) {
		out := sw.sh(t, a, "echo hello > f && cat f && git init -q && git add f && "+
			"git -c user.name=t -c user.email=t@t commit -qm first && git log --oneline | wc -l")
		require.Equal(t, "sh: exit 0: hello 1", out)
		require.FileExists(t, filepath.Join(sw.workspace(a), ".git", "HEAD"))
	})
	t.Run("TheMarkerAndGitHooksAreReadOnly", func(t *testing.T) {
		// .git/hooks exists since the step above: a new agent process protects it.
		sw.w.Host.ReleaseAgent(ctxFor(t, 10*time.Second), signals.ReleaseAgentRequest{SessionID: a, NewHost: "elsewhere"})
		require.Eventually(t, func() bool { return sw.w.Host.AgentPID(a) == 0 }, time.Minute, 50*time.Millisecond)
		out := sw.sh(t, a, "echo x >> "+activities.WorkspaceMarker+"; echo 'echo pwned' > .git/hooks/post-commit; echo done")
		require.Equal(t, 2, strings.Count(out, "Read-only file system"), out)
		require.NoFileExists(t, filepath.Join(sw.workspace(a), ".git", "hooks", "post-commit"))
	})
	t.Run("TheTemporalFrontendIsRefusedAnotherLoopbackPortIsNot", func(t *testing.T) {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		go func() {
			for c, err := l.Accept(); err == nil; c, err = l.Accept() {
				c.Close()
			}
		}()
		connect := func(addr string) string {
			host, port, _ := net.SplitHostPort(addr)
			return fmt.Sprintf(`bash -c 'echo > /dev/tcp/%s/%s' && echo connected`, host, port)
		}
		front := srv.HostPort()
		require.Contains(t, sw.sh(t, a, connect(front)), "Permission denied", "the frontend at %s", front)
		require.Contains(t, sw.sh(t, a, connect(l.Addr().String())), "exit 0: connected")
	})
	t.Run("AnotherSessionsAgentStateIsRefused", func(t *testing.T) {
		state := filepath.Join(sw.data, "sandbox", a, "state", agent.TranscriptsEnv)
		ents, err := os.ReadDir(state)
		require.NoError(t, err)
		require.NotEmpty(t, ents, "session a's transcripts are in its own state folder")
		out := sw.sh(t, b, "ls "+state+"; cat "+filepath.Join(state, ents[0].Name()))
		require.Equal(t, 2, strings.Count(out, "Permission denied"), out)
		shared, _ := os.ReadDir(filepath.Join(sw.data, "transcripts"))
		require.Empty(t, shared, "no transcript in the folder every session would share")
	})
	t.Run("TheProfileShowsItsSandbox", func(t *testing.T) {
		infos := sw.w.Trust.Offer()
		require.Len(t, infos, 1)
		require.NotNil(t, infos[0].Sandbox)
		require.Equal(t, sandbox.NetworkAll, infos[0].Sandbox.Network)
		require.Equal(t, []string{agent.TranscriptsEnv}, infos[0].Sandbox.State)
		const line = "on · network all · protected .tacp-workspace, .git/hooks · state per session " + agent.TranscriptsEnv
		out, errOut, code := starter(t, "profiles", "--task-queue", sw.qc.TaskQueue)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "sandbox: "+line, "starter profiles")
		out, errOut, code = starter(t, "status", "--task-queue", sw.qc.TaskQueue, "--session", a)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "sandbox   "+line+" (profile default)", "starter status")
		// The session itself says what its last attempt ran in, whichever worker answers,
		// and so does the Temporal UI's Current Details.
		st, err := sw.qc.Status(ctxFor(t, 10*time.Second), a)
		require.NoError(t, err)
		require.Equal(t, line, st.Sandbox)
		require.Contains(t, currentDetails(t, a), "sandbox: "+line)
	})
}

func TestSandboxedWorkerKilledMidTurnTheTurnFinishesOnAnotherSandboxedWorker(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	queue := "tacp-sandbox-failover-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	profile, err := json.Marshal(sandboxedTestAgent(data))
	require.NoError(t, err)
	env := []string{"TACP_E2E_PROFILE=" + string(profile), "TACP_E2E_SANDBOX=on", "TACP_E2E_DATA=" + data}
	first := startWorkerProcess(t, queue, env...)

	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	_, err = qc.Prompt(ctxFor(t, time.Minute), cfg, signals.PromptRequest{Text: "/chunks 100 every 100ms", ClientMessageID: "turn-1"})
	require.NoError(t, err)
	waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventAgentUpdate })
	before := waitRunning(t, id, 1)
	startWorkerProcess(t, queue, env...)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()

	evs := turnEndAcrossFailover(t, id, 1)
	kind, data1 := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind, "%v", data1)
	require.Equal(t, "end_turn", data1["stop_reason"])
	require.Positive(t, countKindIn(evs, signals.EventTurnRestarted, 1), "the turn restarted on the other worker")
	st, err := qc.Status(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	require.Equal(t, before.AgentSessionID, st.AgentSessionID, "the other worker's sandboxed agent loaded the session from its per-session state")
	checkInvariants(t, allEvents(t, id))
}

// A sandboxed agent told to keep its files where its sandbox does not reach dies before
// initialize; the turn fails once, naming the path the sandbox refused and the settings that
// grant it, besides the agent's exit and what it printed.
func TestASandboxedAgentThatCannotWriteItsFilesFailsNamingThePathAndTheFix(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	outside := filepath.Join(t.TempDir(), "transcripts")
	_, qc := extraWorker(t, tc, tacpworker.Options{
		Profiles: []activities.Profile{{
			Name: activities.DefaultProfile, Command: fmt.Sprintf("%s -transcripts %s", testagent, outside), Sandbox: activities.SandboxOn,
		}},
		DataDir: data, WorkspaceRoots: []string{filepath.Join(data, "workspaces")},
		SandboxDenyPorts: []uint16{sandbox.PortOf(srv.HostPort())},
	})
	id := session(t)
	_, err := qc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "hello"})
	require.NoError(t, err)
	evs := turnEnd(t, id, 1)
	kind, d := terminalData(t, evs)
	require.Equal(t, signals.EventTurnFailed, kind)
	msg, _ := d["error"].(string)
	require.Contains(t, msg, "before answering initialize")
	require.Contains(t, msg, "the kernel sandbox of its session refuses "+outside)
	require.Contains(t, msg, fmt.Sprintf(`"read_write": [%q]`, outside), "the profile setting that grants it")
	require.Contains(t, msg, "-agent.sandbox=off", "the flag that runs it unsandboxed")
	require.Zero(t, countKindIn(evs, signals.EventTurnRestarted, 1), "failed once, not as lost workers")
	require.NoDirExists(t, outside)
}

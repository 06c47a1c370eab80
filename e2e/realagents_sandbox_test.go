package e2e

// The real agents in the kernel sandbox (issue 26): each agent's own shell tool, scripted by
// its fake model, in the mode that asks tacp and under allow_all (tacp's policy out of the
// way), runs confined to its session. What the kernel refuses comes back as the command's
// EACCES in the tool result, and the agent goes on to end its turn.

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/internal/proctree"
	"github.com/tacp-dev/tacp/internal/sandbox"
	"github.com/tacp-dev/tacp/internal/testkit/fakemodel"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

// sandboxedAgents are the real agents these tests run sandboxed: all four.
var sandboxedAgents = []fakemodel.Agent{fakemodel.Claude, fakemodel.Codex, fakemodel.GeminiCLI, fakemodel.OpenCode}

// refusal is how a shell reports a refused open or create: bash capitalises the errno's
// words, zsh does not, and an agent runs whichever its host's $SHELL names.
var refusal = regexp.MustCompile(`(?i)permission denied|operation not permitted|read-only file system`)

// sandboxedRealAgent is a's well-known profile, sandboxed, its executable the one .ci/peers
// installed and the fake model's environment on top; network as given.
func sandboxedRealAgent(t *testing.T, a fakemodel.Agent, network string) (activities.Profile, *fakemodel.Server) {
	t.Helper()
	fm, bin, env := realAgentEnv(t, a)
	profile, ok := activities.WellKnownProfile(a.Name)
	require.True(t, ok)
	profile.Command = strings.Join(append([]string{strconv.Quote(bin)}, a.Args...), " ")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		profile.Env[k] = v
	}
	profile.Sandbox = activities.SandboxOn
	profile.Network = network
	if network == sandbox.NetworkAllowlist {
		profile.Allow = []string{strings.TrimPrefix(fm.URL, "http://")}
	}
	return profile, fm
}

// realSandboxWorker is one real agent, sandboxed, behind a worker with a data dir of its own.
type realSandboxWorker struct {
	agent   fakemodel.Agent
	profile activities.Profile
	fm      *fakemodel.Server
	qc      *tacpclient.Client
	data    string
}

func startRealSandboxWorker(t *testing.T, a fakemodel.Agent, network string) *realSandboxWorker {
	t.Helper()
	profile, fm := sandboxedRealAgent(t, a, network)
	data := t.TempDir()
	_, qc := extraWorker(t, tc, tacpworker.Options{
		Logger:         slog.New(slog.NewTextHandler(&testLog{t: t, prefix: "worker: "}, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Profiles:       []activities.Profile{profile},
		WorkspaceRoots: []string{filepath.Join(data, "workspaces")},
		DataDir:        data,
		MaxAgents:      2,
		CancelGrace:    5 * time.Second,
		InitTimeout:    2 * time.Minute,
		// The frontend this worker dials: no agent reaches it.
		SandboxDenyPorts: []uint16{sandbox.PortOf(srv.HostPort())},
	})
	return &realSandboxWorker{agent: a, profile: profile, fm: fm, qc: qc, data: data}
}

func (w *realSandboxWorker) workspace(id string) string {
	return filepath.Join(w.data, "workspaces", id)
}

// bash has the agent's shell run command in session id under allow_all and returns the tool
// result the model was sent ("tool result: …"); the turn ended end_turn.
func (w *realSandboxWorker) bash(t *testing.T, id, command string) string {
	t.Helper()
	res, err := w.qc.Prompt(ctxFor(t, 2*time.Minute), signals.SessionConfig{SessionID: id, Policy: signals.PolicyAllowAll},
		signals.PromptRequest{Text: "tool: bash " + command, ClientMessageID: signals.NewID()})
	require.NoError(t, err)
	evs := endedWith(t, id, res.TurnID, "end_turn")
	out := strings.Join(agentTexts(t, evs, res.TurnID), "")
	t.Logf("%s: %q → %s", w.agent.Name, command, out)
	return out
}

func TestRealAgentSandboxed(t *testing.T) {
	for _, a := range sandboxedAgents {
		t.Run(a.Name, func(t *testing.T) {
			w := startRealSandboxWorker(t, a, sandbox.NetworkAll)
			a1, b1 := session(t)+"-a", session(t)+"-b"
			const secret = "the-secret-of-session-b"
			require.Contains(t, w.bash(t, b1, "echo "+secret+" > "+filepath.Join(w.workspace(b1), "secret")+" && echo written"), "written",
				"the model API works and the agent writes in its own workspace")

			t.Run("AnotherSessionsWorkspaceIsRefused", func(t *testing.T) {
				out := w.bash(t, a1, "cd "+w.workspace(a1)+" && cat ../"+b1+"/secret")
				require.Contains(t, out, "Permission denied")
				require.False(t, journalHas(t, a1, secret), "the secret is in no journal")
			})
			t.Run("WritesToTheHostTmpAndTheDataDirAreRefused", func(t *testing.T) {
				// The paths are cut from the shell's complaint: an agent may cut a long tool output
				// short for its model (Codex does, by tokens), and the test's paths are long. Bash
				// names the path before the errno's words, zsh after them.
				out := w.bash(t, a1, fmt.Sprintf("{ echo x > /tmp/outside-%s; } 2>&1 | sed 's,/[^ :]*,,g'; { echo x > %s/planted; } 2>&1 | sed 's,/[^ :]*,,g'; echo done", a1, w.data))
				// Both refused, each in the words of the errno the kernel gave the shell.
				require.Equal(t, 2, len(refusal.FindAllString(out, -1)), out)
				require.NoFileExists(t, "/tmp/outside-"+a1)
				require.NoFileExists(t, filepath.Join(w.data, "planted"))
			})
			t.Run("ReadsWritesAndGitInsideTheWorkspaceWork", func(t *testing.T) {
				ws := w.workspace(a1)
				out := w.bash(t, a1, "cd "+ws+" && echo hello > f && cat f && git init -q && git add f && "+
					"git -c user.name=t -c user.email=t@t commit -qm first && echo commits && git rev-list --count HEAD")
				require.Contains(t, out, "hello")
				require.Contains(t, out, "commits 1", "no $(…): Gemini CLI refuses command substitution")
			})
			t.Run("ALoopbackPortNotAllowedIsRefused", func(t *testing.T) {
				host, port, _ := net.SplitHostPort(srv.HostPort())
				// Bash's /dev/tcp, in a bash of its own whatever the agent's shell (zsh has no
				// /dev/tcp); not first on the line, where Gemini CLI strips a "bash -c" and runs
				// its quoted script as a command name.
				out := w.bash(t, a1, fmt.Sprintf("true && bash -c 'exec 3<>/dev/tcp/%s/%s' && echo connected", host, port))
				require.Regexp(t, refusal, out, "the Temporal frontend")
				require.NotContains(t, out, "connected")
			})
			t.Run("AnotherSessionsAgentStateIsRefused", func(t *testing.T) {
				state := filepath.Join(w.data, "sandbox", a1, "state")
				ents, err := os.ReadDir(state)
				require.NoError(t, err)
				require.NotEmpty(t, ents)
				out := w.bash(t, b1, "ls "+filepath.Join(state, ents[0].Name()))
				require.Contains(t, out, "Permission denied")
			})
		})
	}
}

// TestRealAgentSandboxedAllowlist: an allowlist naming the model API (the fake's loopback
// port) reaches it; another loopback port is refused.
func TestRealAgentSandboxedAllowlist(t *testing.T) {
	for _, a := range sandboxedAgents {
		t.Run(a.Name, func(t *testing.T) {
			w := startRealSandboxWorker(t, a, sandbox.NetworkAllowlist)
			id := session(t)
			l, err := net.Listen("tcp4", "127.0.0.1:0")
			require.NoError(t, err)
			t.Cleanup(func() { l.Close() })
			_, port, _ := net.SplitHostPort(l.Addr().String())
			out := w.bash(t, id, fmt.Sprintf("true && bash -c 'exec 3<>/dev/tcp/127.0.0.1/%s' && echo connected; curl -sS -o /dev/null https://example.invalid/ ; echo curl=$?", port))
			require.Regexp(t, refusal, out, "a loopback port the allowlist does not name")
			require.NotContains(t, out, "connected")
			require.Contains(t, out, "curl=56", "a host the allowlist does not name: the proxy refuses the tunnel")
		})
	}
}

// TestRealAgentSandboxedFailover: kill -9 of a sandboxed worker mid-turn; the turn finishes on
// another sandboxed worker, whose agent loads the session from its per-session state.
func TestRealAgentSandboxedFailover(t *testing.T) {
	// Gemini CLI's sandboxed failover lost its attempts to the 10 s heartbeat timeout
	// before the first heartbeat (agent setup on a loaded machine): not yet run here.
	for _, a := range []fakemodel.Agent{fakemodel.Claude, fakemodel.Codex} {
		t.Run(a.Name, func(t *testing.T) {
			profile, _ := sandboxedRealAgent(t, a, sandbox.NetworkAll)
			js, err := json.Marshal(profile)
			require.NoError(t, err)
			data := t.TempDir()
			env := []string{"TACP_E2E_PROFILE=" + string(js), "TACP_E2E_SANDBOX=on", "TACP_E2E_DATA=" + data,
				"TACP_E2E_ROOTS=" + filepath.Join(data, "workspaces")}
			queue := "tacp-real-sandbox-failover-" + signals.NewID()[:8]
			qc := tacpclient.NewClient(tc, queue)
			first := startWorkerProcess(t, queue, env...)
			id := session(t)
			_, err = qc.Prompt(ctxFor(t, time.Minute), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "slow: 60 tick", ClientMessageID: "turn-1"})
			require.NoError(t, err)
			chunks := 0
			waitFor(t, id, func(ev signals.Event) bool {
				if ev.Kind == signals.EventAgentUpdate && strings.Contains(string(ev.Data), `"agent_message_chunk"`) {
					chunks++
				}
				return chunks >= 3
			})
			before := waitRunning(t, id, 1)
			agents := proctree.Descendants(first.Process.Pid)
			require.NotEmpty(t, agents)
			startWorkerProcess(t, queue, env...)
			require.NoError(t, first.Process.Signal(syscall.SIGKILL))
			_ = first.Wait()
			t.Cleanup(func() {
				for _, p := range alive(agents) {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
			})
			evs := turnEndAcrossFailover(t, id, 1)
			kind, d := terminalData(t, evs)
			require.Equal(t, signals.EventTurnEnded, kind, "%v", d)
			require.Equal(t, "end_turn", d["stop_reason"])
			st, err := qc.Status(ctxFor(t, 10*time.Second), id)
			require.NoError(t, err)
			if a.Name != fakemodel.GeminiCLI.Name { // see realFailover
				require.Equal(t, before.AgentSessionID, st.AgentSessionID, "the other worker loaded the same agent session")
			}
			agentsGone(t, agents, "the dead worker's sandboxed agent")
		})
	}
}

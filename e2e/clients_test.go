package e2e

// ACP clients nobody on this team wrote, driving `starter acp`: acpx 0.19.1 and the official
// TypeScript ACP SDK's example client (@agentclientprotocol/sdk@1.9.0, under the alias
// acp-sdk-examples: 2.x ships no examples), both installed by .ci/peers with npm into
// .ci/npm (see requirePeer).

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// npmFile returns a file under .ci/npm/node_modules (see requirePeer).
func npmFile(t *testing.T, rel string) string {
	t.Helper()
	return requirePeer(t, rel)
}

// acpxCmd is acpx in dir with a HOME of its own (where it keeps its session records),
// pointed at the test server.
func acpxCmd(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctxFor(t, 90*time.Second), npmFile(t, ".bin/acpx"), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(dir, ".home"), "TEMPORAL_ADDRESS="+srv.HostPort(), "TEMPORAL_NAMESPACE="+srv.Namespace())
	return cmd
}

// acpx runs acpx in dir and returns its combined output; it must succeed.
func acpx(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := acpxCmd(t, dir, args...).CombinedOutput()
	require.NoError(t, err, "acpx %v:\n%s", args, out)
	return string(out)
}

// acpxMay runs acpx in dir and returns its output whether or not it failed.
func acpxMay(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, _ := acpxCmd(t, dir, args...).CombinedOutput()
	return string(out)
}

var acpSessionID = regexp.MustCompile(`acp-[0-9a-f]{24}`)

func TestAcpxExecThroughTheGateway(t *testing.T) {
	t.Parallel()
	dir := projectDir(t)
	agent := starterBin + " acp --agent " + gatewayAgent()
	out := acpx(t, dir, "--approve-all", "--format", "json", "--agent", agent, "exec", "/permission edit")
	require.Contains(t, out, `"stopReason":"end_turn"`)
	require.Contains(t, out, "permission: selected", "acpx approved the relayed permission request")
	id := acpSessionID.FindString(out)
	require.NotEmpty(t, id, "acpx output names the session:\n%s", out)
	evs := allEvents(t, id)
	checkInvariants(t, evs)
	var resolved bool
	for _, ev := range evs {
		resolved = resolved || ev.Kind == signals.EventPermissionResolved
	}
	require.True(t, resolved, "the journal has acpx's answer")
}

func TestAcpxPersistentSessionSurvivesTheClientQuitting(t *testing.T) {
	t.Parallel()
	dir := projectDir(t)
	// --workspace names this test's directory, so that its gateway processes can be told
	// from the other tests'.
	agent := starterBin + " acp --workspace " + dir + " --agent " + gatewayAgent()
	out := acpx(t, dir, "--format", "json", "--agent", agent, "sessions", "new")
	id := acpSessionID.FindString(out)
	require.NotEmpty(t, id, "acpx sessions new:\n%s", out)
	// Each prompt runs acpx anew (its queue owner lives one second past the turn), so the
	// second finds the session by id and re-attaches to the same durable session.
	out = acpx(t, dir, "--approve-all", "--format", "json", "--ttl", "1", "--agent", agent, "first prompt")
	require.Contains(t, out, `"stopReason":"end_turn"`)
	waitGone(t, dir) // the queue owner quits, and its gateway with it
	// acpx's queue owner may still be closing when its gateway is gone: acpx answers
	// QUEUE_OWNER_CLOSED (retryable, it says) and the prompt is run again.
	require.Eventually(t, func() bool {
		out = acpxMay(t, dir, "--approve-all", "--format", "json", "--ttl", "1", "--agent", agent, "second prompt")
		return !strings.Contains(out, "QUEUE_OWNER_CLOSED")
	}, time.Minute, 100*time.Millisecond)
	require.Contains(t, out, `"stopReason":"end_turn"`, out)
	require.Regexp(t, `"method":"session/(load|resume)","params":\{"sessionId":"`+id, out, "the second run re-attaches the session")
	evs := allEvents(t, id)
	checkInvariants(t, evs)
	require.Equal(t, "first prompt", strings.Join(agentTexts(t, evs, 1), ""))
	require.Equal(t, "second prompt", strings.Join(agentTexts(t, evs, 2), ""))
}

func TestTypeScriptSDKExampleClientThroughTheGateway(t *testing.T) {
	t.Parallel()
	script := npmFile(t, "acp-sdk-examples/dist/examples/client.js")
	// The example client starts its agent as `npx tsx agent.ts`: an npx first on PATH
	// starts the gateway instead.
	bin := t.TempDir()
	shim := "#!/bin/sh\nexec " + starterBin + " acp --agent " + gatewayAgent() + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "npx"), []byte(shim), 0o755))
	cmd := exec.CommandContext(ctxFor(t, 90*time.Second), "node", script)
	cmd.Dir = projectDir(t)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"TEMPORAL_ADDRESS="+srv.HostPort(), "TEMPORAL_NAMESPACE="+srv.Namespace())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "Agent completed with: end_turn", "%s", out)
	id := acpSessionID.FindString(string(out))
	require.NotEmpty(t, id, "%s", out)
	require.Equal(t, "Hello, agent!", strings.Join(agentTexts(t, allEvents(t, id), 1), ""))
}

// waitGone waits until no process has marker in its command line.
func waitGone(t *testing.T, marker string) {
	t.Helper()
	require.Eventually(t, func() bool {
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), marker) {
				return false
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "processes of %s still run", marker)
}

// The official TypeScript SDK (2.4.0, its ClientApp) as the editor: a form question the
// agent asks mid-turn reaches the SDK's elicitation handler — the SDK validates
// elicitation/create against its schema before the handler runs, so the question must be
// tied to the session (sessionId) — and the handler's answer reaches the agent; a url
// question's elicitation/complete names the elicitationId its create carried.
func TestTypeScriptSDKAnswersAQuestionThroughTheGateway(t *testing.T) {
	t.Parallel()
	sdk := npmFile(t, "@agentclientprotocol/sdk")
	script, err := filepath.Abs(filepath.Join("testdata", "ts_sdk_question.mjs"))
	require.NoError(t, err)
	run := func(prompt string) string {
		cmd := exec.CommandContext(ctxFor(t, 90*time.Second), "node", script,
			sdk, prompt, "--", starterBin, "acp", "--agent", gatewayAgent())
		cmd.Dir = projectDir(t)
		cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+srv.HostPort(), "TEMPORAL_NAMESPACE="+srv.Namespace())
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "stop end_turn", "%s", out)
		return string(out)
	}

	out := run("/elicit-form Which branch?")
	id := acpSessionID.FindString(out)
	require.NotEmpty(t, id, "%s", out)
	asked := regexp.MustCompile(`(?m)^asked (.*)$`).FindStringSubmatch(out)
	require.NotNil(t, asked, "the SDK's elicitation handler ran:\n%s", out)
	var q struct {
		SessionID string `json:"sessionId"`
		Mode      string `json:"mode"`
		Message   string `json:"message"`
		Meta      struct {
			Tacp struct {
				RequestID string `json:"request_id"`
			} `json:"tacp"`
		} `json:"_meta"`
	}
	require.NoError(t, json.Unmarshal([]byte(asked[1]), &q))
	require.Equal(t, id, q.SessionID, "the question is tied to the session")
	require.Equal(t, "form", q.Mode)
	require.Equal(t, "Which branch?", q.Message)
	require.NotEmpty(t, q.Meta.Tacp.RequestID)
	require.Equal(t, "form elicitation: accept: dev", strings.Join(agentTexts(t, allEvents(t, id), 1), ""), "the handler's answer reached the agent")

	out = run("/elicit-url https://example.invalid/sign-in")
	id = acpSessionID.FindString(out)
	asked = regexp.MustCompile(`(?m)^asked (.*)$`).FindStringSubmatch(out)
	require.NotNil(t, asked, "%s", out)
	var u struct {
		SessionID     string `json:"sessionId"`
		ElicitationID string `json:"elicitationId"`
	}
	require.NoError(t, json.Unmarshal([]byte(asked[1]), &u))
	require.Equal(t, id, u.SessionID)
	require.NotEmpty(t, u.ElicitationID)
	// The completion can trail the prompt's answer (the runner reports it as the turn ends):
	// the journal says it happened; the client saw it when it came before the script ended.
	waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventElicitationCompleted })
	if done := regexp.MustCompile(`(?m)^completed (.*)$`).FindStringSubmatch(out); done != nil {
		require.JSONEq(t, `{"elicitationId":"`+u.ElicitationID+`"}`, done[1], "the completion names the question its create asked")
	}
}

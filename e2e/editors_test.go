package e2e

// The editor set-ups of docs/acp.md (Zed, JetBrains, CodeCompanion, avante.nvim,
// agent-shell), launched as each editor launches them: the command, args and env of the
// snippet (its TEMPORAL_ADDRESS pointed at the test server), the real
// tacp binary, an ACP client that opens a session and runs a turn. acpx runs its set-up end
// to end from a config file written as the docs give it.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"
)

var (
	tacpOnce sync.Once
	tacpBin  string
	tacpErr  error
)

// tacpBinary builds cmd/tacp once for the tests that launch it by its name.
func tacpBinary(t *testing.T) string {
	t.Helper()
	tacpOnce.Do(func() {
		dir := filepath.Join(binDir, "tacp-bin")
		out, err := exec.CommandContext(ctxFor(t, 10*time.Minute), "go", "build", "-o", dir+"/", "../cmd/tacp").CombinedOutput()
		if err != nil {
			tacpErr = &buildError{string(out), err}
		}
		tacpBin = filepath.Join(dir, "tacp")
	})
	require.NoError(t, tacpErr)
	return tacpBin
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return "build ./cmd/tacp: " + e.err.Error() + "\n" + e.out }

// acpSnippet is the first fenced block of lang after the line holding title in docs/acp.md.
func acpSnippet(t *testing.T, title, lang string) string {
	t.Helper()
	b, err := os.ReadFile("../docs/acp.md")
	require.NoError(t, err)
	s := string(b)
	i := strings.Index(s, title)
	require.GreaterOrEqual(t, i, 0, "docs/acp.md has the %s set-up", title)
	s = s[i:]
	open := "```" + lang + "\n"
	j := strings.Index(s, open)
	require.GreaterOrEqual(t, j, 0)
	s = s[j+len(open):]
	return s[:strings.Index(s, "```")]
}

// launch is an editor set-up's command line and environment.
type launch struct {
	argv []string
	env  map[string]string
}

// quoted are the double-quoted strings of s, in order.
func quoted(s string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`"([^"]*)"`).FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// submatch is the first group of re in s; the test fails without one.
func submatch(t *testing.T, s, re string) string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	require.NotNil(t, m, "%s in:\n%s", re, s)
	return m[1]
}

// editorLaunches reads each editor set-up of docs/acp.md in its own format: JSON for Zed and
// JetBrains, Lua for CodeCompanion and avante.nvim, Emacs Lisp for agent-shell.
func editorLaunches(t *testing.T) map[string]launch {
	out := map[string]launch{}
	for _, editor := range []string{"**Zed**", "**JetBrains IDEs**"} {
		var cfg struct {
			AgentServers map[string]struct {
				Command string            `json:"command"`
				Args    []string          `json:"args"`
				Env     map[string]string `json:"env"`
			} `json:"agent_servers"`
		}
		require.NoError(t, json.Unmarshal([]byte(acpSnippet(t, editor, "json")), &cfg))
		s := cfg.AgentServers["tacp"]
		out[editor] = launch{append([]string{s.Command}, s.Args...), s.Env}
	}
	luaEnv := func(src string) map[string]string {
		m := regexp.MustCompile(`env = \{ (\w+) = "([^"]*)" \}`).FindStringSubmatch(src)
		require.NotNil(t, m, "an env table in:\n%s", src)
		return map[string]string{m[1]: m[2]}
	}
	cc := acpSnippet(t, "**Neovim, CodeCompanion**", "lua")
	out["CodeCompanion"] = launch{quoted(submatch(t, cc, `default = \{([^}]*)\}`)), luaEnv(cc)}
	av := acpSnippet(t, "**Neovim, avante.nvim**", "lua")
	out["avante.nvim"] = launch{append(quoted(submatch(t, av, `command = ("[^"]*")`)), quoted(submatch(t, av, `args = \{([^}]*)\}`))...), luaEnv(av)}
	el := acpSnippet(t, "**Emacs, agent-shell**", "elisp")
	env := map[string]string{}
	for _, kv := range quoted(submatch(t, el, `:environment-variables '\(([^)]*)\)`)) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	out["agent-shell"] = launch{append(quoted(submatch(t, el, `:command ("[^"]*")`)), quoted(submatch(t, el, `:command-params '\(([^)]*)\)`))...), env}
	return out
}

func TestEditorSetUpsRunATurnAsPasted(t *testing.T) {
	t.Parallel()
	bin := tacpBinary(t)
	for editor, s := range editorLaunches(t) {
		t.Run(strings.Trim(editor, "*"), func(t *testing.T) {
			require.Equal(t, "tacp", s.argv[0])
			ctx, cancel := context.WithCancel(context.Background())
			cmd := exec.CommandContext(ctx, bin, s.argv[1:]...)
			cmd.Env = os.Environ()
			require.NotEmpty(t, s.env["TEMPORAL_ADDRESS"], "the set-up names the Temporal frontend")
			for k, v := range s.env {
				if k == "TEMPORAL_ADDRESS" {
					v = srv.HostPort() // the snippet's localhost:7233 is this test's server
				}
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			cmd.Env = append(cmd.Env, "TEMPORAL_NAMESPACE="+srv.Namespace(), "TACP_AGENT="+gatewayAgent())
			p := connectACP(t, cmd, cancel)
			id := p.newSession()
			res, err := p.prompt(id, "/chunks 3")
			require.NoError(t, err)
			require.Equal(t, acp.StopReasonEndTurn, res.StopReason)
			require.NotEmpty(t, p.texts(false))
		})
	}
}

// The same set-ups launched by the official TypeScript SDK's client (ClientApp over the
// child's stdio), as a JavaScript editor or extension launches them.
func TestEditorSetUpsRunATurnFromTheTypeScriptSDK(t *testing.T) {
	t.Parallel()
	sdk := npmFile(t, "@agentclientprotocol/sdk")
	script, err := filepath.Abs(filepath.Join("testdata", "ts_sdk_question.mjs"))
	require.NoError(t, err)
	bin := tacpBinary(t)
	for editor, s := range editorLaunches(t) {
		t.Run(strings.Trim(editor, "*"), func(t *testing.T) {
			t.Parallel()
			require.Equal(t, "tacp", s.argv[0])
			cmd := exec.CommandContext(ctxFor(t, 90*time.Second), "node", append([]string{script, sdk, "/chunks 3", "--", bin}, s.argv[1:]...)...)
			cmd.Dir = projectDir(t)
			cmd.Env = os.Environ()
			for k, v := range s.env {
				if k == "TEMPORAL_ADDRESS" {
					v = srv.HostPort()
				}
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			cmd.Env = append(cmd.Env, "TEMPORAL_NAMESPACE="+srv.Namespace(), "TACP_AGENT="+gatewayAgent())
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), "stop end_turn", "%s", out)
			id := acpSessionID.FindString(string(out))
			require.NotEmpty(t, id, "%s", out)
			require.Equal(t, "chunk 1\nchunk 2\nchunk 3\n", strings.Join(agentTexts(t, allEvents(t, id), 1), ""))
		})
	}
}

func TestAcpxSetUpRunsATurnAsPasted(t *testing.T) {
	t.Parallel()
	npmFile(t, ".bin/acpx") // skips (or fails, TACP_REQUIRE_PEERS=1) before the build
	dir := projectDir(t)
	bin := tacpBinary(t)
	var cfg struct {
		Agents map[string]struct {
			Command string `json:"command"`
		} `json:"agents"`
	}
	require.NoError(t, json.Unmarshal([]byte(acpSnippet(t, "**acpx**", "json")), &cfg))
	command := cfg.Agents["tacp"].Command
	require.True(t, strings.HasPrefix(command, "tacp "), command)
	cfg.Agents["tacp"] = struct {
		Command string `json:"command"`
	}{bin + strings.TrimPrefix(command, "tacp")} // the snippet's command, tacp by its path
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".home", ".acpx"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".home", ".acpx", "config.json"), b, 0o600))
	cmd := acpxCmd(t, dir, "--approve-all", "--format", "json", "tacp", "exec", "/chunks 3")
	cmd.Env = append(cmd.Env, "TACP_AGENT="+gatewayAgent()) // the agent profile, from the environment
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), `"stopReason":"end_turn"`)
}

package activities

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// Reference: contract §10, "The worker is the trust boundary".

func requireInvalid(t *testing.T, err error, contains string) {
	t.Helper()
	require.Error(t, err)
	rej, ok := err.(*signals.Rejection)
	require.True(t, ok, "a refusal is a *signals.Rejection: %v", err)
	require.Equal(t, signals.RejectInvalidRequest, rej.Type)
	require.Contains(t, rej.Message, contains)
}

func testProfiles(t *testing.T) *Profiles {
	t.Helper()
	ps, err := NewProfiles([]Profile{
		{Name: "default", Command: "testagent -steering"},
		{Name: "claude", Command: "claude-agent-acp", Env: map[string]string{"IS_SANDBOX": "1"}},
	}, "")
	require.NoError(t, err)
	return ps
}

func TestProfiles_UnknownNameIsRefusedWithTheNames(t *testing.T) {
	ps := testProfiles(t)
	_, err := ps.Resolve("codex")
	requireInvalid(t, err, `unknown agent profile "codex": this worker offers claude, default`)
	pr, err := ps.Resolve("")
	require.NoError(t, err)
	require.Equal(t, "default", pr.Name, "a session naming none gets the default")
	require.Equal(t, []string{"testagent", "-steering"}, pr.Argv())
}

func TestProfiles_ACommandLineIsNotAName(t *testing.T) {
	for _, agent := range []string{"/bin/sh -c 'echo pwned > x'", "claude-agent-acp --yolo", "../x", "a/b", "", strings.Repeat("a", 65)} {
		err := signals.ValidateProfileName(agent)
		require.Error(t, err, agent)
	}
	require.NoError(t, signals.ValidateProfileName("claude-agent_acp.1"))
	tr := &Trust{Profiles: testProfiles(t), Roots: testRoots(t)}
	err := tr.Admit(signals.SessionConfig{SessionID: "s1", Agent: "/bin/sh -c 'echo pwned'"})
	requireInvalid(t, err, "no longer a command line")
}

func TestProfiles_Definitions(t *testing.T) {
	_, err := NewProfiles(nil, "")
	require.ErrorContains(t, err, "no agent profiles")
	_, err = NewProfiles([]Profile{{Name: "a", Command: "x"}, {Name: "a", Command: "y"}}, "")
	require.ErrorContains(t, err, "defined twice")
	_, err = NewProfiles([]Profile{{Name: "a b", Command: "x"}}, "")
	require.Error(t, err)
	_, err = NewProfiles([]Profile{{Name: "a", Command: "  "}}, "")
	require.ErrorContains(t, err, "empty")
	_, err = NewProfiles([]Profile{{Name: "a", Command: "x"}}, "b")
	require.ErrorContains(t, err, `default agent profile "b" is not defined`)
	ps, err := NewProfiles([]Profile{{Name: "only", Command: "x"}}, "")
	require.NoError(t, err)
	require.Equal(t, "only", ps.Default(), "the only profile is the default")
	ps, err = NewProfiles([]Profile{{Name: "a", Command: "x"}, {Name: "b", Command: "y"}}, "")
	require.NoError(t, err)
	require.Empty(t, ps.Default(), "no default among several unless named")
	_, err = ps.Resolve("")
	requireInvalid(t, err, "no default agent profile")
}

func TestProfiles_AgentEnvHidesTheWorkersSecretsAndReadsFiles(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(secret, []byte("sk-123\n"), 0o600))
	pr := Profile{Name: "claude", Command: "x", Env: map[string]string{"IS_SANDBOX": "1", "HOME": "/h"}, EnvFiles: map[string]string{"ANTHROPIC_API_KEY": secret}}
	env, err := pr.AgentEnv([]string{"PATH=/bin", "HOME=/root", "TEMPORAL_API_KEY=t", "TACP_CODEC_KEYS=k", "ANTHROPIC_API_KEY=old"})
	require.NoError(t, err)
	require.Equal(t, []string{"PATH=/bin", "HOME=/h", "IS_SANDBOX=1", "ANTHROPIC_API_KEY=sk-123"}, env)
	pr.EnvFiles["ANTHROPIC_API_KEY"] = filepath.Join(t.TempDir(), "missing")
	_, err = pr.AgentEnv(nil)
	require.ErrorContains(t, err, "ANTHROPIC_API_KEY from file")
}

func TestLoadProfiles(t *testing.T) {
	f := filepath.Join(t.TempDir(), "profiles.json")
	require.NoError(t, os.WriteFile(f, []byte(`{"default":"claude","profiles":[{"name":"claude","command":"claude-agent-acp","env":{"IS_SANDBOX":"1"}}]}`), 0o600))
	ps, def, err := LoadProfiles(f)
	require.NoError(t, err)
	require.Equal(t, "claude", def)
	require.Equal(t, "1", ps[0].Env["IS_SANDBOX"])
	require.NoError(t, os.WriteFile(f, []byte(`{"profiles":[{"name":"x","cmd":"y"}]}`), 0o600))
	_, _, err = LoadProfiles(f)
	require.ErrorContains(t, err, "unknown field", "a misspelt field is an error, not an empty command")
}

// testRoots is one root, /tmp/…/ws, with a sibling ws-evil that shares its prefix, a symlink
// inside it that points out, and a project folder.
func testRoots(t *testing.T) *Roots {
	t.Helper()
	base := t.TempDir()
	for _, d := range []string{"ws/proj", "ws-evil", "outside"} {
		require.NoError(t, os.MkdirAll(filepath.Join(base, d), 0o755))
	}
	require.NoError(t, os.Symlink(filepath.Join(base, "outside"), filepath.Join(base, "ws", "escape")))
	require.NoError(t, os.Symlink(filepath.Join(base, "ws", "proj"), filepath.Join(base, "ws", "alias")))
	require.NoError(t, os.Symlink(filepath.Join(base, "outside"), filepath.Join(base, "ws", "proj", "link")))
	require.NoError(t, os.WriteFile(filepath.Join(base, "ws", "file"), nil, 0o644))
	r, err := NewRoots([]string{filepath.Join(base, "ws")})
	require.NoError(t, err)
	return r
}

func TestRoots_WorkspacesResolveInsideARoot(t *testing.T) {
	r := testRoots(t)
	root := r.Dirs()[0]
	base := filepath.Dir(root)
	ok := map[string]string{
		"":                                   filepath.Join(root, "s1"), // the session's own folder
		"proj":                               filepath.Join(root, "proj"),
		filepath.Join(root, "proj"):          filepath.Join(root, "proj"),
		filepath.Join(root, "new", "deeper"): filepath.Join(root, "new", "deeper"),
		filepath.Join(root, "alias"):         filepath.Join(root, "proj"), // a symlink inside stays inside
		"proj/../proj":                       filepath.Join(root, "proj"),
	}
	for ws, want := range ok {
		got, err := r.Resolve("s1", ws)
		require.NoError(t, err, ws)
		require.Equal(t, want, got, ws)
	}
	refused := map[string]string{
		"/etc":                               "outside the workspace roots",
		"../x":                               "outside the workspace roots",
		filepath.Join(base, "ws-evil"):       "outside the workspace roots", // a sibling with the root's prefix
		filepath.Join(root, "escape"):        "outside the workspace roots", // a symlink out of the root
		filepath.Join(root, "escape", "sub"): "outside the workspace roots",
		root:                                 "outside the workspace roots", // the root itself holds every session
		".":                                  "outside the workspace roots",
		filepath.Join(root, "file"):          "not a directory",
		filepath.Join(root, "proj") + "/../../etc": "outside the workspace roots",
		"a\x00b": "NUL",
	}
	for ws, want := range refused {
		_, err := r.Resolve("s1", ws)
		requireInvalid(t, err, want)
	}
	_, err := r.Resolve("../../etc", "")
	requireInvalid(t, err, "session id")
}

// FuzzRootsResolve: whatever a client names, an accepted workspace is a real path strictly
// inside the root (its existing part's symlinks resolved), and nothing is created.
func FuzzRootsResolve(f *testing.F) {
	for _, s := range []string{"", "proj", "../x", "/etc", "escape/sub", "alias/../..", "proj/./../../ws-evil", "..", "/", "a//b", "~", "\x00"} {
		f.Add(s)
	}
	r := testRootsF(f)
	root := r.Dirs()[0]
	before := listTree(f, filepath.Dir(root))
	f.Fuzz(func(t *testing.T, ws string) {
		got, err := r.Resolve("s1", ws)
		if err != nil {
			if _, ok := err.(*signals.Rejection); !ok {
				t.Fatalf("refusal is not a rejection: %v", err)
			}
			return
		}
		real, rerr := realPath(got, 0)
		if rerr != nil || real != got {
			t.Fatalf("accepted %q as %q, which resolves to %q (%v)", ws, got, real, rerr)
		}
		rel, ok := within(root, got)
		if !ok || rel == "." {
			t.Fatalf("accepted %q as %q, not strictly inside %s", ws, got, root)
		}
		if after := listTree(t, filepath.Dir(root)); after != before {
			t.Fatalf("Resolve(%q) changed the file system", ws)
		}
	})
}

func testRootsF(f *testing.F) *Roots {
	base := f.TempDir()
	for _, d := range []string{"ws/proj", "ws-evil", "outside"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(base, "outside"), filepath.Join(base, "ws", "escape")); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "ws", "proj"), filepath.Join(base, "ws", "alias")); err != nil {
		f.Fatal(err)
	}
	r, err := NewRoots([]string{filepath.Join(base, "ws")})
	if err != nil {
		f.Fatal(err)
	}
	return r
}

func listTree(tb testing.TB, dir string) string {
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		b.WriteString(p + "\n")
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b.String()
}

func TestToolCallReach(t *testing.T) {
	r := testRoots(t)
	ws := filepath.Join(r.Dirs()[0], "proj")
	home := t.TempDir()
	cases := []struct {
		name, toolCall, want string
	}{
		{"a location inside", `{"kind":"read","locations":[{"path":"` + ws + `/README.md"}]}`, signals.PathsInside},
		{"a location outside", `{"kind":"read","locations":[{"path":"/etc/passwd"}]}`, signals.PathsOutside},
		{"claude's Read file_path outside", `{"kind":"read","rawInput":{"file_path":"/etc/shadow"}}`, signals.PathsOutside},
		{"a relative path inside", `{"kind":"read","rawInput":{"path":"src/main.go"}}`, signals.PathsInside},
		{"a relative path climbing out", `{"kind":"read","rawInput":{"path":"../../x"}}`, signals.PathsOutside},
		{"a symlink in the workspace that points out", `{"kind":"read","rawInput":{"path":"link/f"}}`, signals.PathsOutside},
		{"the workspace's sibling with its prefix", `{"kind":"read","rawInput":{"path":"` + ws + `-evil/f"}}`, signals.PathsOutside},
		{"grep with a path inside and a pattern", `{"kind":"search","rawInput":{"pattern":"TODO","path":"."}}`, signals.PathsInside},
		{"glob absolute outside", `{"kind":"search","rawInput":{"pattern":"/etc/**/*.conf"}}`, signals.PathsOutside},
		{"glob relative inside", `{"kind":"search","rawInput":{"pattern":"**/*.go"}}`, signals.PathsInside},
		{"home", `{"kind":"read","rawInput":{"path":"~/.ssh/id_rsa"}}`, signals.PathsOutside},
		{"another user's home", `{"kind":"read","rawInput":{"path":"~root/.ssh/id_rsa"}}`, signals.PathsOutside},
		{"one inside one outside", `{"kind":"read","rawInput":{"paths":["a","/etc/x"]}}`, signals.PathsOutside},
		{"nested input", `{"kind":"edit","rawInput":{"edits":[{"file_path":"/etc/hosts"}]}}`, signals.PathsOutside},
		{"a URL fetch names no path", `{"kind":"fetch","rawInput":{"url":"https://example.invalid/x"}}`, signals.PathsNone},
		{"a file URL outside", `{"kind":"fetch","rawInput":{"uri":"file:///etc/passwd"}}`, signals.PathsOutside},
		{"nothing", `{"kind":"read","title":"Read"}`, signals.PathsNone},
		{"not JSON", `{`, signals.PathsNone},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, ToolCallReach(json.RawMessage(c.toolCall), ws, home))
		})
	}
}

func TestMCPPolicy(t *testing.T) {
	httpSrv := acp.McpServer{Http: &acp.McpServerHttpInline{Name: "docs", Url: "http://127.0.0.1:1/mcp", Headers: []acp.HttpHeader{}}}
	stdio := acp.McpServer{Stdio: &acp.McpServerStdio{Name: "fs", Command: "/usr/bin/mcp-fs", Args: []string{}, Env: []acp.EnvVariable{}}}
	other := acp.McpServer{Stdio: &acp.McpServerStdio{Name: "sh", Command: "/bin/sh", Args: []string{"-c", "x"}, Env: []acp.EnvVariable{}}}
	require.NoError(t, MCPPolicy{Mode: MCPNone}.Check(nil))
	requireInvalid(t, MCPPolicy{Mode: MCPNone}.Check([]acp.McpServer{httpSrv}), `MCP server "docs" refused`)
	require.NoError(t, MCPPolicy{Mode: MCPHTTP}.Check([]acp.McpServer{httpSrv}))
	requireInvalid(t, MCPPolicy{Mode: MCPHTTP}.Check([]acp.McpServer{stdio}), "not one this worker's operator listed")
	listed := MCPPolicy{Mode: MCPListed, Commands: []string{"/usr/bin/mcp-fs"}}
	require.NoError(t, listed.Check([]acp.McpServer{httpSrv, stdio}))
	requireInvalid(t, listed.Check([]acp.McpServer{stdio, other}), `"/bin/sh" is not one`)
	_, err := ParseMCPMode("stdio")
	require.Error(t, err)
}

func TestProfiles_WellKnownAgentsByName(t *testing.T) {
	p, err := ParseProfileFlag("claude")
	require.NoError(t, err)
	require.Equal(t, "claude-agent-acp", p.Command)
	require.Equal(t, "1", p.Env["IS_SANDBOX"], "Claude Code under root needs exactly 1")
	g, err := ParseProfileFlag("gemini")
	require.NoError(t, err)
	require.False(t, g.OffersClientFS(), "Gemini CLI keeps its own file tools")
	require.True(t, p.OffersClientFS())
	_, err = ParseProfileFlag("cursor")
	require.ErrorContains(t, err, "claude, codex, gemini, opencode")
	c, err := ParseProfileFlag("claude=claude-agent-acp --x")
	require.NoError(t, err)
	require.Equal(t, "claude", c.Name)
	p.Env["X"] = "y"
	again, _ := WellKnownProfile("claude")
	require.NotContains(t, again.Env, "X", "a profile's env is the caller's copy")
}

package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// planRig is a worker's data dir (protected) with a workspace root inside, a session's
// workspace, its temp folder, a home folder and an npm-installed agent.
type planRig struct {
	data, root, ws, tmp, home, agent string
}

func newPlanRig(t *testing.T) planRig {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	r := planRig{data: filepath.Join(base, "data"), home: filepath.Join(base, "home")}
	r.root = filepath.Join(r.data, "workspaces")
	r.ws = filepath.Join(r.root, "s1")
	r.tmp = filepath.Join(r.data, "sandbox", "s1", "tmp")
	r.agent = filepath.Join(base, "npm", "node_modules", "@x", "agent", "dist", "index.js")
	for _, d := range []string{r.ws, r.tmp, filepath.Join(r.home, ".config", "agent"), filepath.Join(r.home, ".ssh"), filepath.Dir(r.agent), filepath.Join(base, "npm", "node_modules", ".bin")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.WriteFile(r.agent, []byte("#!/usr/bin/env node\n"), 0o755))
	require.NoError(t, os.Symlink("../@x/agent/dist/index.js", filepath.Join(base, "npm", "node_modules", ".bin", "agent")))
	return r
}

func (r planRig) plan(s Settings, argv ...string) (Policy, error) {
	if len(argv) == 0 {
		argv = []string{"/bin/sh"}
	}
	return Plan(s, Request{Argv: argv, Env: []string{"HOME=" + r.home, "PATH=/usr/bin:/bin"}, Workspace: r.ws, Tmp: r.tmp}, []string{r.data, r.root}, nil)
}

func TestPlanGrantsTheWorkspaceTempAndInstallation(t *testing.T) {
	r := newPlanRig(t)
	bin := filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(r.agent)))), ".bin", "agent")
	p, err := r.plan(Settings{}, bin, "--acp")
	require.NoError(t, err)
	require.Equal(t, r.agent, p.Exe, "the executable, its symlink followed")
	require.Equal(t, []string{bin, "--acp"}, p.Argv)
	require.Contains(t, p.ReadWrite, r.ws)
	require.Contains(t, p.ReadWrite, r.tmp)
	require.Contains(t, p.ReadOnly, filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(r.agent)))), "the whole node_modules the agent is installed in")
	require.Equal(t, NetworkAll, p.Network)
}

func TestPlanGrantsTheFilesArgumentsName(t *testing.T) {
	r := newPlanRig(t)
	script := filepath.Join(r.home, "x.py")
	require.NoError(t, os.WriteFile(script, []byte("print(1)\n"), 0o644))
	p, err := r.plan(Settings{}, "/bin/sh", script, "-v", "/no/such/file")
	require.NoError(t, err)
	require.Contains(t, p.ReadOnly, script)
	require.NotContains(t, p.ReadOnly, r.home, "the file alone, not its folder")
	require.NotContains(t, p.ReadOnly, "/no/such/file")
}

func TestPlanExtraPaths(t *testing.T) {
	r := newPlanRig(t)
	t.Run("UnderHomeWithDotDotFolded", func(t *testing.T) {
		p, err := r.plan(Settings{ReadOnly: []string{"~/.config/agent/../agent"}})
		require.NoError(t, err)
		require.Contains(t, p.ReadOnly, filepath.Join(r.home, ".config", "agent"))
	})
	t.Run("ASymlinkIsGrantedAsItsTarget", func(t *testing.T) {
		link := filepath.Join(r.home, "keys")
		require.NoError(t, os.Symlink(filepath.Join(r.home, ".ssh"), link))
		p, err := r.plan(Settings{ReadOnly: []string{link}})
		require.NoError(t, err)
		require.Contains(t, p.ReadOnly, filepath.Join(r.home, ".ssh"))
		require.NotContains(t, p.ReadOnly, link)
	})
	t.Run("AMissingReadWritePathIsAnError", func(t *testing.T) {
		_, err := r.plan(Settings{ReadWrite: []string{"~/nothing"}})
		require.ErrorContains(t, err, "read_write")
	})
	t.Run("AMissingReadOnlyPathIsSkipped", func(t *testing.T) {
		p, err := r.plan(Settings{ReadOnly: []string{"~/nothing"}})
		require.NoError(t, err)
		require.NotContains(t, p.ReadOnly, filepath.Join(r.home, "nothing"))
	})
}

func TestPlanRefusesWhatExposesAProtectedPath(t *testing.T) {
	r := newPlanRig(t)
	for name, s := range map[string]Settings{
		"the data dir":                      {ReadOnly: []string{r.data}},
		"the workspace root":                {ReadWrite: []string{r.root}},
		"an ancestor":                       {ReadOnly: []string{filepath.Dir(r.data)}},
		"an ancestor through dot-dot":       {ReadOnly: []string{r.ws + "/../../.."}},
		"a symlink to the data dir":         {ReadWrite: []string{mkLink(t, r.data, filepath.Join(r.home, "d"))}},
		"a symlink to the workspace's root": {ReadOnly: []string{mkLink(t, r.root, filepath.Join(r.home, "w"))}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := r.plan(s)
			require.ErrorContains(t, err, "refused")
		})
	}
	t.Run("AWorkspaceHoldingTheDataDir", func(t *testing.T) {
		_, err := Plan(Settings{}, Request{Argv: []string{"/bin/sh"}, Workspace: filepath.Dir(r.data), Tmp: r.tmp}, []string{r.data}, nil)
		require.ErrorContains(t, err, "refused")
	})
	t.Run("ABindMountOfTheDataDirInsideTheWorkspace", func(t *testing.T) {
		ms := []Mount{{Dev: "8:1", Root: "/", Point: "/"}, {Dev: "8:1", Root: r.data, Point: filepath.Join(r.ws, "mnt")}}
		_, err := Plan(Settings{}, Request{Argv: []string{"/bin/sh"}, Workspace: r.ws, Tmp: r.tmp}, []string{r.data}, ms)
		require.ErrorContains(t, err, "refused")
	})
}

func TestPlanProtectsInsideTheWorkspace(t *testing.T) {
	r := newPlanRig(t)
	require.NoError(t, os.MkdirAll(filepath.Join(r.ws, ".git", "hooks"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(r.ws, WorkspaceMarker), nil, 0o644))
	p, err := r.plan(Settings{})
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(r.ws, WorkspaceMarker), filepath.Join(r.ws, ".git", "hooks")}, p.Protect)

	t.Run("ASymlinkOutOfTheWorkspaceIsNotTheWorkspaces", func(t *testing.T) {
		mkLink(t, filepath.Join(r.home, ".ssh"), filepath.Join(r.ws, "out"))
		p, err := r.plan(Settings{Protect: []string{"out", "missing"}})
		require.NoError(t, err)
		require.Equal(t, []string{filepath.Join(r.ws, WorkspaceMarker)}, p.Protect)
	})
	t.Run("ProtectMustBeRelativeAndInside", func(t *testing.T) {
		for _, bad := range []string{"/etc", "../s2", "a/../../b", ""} {
			require.Error(t, Settings{Protect: []string{bad}}.Check(), bad)
		}
	})
}

func TestSettingsCheck(t *testing.T) {
	require.NoError(t, Settings{}.Check())
	require.NoError(t, Settings{Network: NetworkAllowlist, Allow: []string{"api.example.com:443", "127.0.0.1:8080", "[::1]:9"}}.Check())
	for name, s := range map[string]Settings{
		"network":             {Network: "some"},
		"allow without list":  {Allow: []string{"a:1"}},
		"allow without port":  {Network: NetworkAllowlist, Allow: []string{"api.example.com"}},
		"allow port 0":        {Network: NetworkAllowlist, Allow: []string{"a:0"}},
		"relative path":       {ReadOnly: []string{"etc"}},
		"state variable name": {State: map[string]string{"A-B": ""}},
	} {
		require.Error(t, s.Check(), name)
	}
}

func mkLink(t *testing.T, target, link string) string {
	t.Helper()
	require.NoError(t, os.Symlink(target, link))
	return link
}

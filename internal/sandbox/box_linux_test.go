//go:build linux

package sandbox

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// helperEnv makes the test binary a small program the sandboxed process runs: it dials
// the address in the variable (tcp, or mptcp:ADDR) and prints what happened.
const helperEnv = "SANDBOX_TEST_DIAL"

// ownServerEnv makes the test binary an agent with a server of its own: it listens on the
// port of its --port flag (or any port without one) and dials itself.
const ownServerEnv = "SANDBOX_TEST_OWN_SERVER"

func TestMain(m *testing.M) {
	if _, ok := os.LookupEnv(ownServerEnv); ok {
		port := "0"
		for i, a := range os.Args {
			if a == "--port" && i+1 < len(os.Args) {
				port = os.Args[i+1]
			}
		}
		l, err := net.Listen("tcp4", "127.0.0.1:"+port)
		if err != nil {
			fmt.Println("listen: " + err.Error())
			os.Exit(0)
		}
		go func() {
			if c, err := l.Accept(); err == nil {
				c.Close()
			}
		}()
		fmt.Println(dial(l.Addr().String()))
		os.Exit(0)
	}
	if addr, ok := os.LookupEnv(helperEnv); ok {
		fmt.Println(dial(addr))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func dial(addr string) string {
	if rest, ok := strings.CutPrefix(addr, "mptcp:"); ok {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, ipMPTCP)
		if err != nil {
			return "socket: " + err.Error()
		}
		defer syscall.Close(fd)
		ta, _ := net.ResolveTCPAddr("tcp4", rest)
		if err := syscall.Connect(fd, &syscall.SockaddrInet4{Port: ta.Port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return "connect: " + err.Error()
		}
		return "connected"
	}
	if rest, ok := strings.CutPrefix(addr, "udp:"); ok {
		c, err := net.Dial("udp4", rest)
		if err != nil {
			return "udp: " + err.Error()
		}
		c.Close()
		return "connected"
	}
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		return err.Error()
	}
	c.Close()
	return "connected"
}

// rig is one worker's data dir with two sessions' workspaces, and a Box.
type rig struct {
	data, ws, other, secret string
	box                     *Box
	open, denied            string // loopback addresses: one any agent may reach, one no agent may
}

func newRig(t *testing.T) *rig {
	t.Helper()
	require.NoError(t, Supported(), "this project's machines sandbox agents")
	r := &rig{data: t.TempDir()}
	roots := filepath.Join(r.data, "workspaces")
	r.ws, r.other = filepath.Join(roots, "s1"), filepath.Join(roots, "s2")
	r.secret = filepath.Join(r.other, "secret")
	require.NoError(t, os.MkdirAll(filepath.Join(r.ws, ".git", "hooks"), 0o755))
	require.NoError(t, os.MkdirAll(r.other, 0o755))
	require.NoError(t, os.WriteFile(r.secret, []byte("the other session's secret"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(r.ws, WorkspaceMarker), []byte("s1\n"), 0o644))
	open, denied := listen(t), listen(t)
	r.open, r.denied = open.Addr().String(), denied.Addr().String()
	box, err := NewBox(filepath.Join(r.data, "sandbox"), []string{r.data, roots}, []uint16{PortOf(r.denied)})
	require.NoError(t, err)
	t.Cleanup(box.Close)
	r.box = box
	return r
}

func listen(t *testing.T) net.Listener {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l
}

// run runs argv sandboxed by s as session s1's agent and returns its output.
func (r *rig) run(t *testing.T, s Settings, env []string, argv ...string) string {
	t.Helper()
	argv, env, err := r.box.Command(s, "s1", r.ws, argv, append(os.Environ(), env...))
	require.NoError(t, err)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, r.ws
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	ForkAttr(cmd.SysProcAttr, env)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, Start(cmd))
	require.NoError(t, cmd.Wait(), "%s", out.String())
	return strings.TrimSpace(out.String())
}

func (r *rig) sh(t *testing.T, s Settings, script string) string {
	return r.run(t, s, nil, "/bin/sh", "-c", script)
}

func TestSandboxFiles(t *testing.T) {
	r := newRig(t)
	s := Settings{}
	t.Run("ReadOfAnotherSessionsWorkspaceIsRefused", func(t *testing.T) {
		out := r.sh(t, s, "cat ../s2/secret; echo rc=$?")
		require.Contains(t, out, "Permission denied")
		require.NotContains(t, out, "secret's")
	})
	t.Run("ListingTheWorkspaceRootIsRefused", func(t *testing.T) {
		require.Contains(t, r.sh(t, s, "ls "+filepath.Dir(r.ws)+"; echo rc=$?"), "Permission denied")
	})
	t.Run("WritesToTheHostTmpAndTheDataDirAreRefused", func(t *testing.T) {
		out := r.sh(t, s, "echo x > /tmp/outside-s1; echo rc=$?; echo x > "+r.data+"/planted; echo rc=$?")
		require.Equal(t, 2, strings.Count(out, "Permission denied"), out)
		require.NoFileExists(t, "/tmp/outside-s1")
		require.NoFileExists(t, filepath.Join(r.data, "planted"))
	})
	t.Run("ReadsAndWritesInsideTheWorkspaceWork", func(t *testing.T) {
		out := r.sh(t, s, "mkdir -p sub && echo hello > sub/f && mv sub/f g && cat g && rm g && echo done")
		require.Equal(t, "hello\ndone", out)
	})
	t.Run("TmpdirIsTheSessionsOwn", func(t *testing.T) {
		out := r.sh(t, s, `echo "$TMPDIR"; echo t > "$TMPDIR/x" && cat "$TMPDIR/x"`)
		lines := strings.Split(out, "\n")
		require.Equal(t, filepath.Join(r.box.Dir, "s1", "tmp"), lines[0])
		require.Equal(t, "t", lines[1])
	})
	t.Run("TheMarkerAndGitHooksAreReadOnly", func(t *testing.T) {
		out := r.sh(t, s, "cat .tacp-workspace; echo x >> .tacp-workspace; echo rc=$?; echo x > .git/hooks/pre-commit; echo rc=$?; echo ok > .git/config && echo config-written")
		require.Contains(t, out, "s1")
		require.Equal(t, 2, strings.Count(out, "Read-only file system"), out)
		require.Contains(t, out, "config-written", "the rest of .git stays writable")
		require.NoFileExists(t, filepath.Join(r.ws, ".git", "hooks", "pre-commit"))
	})
	t.Run("HomeIsNotReadable", func(t *testing.T) {
		home := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(home, ".netrc"), []byte("machine x password y"), 0o600))
		out := r.run(t, s, []string{"HOME=" + home}, "/bin/sh", "-c", "cat ~/.netrc; echo rc=$?")
		require.Contains(t, out, "Permission denied")
	})
	t.Run("TheWorkerCannotBeSignalled", func(t *testing.T) {
		out := r.sh(t, s, fmt.Sprintf("kill -0 %d; echo rc=$?", os.Getpid()))
		require.Contains(t, out, "rc=1", "Landlock's signal scope")
	})
}

func TestSandboxNetwork(t *testing.T) {
	r := newRig(t)
	dial := func(t *testing.T, s Settings, addr string) string {
		return r.run(t, s, []string{helperEnv + "=" + addr}, os.Args[0])
	}
	t.Run("AllReachesAnOpenPort", func(t *testing.T) {
		require.Equal(t, "connected", dial(t, Settings{}, r.open))
	})
	t.Run("AllNeverReachesADeniedPort", func(t *testing.T) {
		require.Contains(t, dial(t, Settings{}, r.denied), "permission denied")
	})
	t.Run("MultipathTCPDoesNotGoAround", func(t *testing.T) {
		require.Contains(t, dial(t, Settings{}, "mptcp:"+r.denied), "protocol not supported")
	})
	t.Run("NoneReachesNothing", func(t *testing.T) {
		none := Settings{Network: NetworkNone}
		require.Contains(t, dial(t, none, r.open), "permission denied")
		require.Contains(t, dial(t, none, "udp:"+r.open), "permission denied")
	})
	t.Run("AllowlistReachesItsLoopbackPortsOnly", func(t *testing.T) {
		al := Settings{Network: NetworkAllowlist, Allow: []string{r.open}}
		require.Equal(t, "connected", dial(t, al, r.open))
		other := listen(t)
		require.Contains(t, dial(t, al, other.Addr().String()), "permission denied")
		require.Contains(t, dial(t, al, "udp:"+r.open), "permission denied")
	})
	t.Run("AnAllowlistedAgentReachesItsOwnServersPort", func(t *testing.T) {
		s := Settings{Network: NetworkAllowlist, Allow: []string{r.open}}
		require.Contains(t, r.run(t, s, []string{ownServerEnv + "=1"}, os.Args[0]), "permission denied", "a port of the agent's choosing")
		s.OwnPortFlag = "--port"
		require.Equal(t, "connected", r.run(t, s, []string{ownServerEnv + "=1"}, os.Args[0]), "the port the sandbox gave it")
		require.Contains(t, dial(t, s, listen(t).Addr().String()), "permission denied", "and no other")
		_, _, err := r.box.Command(Settings{Network: NetworkNone, OwnPortFlag: "--port"}, "s1", r.ws, []string{"/bin/true"}, os.Environ())
		require.ErrorContains(t, err, "cannot run with network")
	})
	t.Run("AnAllowlistNamingADeniedPortIsRefused", func(t *testing.T) {
		_, _, err := r.box.Command(Settings{Network: NetworkAllowlist, Allow: []string{r.denied}}, "s1", r.ws, []string{"/bin/true"}, os.Environ())
		require.ErrorContains(t, err, "refused")
	})
}

func TestListeningPortsAreThisProcesssOwn(t *testing.T) {
	l := listen(t)
	port := PortOf(l.Addr().String())
	require.Contains(t, ListeningPorts(), port)
	require.NoError(t, l.Close())
	require.NotContains(t, ListeningPorts(), port)
}

// A state seed "~/.config/./opencode" copies ~/.config/opencode's files into the session's
// folder under opencode/, where the agent looks for them (XDG_CONFIG_HOME/opencode): the
// "/./" survives the expansion of "~".
func TestAStateSeedKeepsItsSubfolder(t *testing.T) {
	home := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".config", "opencode"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".config", "opencode", "opencode.json"), []byte("{}"), 0o644))
	box, err := NewBox(t.TempDir(), nil, nil)
	require.NoError(t, err)
	defer box.Close()
	ws := t.TempDir()
	_, env, err := box.Command(Settings{State: map[string]string{"XDG_CONFIG_HOME": "~/.config/./opencode"}}, "s1", ws,
		[]string{"/bin/true"}, []string{"HOME=" + home})
	require.NoError(t, err)
	dir := envValue(env, "XDG_CONFIG_HOME")
	require.FileExists(t, filepath.Join(dir, "opencode", "opencode.json"))
	require.NoFileExists(t, filepath.Join(dir, "opencode.json"))
}

// An agent started through a version manager's shim in the home folder (pyenv's layout: a
// script in shims/ that runs the manager's helper, which runs the version installed under
// the same root) runs: the manager's root is read-only to it, the rest of the home is not.
func TestAnAgentBehindAVersionManagersShimRuns(t *testing.T) {
	r := newRig(t)
	home := t.TempDir()
	root := filepath.Join(home, ".pyenv")
	for _, d := range []string{"shims", "libexec", "versions/3.12/bin"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	write := func(path, body string) {
		require.NoError(t, os.WriteFile(path, []byte(body), 0o755))
	}
	write(filepath.Join(root, "shims", "agent"), "#!/bin/sh\nexec \"$HOME/.pyenv/libexec/pyenv\" exec agent \"$@\"\n")
	write(filepath.Join(root, "libexec", "pyenv"), "#!/bin/sh\nv=$(cat \"$HOME/.pyenv/version\")\nshift\nexec \"$HOME/.pyenv/versions/$v/bin/$1\"\n")
	write(filepath.Join(root, "version"), "3.12\n")
	write(filepath.Join(root, "versions", "3.12", "bin", "agent"), "#!/bin/sh\necho agent ran; cat \"$HOME/.netrc\" 2>&1 || true\n")
	require.NoError(t, os.WriteFile(filepath.Join(home, ".netrc"), []byte("machine x password y"), 0o600))

	out := r.run(t, Settings{}, []string{"HOME=" + home, "PYENV_ROOT=" + root}, filepath.Join(root, "shims", "agent"))
	require.Contains(t, out, "agent ran")
	require.Contains(t, out, "Permission denied", "the rest of the home stays closed")
	require.NotContains(t, out, "password")
}

// Package sandbox confines every agent process in a kernel sandbox of its session (issue
// 26): the session's workspace, a temp folder and agent state of its own, the system and the
// agent's installation read-only, nothing else of the machine, and the network its profile
// allows. tacp's fs sandbox (activities.Sandbox) sees only the file requests an agent sends
// through ACP; this one holds for whatever the agent's own shell runs.
//
// The mechanism is Landlock (ABI 6 or later: files, TCP connect and bind, and the scopes that
// keep signals and abstract sockets inside the sandbox) and a small seccomp filter (no
// Multipath TCP, raw or packet sockets, which Landlock's TCP rules do not see, no io_uring,
// and no IP sockets at all without network). It is applied by the worker's own binary run
// again, as the reaper is (activities/reaper.go): startAgent runs /proc/self/exe with the
// policy in an environment variable; this package's init applies it to the process and then
// execs the agent, so the sandbox holds before the agent's first instruction and is inherited
// by everything it starts. A process cannot leave a Landlock domain.
//
// This file holds the policy: what a profile asks for (Settings), what the worker refuses to
// grant (the path rules, paths.go) and what the child applies (Policy).
package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The network a profile's agent may reach.
const (
	// NetworkAll: any TCP port, except the Temporal frontend's and the worker's own.
	NetworkAll = "all"
	// NetworkNone: no IP socket at all.
	NetworkNone = "none"
	// NetworkAllowlist: the hosts of Settings.Allow only, through the worker's egress proxy
	// (a loopback entry is also reachable directly: Landlock names ports, not addresses).
	NetworkAllowlist = "allowlist"
)

// ParseNetwork checks a network setting ("" is NetworkAll).
func ParseNetwork(s string) (string, error) {
	switch s {
	case "", NetworkAll:
		return NetworkAll, nil
	case NetworkNone, NetworkAllowlist:
		return s, nil
	}
	return "", fmt.Errorf("network %q: want %s, %s or %s", s, NetworkAll, NetworkNone, NetworkAllowlist)
}

// DefaultProtect are the workspace paths an agent may read but not change unless its profile
// says otherwise: a hook planted in .git/hooks would run outside the sandbox, in the next git
// command a person runs there.
var DefaultProtect = []string{".git/hooks"}

// Settings are a profile's sandbox settings (the profiles file's fields).
type Settings struct {
	// Network is NetworkAll (""), NetworkNone or NetworkAllowlist.
	Network string `json:"network,omitempty"`
	// Allow lists the host:port an allowlist reaches.
	Allow []string `json:"allow,omitempty"`
	// ReadOnly and ReadWrite are more paths the agent may read, or also write (absolute, or
	// under "~/": the agent's HOME). A missing ReadOnly path is skipped (nothing to read); a
	// missing ReadWrite path is an error.
	ReadOnly  []string `json:"read_only,omitempty"`
	ReadWrite []string `json:"read_write,omitempty"`
	// Protect are workspace paths kept read-only (nil: DefaultProtect; tacp's workspace
	// marker always is).
	Protect []string `json:"protect,omitempty"`
	// State are the agent's state folders kept per session: an environment variable the
	// agent reads its folder from, and the folder whose files seed a session's own copy
	// ("~/.claude"; empty: the variable's value in the agent's environment; "~/.config/./opencode":
	// the files of ~/.config/opencode into the folder's opencode/). Each session's agent gets
	// a folder of its own in the variable, its conversations included.
	State map[string]string `json:"state,omitempty"`
	// OwnPortFlag is the flag an agent takes for the loopback port of a server of its own
	// that it connects to itself (OpenCode's `--port`): the sandbox picks a free port for
	// each agent start, passes it as the flag's value, and lets that agent connect to it
	// under an allowlist (which would refuse a port the agent chose at random). Landlock's
	// port rules know no address: the agent may connect to that one port on any host. A
	// profile without network cannot have one (its IP sockets are refused outright).
	OwnPortFlag string `json:"own_port_flag,omitempty"`
}

// Check reports the first invalid setting.
func (s Settings) Check() error {
	n, err := ParseNetwork(s.Network)
	if err != nil {
		return err
	}
	if n != NetworkAllowlist && len(s.Allow) > 0 {
		return fmt.Errorf("allow is for network %q, not %q", NetworkAllowlist, n)
	}
	for _, a := range s.Allow {
		if _, _, err := splitHostPort(a); err != nil {
			return fmt.Errorf("allow %q: %w", a, err)
		}
	}
	if s.OwnPortFlag != "" && !strings.HasPrefix(s.OwnPortFlag, "-") {
		return fmt.Errorf("own_port_flag %q: want a flag (-…)", s.OwnPortFlag)
	}
	if s.OwnPortFlag != "" && n == NetworkNone {
		return fmt.Errorf("own_port_flag: an agent with a server of its own cannot run with network %q (its sockets are refused); use %q", NetworkNone, NetworkAllowlist)
	}
	for _, p := range append(slices.Clone(s.ReadOnly), s.ReadWrite...) {
		if !filepath.IsAbs(p) && p != "~" && !strings.HasPrefix(p, "~/") {
			return fmt.Errorf("path %q: want an absolute path or one under ~/", p)
		}
	}
	for _, p := range s.Protect {
		if p == "" || filepath.IsAbs(p) || !filepath.IsLocal(p) {
			return fmt.Errorf("protect %q: want a path inside the workspace, relative to it", p)
		}
	}
	for k := range s.State {
		if !ValidEnvName(k) {
			return fmt.Errorf("state: %q is not an environment variable name", k)
		}
	}
	return nil
}

// splitHostPort parses an allowlist entry.
func splitHostPort(a string) (string, uint16, error) {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 || host == "" {
		return "", 0, errors.New("want host:port")
	}
	return strings.ToLower(host), uint16(n), nil
}

// PolicyEnv carries the policy (JSON) from the worker to the sandboxing step.
const PolicyEnv = "TACP_SANDBOX_POLICY"

// Policy is what the sandboxing step applies before it execs the agent: absolute paths,
// symlinks resolved, checked by Plan.
type Policy struct {
	// Exe is the agent's executable; Argv its arguments (Argv[0] as the profile names it).
	Exe  string   `json:"exe"`
	Argv []string `json:"argv"`
	// ReadOnly may be read and executed; ReadWrite also written. Files or directories.
	ReadOnly  []string `json:"ro"`
	ReadWrite []string `json:"rw"`
	// Optional are read-only system paths that may be missing on this machine.
	Optional []string `json:"optional,omitempty"`
	// Protect are paths inside ReadWrite made read-only by a bind mount in the agent's own
	// mount namespace (Landlock grants add up along a path and cannot take a right back).
	Protect []string `json:"protect,omitempty"`
	// Network is the mode; ConnectPorts the TCP ports an allowlist connects to; NetFD, when
	// positive, an inherited Landlock ruleset of the network rules (NetworkAll's 65,000 port
	// rules are built once per worker, not per agent).
	Network      string   `json:"network"`
	ConnectPorts []uint16 `json:"connect,omitempty"`
	NetFD        int      `json:"net_fd,omitempty"`
	// OwnPort is the agent's own server's port (Settings.OwnPortFlag): its network ruleset
	// is the agent's alone, and Start closes the worker's copy once the agent started.
	OwnPort uint16 `json:"own_port,omitempty"`
}

// systemReadOnly are what every agent reads: programs, libraries, configuration, and the
// kernel's views of the process. /proc shows other processes' command lines but not their
// environment, memory or files: Landlock keeps ptrace, and so those, inside the sandbox.
var systemReadOnly = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/sys", "/dev", "/run/systemd/resolve"}

// systemReadWrite are the device files every program writes.
var systemReadWrite = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts"}

// Request is one agent start to sandbox.
type Request struct {
	// Argv is the profile's command; Env the agent's environment; Workspace its real folder.
	Argv      []string
	Env       []string
	Workspace string
	// Tmp and State are the session's own folders (created by the worker): TMPDIR, and one
	// per Settings.State variable.
	Tmp   string
	State map[string]string
}

// Plan turns a profile's settings and one agent start into the policy to apply, or refuses
// it: a grant that would expose a protected path (the worker's data dir, a workspace root
// and with it other sessions' workspaces), a path that is not there. mounts are the worker's
// (ParseMountinfo); protected are absolute and real.
func Plan(s Settings, r Request, protected []string, mounts []Mount) (Policy, error) {
	if len(r.Argv) == 0 {
		return Policy{}, errors.New("no agent command")
	}
	home := envValue(r.Env, "HOME")
	exe, err := lookPath(r.Argv[0], envValue(r.Env, "PATH"))
	if err != nil {
		return Policy{}, fmt.Errorf("agent command %q: %w", r.Argv[0], err)
	}
	p := Policy{Exe: exe, Argv: slices.Clone(r.Argv), Optional: slices.Clone(systemReadOnly)}
	p.Network, _ = ParseNetwork(s.Network)
	// Read-only: the agent's installation (its executable, what its arguments name).
	for _, f := range append([]string{exe}, r.Argv[1:]...) {
		if !filepath.IsAbs(f) {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			continue // an argument that is no file (or one not there yet): nothing to grant
		}
		for _, g := range []string{installation(filepath.Clean(f)), f} {
			real, err := resolve(g)
			if err == nil {
				p.ReadOnly = appendNew(p.ReadOnly, installation(real))
			}
		}
	}
	// An agent started through a version manager's shim (pyenv, rbenv, asdf, mise, volta, …)
	// reads the manager's root.
	for _, g := range managerGrants(exe, r.Env) {
		p.ReadOnly = appendNew(p.ReadOnly, g)
	}
	for _, f := range s.ReadOnly {
		real, err := resolve(expandHome(f, home))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return Policy{}, fmt.Errorf("read_only %q: %w", f, err)
		}
		p.ReadOnly = appendNew(p.ReadOnly, real)
	}
	// Read-write: the workspace, the session's temp and state, the devices, the extras.
	rw := []string{r.Workspace, r.Tmp}
	for _, k := range sortedKeys(r.State) {
		rw = append(rw, r.State[k])
	}
	for _, f := range rw {
		real, err := resolve(f)
		if err != nil {
			return Policy{}, fmt.Errorf("sandbox folder: %w", err)
		}
		p.ReadWrite = appendNew(p.ReadWrite, real)
	}
	for _, f := range s.ReadWrite {
		real, err := resolve(expandHome(f, home))
		if err != nil {
			return Policy{}, fmt.Errorf("read_write %q: %w", f, err)
		}
		p.ReadWrite = appendNew(p.ReadWrite, real)
	}
	for _, f := range systemReadWrite {
		if real, err := resolve(f); err == nil {
			p.ReadWrite = appendNew(p.ReadWrite, real)
		}
	}
	// The path rules.
	var sys []string
	for _, f := range systemReadOnly {
		if real, err := resolve(f); err == nil {
			sys = append(sys, real)
		}
	}
	for _, pr := range protected {
		for _, g := range slices.Concat(p.ReadOnly, p.ReadWrite, sys) {
			if Exposes(mounts, g, pr) {
				return Policy{}, fmt.Errorf("the sandbox would grant %s, which holds %s (the worker's data or another session's workspace): refused", g, pr)
			}
		}
	}
	// Inside the workspace, read-only.
	protect := s.Protect
	if protect == nil {
		protect = DefaultProtect
	}
	for _, rel := range append([]string{WorkspaceMarker}, protect...) {
		real, err := resolve(filepath.Join(r.Workspace, rel))
		if err != nil || !within(real, r.Workspace) || real == r.Workspace {
			continue // missing, or not the workspace's own (a symlink out of it is not granted)
		}
		p.Protect = appendNew(p.Protect, real)
	}
	if p.Network == NetworkAllowlist {
		for _, a := range s.Allow {
			host, port, _ := splitHostPort(a)
			if isLoopback(host) {
				p.ConnectPorts = appendNew(p.ConnectPorts, port)
			}
		}
	}
	return p, nil
}

// WorkspaceMarker is tacp's file in a workspace it created (activities.WorkspaceMarker).
const WorkspaceMarker = ".tacp-workspace"

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// lookPath finds name as execve would with the agent's PATH, and resolves it.
func lookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		abs, err := filepath.Abs(name)
		if err != nil {
			return "", err
		}
		return resolve(abs)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		f := filepath.Join(dir, name)
		if fi, err := os.Stat(f); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			abs, err := filepath.Abs(f)
			if err != nil {
				return "", err
			}
			return resolve(abs)
		}
	}
	return "", fmt.Errorf("not found in PATH %q", path)
}

func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

func appendNew[T comparable](s []T, v T) []T {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ValidEnvName reports whether s is a name an environment variable may have
// ([A-Za-z_][A-Za-z0-9_]*): the profiles' env, env_files and state keys.
func ValidEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9' {
			continue
		}
		return false
	}
	return true
}

// PortOf returns the port of a host:port address (0 when it has none).
func PortOf(addr string) uint16 {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return 0
	}
	return uint16(n)
}

//go:build linux

package sandbox

// The worker's side: what every agent's sandbox on one worker shares (Box), and how one agent
// start is wrapped into the sandboxing step (Command, ForkAttr).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// pretendABI, when not negative, stands in for the kernel's Landlock ABI (PretendABI).
var pretendABI = -1

// PretendABI makes Supported judge the kernel as if its Landlock ABI were abi, until the
// returned func is called: for tests of the refusal a worker on an older kernel gives.
func PretendABI(abi int) (restore func()) {
	pretendABI = abi
	return func() { pretendABI = -1 }
}

// Supported reports why this kernel cannot sandbox an agent (nil: it can).
func Supported() error {
	abi := ABI()
	if pretendABI >= 0 {
		abi = pretendABI
	}
	if abi < MinABI {
		return fmt.Errorf("the kernel's Landlock is ABI %d, and a sandbox needs ABI %d or later (Linux 6.12, with landlock in the lsm= boot parameter; a container may hide it)", abi, MinABI)
	}
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("the kernel has no seccomp filters (CONFIG_SECCOMP_FILTER): %v", err)
	}
	if _, ok := nativeArch(); !ok {
		return fmt.Errorf("no seccomp filter for this architecture")
	}
	return nil
}

// Box is what the sandboxes of one worker's agents share.
type Box struct {
	// Dir holds each session's own folders: Dir/<session>/tmp and Dir/<session>/state/<VAR>.
	Dir string
	// Protected are paths no grant may expose: the worker's data dir, the workspace roots.
	Protected []string
	// DenyPorts are TCP ports no agent may connect to, whatever its profile: the Temporal
	// frontend's, the worker's own.
	DenyPorts []uint16
	mu        sync.Mutex
	nets      map[string]int    // network rulesets by mode and ports, kept open for every agent
	proxies   map[string]*Proxy // egress proxies by allowlist
}

// NewBox checks that the kernel can sandbox and returns the worker's Box: per-session folders
// under dir, protected and deny as Box says.
func NewBox(dir string, protected []string, deny []uint16) (*Box, error) {
	if err := Supported(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	real, err := resolve(dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	b := &Box{Dir: real, DenyPorts: slices.Clone(deny), nets: map[string]int{}, proxies: map[string]*Proxy{}}
	for _, p := range protected {
		if r, err := resolve(p); err == nil {
			b.Protected = appendNew(b.Protected, r)
		}
	}
	return b, nil
}

// Command wraps one agent start: the sandboxing step's argv and env (for exec.Cmd, with
// ForkAttr) that apply s to the agent argv runs with env in workspace (real), for session.
// It creates the session's temp and state folders, seeding a new state folder with the files
// of its seed. A refusal (a path rule) changes nothing the agent would see.
func (b *Box) Command(s Settings, session, workspace string, argv, env []string) ([]string, []string, error) {
	if session == "" || session == "." || session == ".." || strings.ContainsAny(session, "/\x00") {
		return nil, nil, fmt.Errorf("sandbox: invalid session id %q", session)
	}
	if err := s.Check(); err != nil {
		return nil, nil, err
	}
	var own uint16
	if s.OwnPortFlag != "" {
		var err error
		if own, err = freeLoopbackPort(); err != nil {
			return nil, nil, fmt.Errorf("sandbox: a port for the agent's own server: %w", err)
		}
		argv = append(slices.Clone(argv), s.OwnPortFlag, strconv.Itoa(int(own)))
	}
	base := filepath.Join(b.Dir, session)
	req := Request{Argv: argv, Workspace: workspace, Tmp: filepath.Join(base, "tmp"), State: map[string]string{}}
	if err := os.MkdirAll(req.Tmp, 0o700); err != nil {
		return nil, nil, fmt.Errorf("sandbox temp: %w", err)
	}
	env = slices.Clone(env)
	home := envValue(env, "HOME")
	for _, k := range sortedKeys(s.State) {
		seed := s.State[k]
		if seed == "" {
			seed = envValue(env, k)
		}
		dir := filepath.Join(base, "state", k)
		if err := seedState(dir, expandHome(seed, home)); err != nil {
			return nil, nil, fmt.Errorf("sandbox state %s: %w", k, err)
		}
		req.State[k] = dir
		env = setEnv(env, k, dir)
	}
	for _, k := range []string{"TMPDIR", "TMP", "TEMP"} {
		env = setEnv(env, k, req.Tmp)
	}
	// git dies when it cannot read ~/.gitconfig (outside the sandbox: it may hold tokens);
	// the session's agent gets a global git config of its own, empty at first.
	if envValue(env, "GIT_CONFIG_GLOBAL") == "" {
		gc := filepath.Join(base, "gitconfig")
		f, err := os.OpenFile(gc, os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("sandbox git config: %w", err)
		}
		f.Close()
		req.State["GIT_CONFIG_GLOBAL"] = gc
		env = setEnv(env, "GIT_CONFIG_GLOBAL", gc)
	}
	network, _ := ParseNetwork(s.Network)
	var px *Proxy
	if network == NetworkAllowlist {
		var err error
		if px, err = b.proxy(s.Allow); err != nil {
			return nil, nil, err
		}
		u := "http://" + px.Addr()
		for _, k := range []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"} {
			env = setEnv(env, k, u)
		}
		// Loopback goes direct: the kernel decides which of its ports the agent reaches (the
		// allowlist's, its own server's), and the proxy would refuse its own server's port.
		env = setEnv(env, "NO_PROXY", "localhost,127.0.0.1,::1")
		env = setEnv(env, "no_proxy", "localhost,127.0.0.1,::1")
	}
	req.Env = env
	p, err := Plan(s, req, b.Protected, readMounts())
	if err != nil {
		return nil, nil, err
	}
	ports := p.ConnectPorts
	if network == NetworkAllowlist {
		ports = append(ports, px.Port())
	}
	for _, d := range b.DenyPorts {
		if slices.Contains(ports, d) {
			return nil, nil, fmt.Errorf("the sandbox's allowlist names port %d, which is the Temporal frontend's or this worker's own: refused", d)
		}
	}
	if own != 0 {
		// The agent's own port makes its ruleset its alone (Start closes it after the fork).
		p.OwnPort = own
		if p.NetFD, err = netRuleset(network, ports, b.DenyPorts, own); err != nil {
			return nil, nil, fmt.Errorf("sandbox network rules: %w", err)
		}
		if _, err := unix.FcntlInt(uintptr(p.NetFD), unix.F_SETFD, 0); err != nil {
			unix.Close(p.NetFD)
			return nil, nil, err
		}
	} else if p.NetFD, err = b.netFD(network, ports); err != nil {
		return nil, nil, err
	}
	js, err := json.Marshal(p)
	if err != nil {
		return nil, nil, err
	}
	// This very binary (even when its file was replaced since), run as the sandboxing step.
	return append([]string{"/proc/self/exe"}, argv...), append(env, PolicyEnv+"="+string(js)), nil
}

// netFD returns the network ruleset of mode and ports, built once and kept open without
// close-on-exec: every sandboxing step this worker starts inherits it (a Landlock ruleset
// only ever takes rights away from whoever applies it).
func (b *Box) netFD(mode string, ports []uint16) (int, error) {
	ports = slices.Clone(ports)
	slices.Sort(ports)
	key := mode + fmt.Sprint(ports)
	b.mu.Lock()
	defer b.mu.Unlock()
	if fd, ok := b.nets[key]; ok {
		return fd, nil
	}
	fd, err := netRuleset(mode, ports, b.DenyPorts, 0)
	if err != nil {
		return -1, fmt.Errorf("sandbox network rules: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
		unix.Close(fd)
		return -1, err
	}
	b.nets[key] = fd
	return fd, nil
}

// proxy returns the egress proxy of allow, started the first time.
func (b *Box) proxy(allow []string) (*Proxy, error) {
	key := slices.Clone(allow)
	slices.Sort(key)
	b.mu.Lock()
	defer b.mu.Unlock()
	if px, ok := b.proxies[fmt.Sprint(key)]; ok {
		return px, nil
	}
	px, err := StartProxy("127.0.0.1:0", allow, b.DenyPorts)
	if err != nil {
		return nil, fmt.Errorf("sandbox egress proxy: %w", err)
	}
	b.proxies[fmt.Sprint(key)] = px
	return px, nil
}

// Refusals counts what the egress proxies refused.
func (b *Box) Refusals() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n int64
	for _, px := range b.proxies {
		n += px.Refusals()
	}
	return n
}

// Close stops the egress proxies and closes the network rulesets.
func (b *Box) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, px := range b.proxies {
		_ = px.Close()
		delete(b.proxies, k)
	}
	for k, fd := range b.nets {
		_ = unix.Close(fd)
		delete(b.nets, k)
	}
}

// ForkAttr adds to attr what the sandboxing step of env (Command's) needs from the fork: a
// mount namespace of its own where workspace paths are protected, in a user namespace of
// its own (with CAP_SYS_ADMIN there until the step drops it) when the worker is not root.
// Without a sandbox in env it changes nothing.
func ForkAttr(attr *syscall.SysProcAttr, env []string) {
	v := envValue(env, PolicyEnv)
	if v == "" {
		return
	}
	var p Policy
	if json.Unmarshal([]byte(v), &p) != nil || len(p.Protect) == 0 {
		return
	}
	attr.Cloneflags |= syscall.CLONE_NEWNS
	if uid := os.Geteuid(); uid != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN}
	}
}

// seedState creates dir, when missing, with a copy of the files (not the folders: those
// hold other sessions' conversations) directly in seed (missing: nothing to copy). A seed
// BASE/./SUB (rsync's mark) copies the files of BASE/SUB into dir/SUB.
func seedState(dir, seed string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	tmp := dir + ".new"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	into := tmp
	if base, sub, ok := strings.Cut(seed, "/./"); ok && filepath.IsLocal(sub) {
		seed, into = filepath.Join(base, sub), filepath.Join(tmp, sub)
		if err := os.MkdirAll(into, 0o700); err != nil {
			return err
		}
	}
	if seed != "" {
		ents, err := os.ReadDir(seed)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		for _, e := range ents {
			if !e.Type().IsRegular() {
				continue
			}
			if err := copyFile(filepath.Join(seed, e.Name()), filepath.Join(into, e.Name())); err != nil {
				return err
			}
		}
	}
	return os.Rename(tmp, dir)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// setEnv sets k=v in env, replacing every earlier k.
func setEnv(env []string, k, v string) []string {
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, k+"=") })
	return append(env, k+"="+v)
}

// ListeningPorts returns the TCP ports this process listens on (/proc/self/net/tcp and tcp6,
// matched to its own sockets): a worker's own ports, which its agents must not reach.
func ListeningPorts() []uint16 {
	inodes := map[string]bool{}
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil {
			if ino, ok := strings.CutPrefix(l, "socket:["); ok {
				inodes[strings.TrimSuffix(ino, "]")] = true
			}
		}
	}
	var ports []uint16
	for _, f := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			ports = appendListening(ports, strings.Fields(line), inodes)
		}
	}
	slices.Sort(ports)
	return ports
}

// appendListening adds the port of one /proc/net/tcp line when it is a listening socket of
// inodes (fields: sl local rem st tx:rx tr:when retrnsmt uid timeout inode).
func appendListening(ports []uint16, f []string, inodes map[string]bool) []uint16 {
	if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
		return ports
	}
	i := strings.LastIndexByte(f[1], ':')
	var port uint16
	if _, err := fmt.Sscanf(f[1][i+1:], "%X", &port); err != nil {
		return ports
	}
	return appendNew(ports, port)
}

// freeLoopbackPort is a TCP port nothing listens on at 127.0.0.1 now.
func freeLoopbackPort() (uint16, error) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port), nil
}

package sandbox

// The path rules: which grants a sandbox may hold. A grant is a file or a directory the agent
// may read (and execute), or also write; Landlock ties it to the inode the path names when
// the sandbox is applied, and it covers everything beneath that inode, whichever path leads
// there. So a grant is judged by filesystem identity, not by its spelling: a path is taken
// with its symlinks resolved and its ".." folded (resolve), and the mounts of the worker's
// namespace decide what lies beneath it (a bind mount shows one directory at two places).
//
// A protected path (the worker's data dir, every workspace root) is exposed by a grant when
// the grant is the path or one of its ancestors, on any of its mounts, or when the path is
// mounted somewhere beneath the grant. A grant strictly beneath a protected path is what the
// rules are for: a session's workspace inside its root, its state inside the data dir.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Mount is one mount of the worker's mount namespace, as /proc/self/mountinfo lists it.
type Mount struct {
	// Dev is the filesystem's device (major:minor): bind mounts of one filesystem share it.
	Dev string
	// Root is the directory of that filesystem the mount shows; Point is where.
	Root, Point string
}

// ParseMountinfo reads /proc/PID/mountinfo lines (proc(5)): fields 3 to 5 are the device,
// the root and the mount point, octal-escaped.
func ParseMountinfo(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		out = append(out, Mount{Dev: f[2], Root: unescapeMount(f[3]), Point: unescapeMount(f[4])})
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's \NNN octal escapes (space, tab, newline, backslash).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// within reports whether p is dir or lies beneath it (both absolute and clean).
func within(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// locate returns the filesystem and the path within it that p (absolute, clean) names: the
// mount with the longest point holding p, the last of equals (mounted on top).
func locate(mounts []Mount, p string) (dev, inFS string, ok bool) {
	best := -1
	for i, m := range mounts {
		if within(p, m.Point) && (best < 0 || len(m.Point) >= len(mounts[best].Point)) {
			best = i
		}
	}
	if best < 0 {
		return "", "", false
	}
	m := mounts[best]
	rest := strings.TrimPrefix(p, m.Point)
	return m.Dev, filepath.Clean(m.Root + "/" + rest), true
}

// Exposes reports whether a grant of g (absolute, clean, symlinks resolved) reaches what p
// holds: g is p or an ancestor of p by path or by filesystem identity (a bind mount of an
// ancestor), or p, or an ancestor or a part of it, is mounted at or beneath g.
func Exposes(mounts []Mount, g, p string) bool {
	if within(p, g) {
		return true
	}
	gd, gf, gok := locate(mounts, g)
	pd, pf, pok := locate(mounts, p)
	if !gok || !pok {
		return false
	}
	if gd == pd && within(pf, gf) {
		return true
	}
	for _, m := range mounts {
		if m.Dev == gd && within(m.Root, gf) {
			continue // a part of the grant's own tree mounted inside it (a protected path, read-only)
		}
		if m.Dev == pd && (within(m.Root, pf) || within(pf, m.Root)) && within(m.Point, g) {
			return true
		}
	}
	return false
}

// resolve makes p absolute and real: ".." folded and every symlink followed, as the kernel
// will when the sandbox opens it. A path that does not exist is an error.
func resolve(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%q is not an absolute path", p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	return filepath.Clean(real), nil
}

// expandHome turns a leading "~/" into home.
func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok && home != "" {
		// Not filepath.Join: it would clean away a state seed's "/./" (seedState).
		return strings.TrimSuffix(home, "/") + "/" + rest
	}
	return p
}

// installation is what a grant of the agent's own file f covers: the outermost node_modules
// folder f lies in (an npm-installed agent needs its package and every dependency beside
// it), else f alone.
func installation(f string) string {
	parts := strings.Split(f, "/")
	for i := 1; i < len(parts)-1; i++ {
		if parts[i] == "node_modules" {
			return strings.Join(parts[:i+1], "/")
		}
	}
	return f
}

// readMounts reads the worker's mounts (none where /proc is missing: paths alone decide). It
// reads the calling thread's: the process's main thread may be one that started an agent
// (start_linux.go) and kept its mount namespace.
func readMounts() []Mount {
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	ms, _ := ParseMountinfo(f)
	return ms
}

// versionManagers are the version managers whose shims start a program from the home
// folder: a shim (a script, or a link to the manager's own binary) runs the manager's
// helper, which reads the version chosen and runs the program installed under the same
// root. Each has the variable that moves its root, the root's default under HOME, and the
// files outside the root it reads the chosen version from.
var versionManagers = []struct {
	env, root string
	reads     []string
}{
	{"PYENV_ROOT", "~/.pyenv", nil},
	{"RBENV_ROOT", "~/.rbenv", nil},
	{"NODENV_ROOT", "~/.nodenv", nil},
	{"ASDF_DATA_DIR", "~/.asdf", []string{"~/.tool-versions"}},
	{"MISE_DATA_DIR", "~/.local/share/mise", []string{"~/.config/mise", "~/.tool-versions"}},
	{"VOLTA_HOME", "~/.volta", nil},
	{"NVM_DIR", "~/.nvm", nil},
	{"FNM_DIR", "~/.local/share/fnm", nil},
}

// managerGrants are what an agent started through a version manager reads: the manager's
// root (its shims, its helper, the versions it installed) and the files it reads the
// chosen version from, when exe, as named or resolved, lies in the root. Read-only: the
// agent runs the manager, it does not install with it.
func managerGrants(exe string, env []string) []string {
	home := envValue(env, "HOME")
	real, err := filepath.EvalSymlinks(exe)
	if err != nil {
		real = exe
	}
	for _, m := range versionManagers {
		root := envValue(env, m.env)
		if root == "" {
			if home == "" {
				continue
			}
			root = expandHome(m.root, home)
		}
		root = filepath.Clean(root)
		realRoot, err := filepath.EvalSymlinks(root)
		if err != nil {
			continue
		}
		if !within(exe, root) && !within(real, realRoot) {
			continue
		}
		out := []string{realRoot}
		for _, r := range m.reads {
			if f, err := filepath.EvalSymlinks(expandHome(r, home)); err == nil {
				out = append(out, f)
			}
		}
		return out
	}
	return nil
}

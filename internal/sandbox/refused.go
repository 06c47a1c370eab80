package sandbox

// What an agent that died in its sandbox was refused: the kernel's refusal reaches the agent
// as an errno (EACCES, EROFS) that the agent prints in its own words, with the path it was
// refused. The worker reads that path back from the agent's last lines, so that the reason a
// turn fails names the path and what grants it, rather than only an exit status.

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// refusalWords are how programs print EACCES, EPERM and EROFS: Go's and the C library's
// strerror, Node's error codes, Python's PermissionError.
var refusalWords = regexp.MustCompile(`(?i)permission denied|read-only file system|operation not permitted|\bEACCES\b|\bEROFS\b|\bEPERM\b`)

// pathWords are the absolute paths a line names: quoted ('…', "…") or bare, a bare one
// ending at white space or the punctuation that follows a path in a message (`mkdir /x:`).
var pathWords = regexp.MustCompile(`'(/[^']*)'|"(/[^"]*)"|(?:^|[\s(=\[])(/[^\s'",;:)\]]*)`)

// Refused returns the first path that printed (an agent's last lines on stderr, " | "
// between lines) says the kernel refused and that the sandbox policy in env (Box.Command's
// PolicyEnv) does not let the agent write: a path outside every read-write grant, or a
// protected one inside the workspace. It returns "" for an agent started without a sandbox,
// and when no refused path is named or each one named is writable in the sandbox (a refusal
// the sandbox did not cause: file modes, another process).
func Refused(env []string, printed string) string {
	v := envValue(env, PolicyEnv)
	if v == "" {
		return ""
	}
	var p Policy
	if json.Unmarshal([]byte(v), &p) != nil {
		return ""
	}
	for _, line := range strings.Split(printed, " | ") {
		if !refusalWords.MatchString(line) {
			continue
		}
		for _, m := range pathWords.FindAllStringSubmatch(line, -1) {
			path := m[1] + m[2] + m[3]
			if path == "/" || !filepath.IsAbs(path) {
				continue
			}
			if !writable(p, realPath(filepath.Clean(path))) {
				return path
			}
		}
	}
	return ""
}

// writable reports whether the policy lets the agent write real.
func writable(p Policy, real string) bool {
	for _, pr := range p.Protect {
		if within(real, pr) {
			return false
		}
	}
	for _, rw := range p.ReadWrite {
		if within(real, rw) {
			return true
		}
	}
	return false
}

// realPath resolves the symlinks of p's longest existing ancestor: the refused path often
// does not exist (the folder the agent failed to create), the grants are real paths.
func realPath(p string) string {
	var rest []string
	for dir := p; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(append([]string{real}, rest...)...)
		} else if !errors.Is(err, os.ErrNotExist) || dir == "/" {
			return p
		}
		rest = append([]string{filepath.Base(dir)}, rest...)
	}
}

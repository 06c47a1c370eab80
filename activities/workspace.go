package activities

// Workspace roots: the directories under which a worker's operator lets sessions work
// (contract §10). A session's workspace is a folder inside a root, symlinks resolved; a client
// cannot point an agent at /etc, at a sibling that shares a root's prefix, or through a
// symlink out of a root.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tacp-dev/tacp/signals"
)

// Roots are the workspace roots of a worker, absolute, clean and with their symlinks
// resolved. The first one holds the per-session folders of sessions that name no workspace.
type Roots struct {
	dirs []string
}

// NewRoots creates (when missing) and resolves dirs. At least one root is required.
func NewRoots(dirs []string) (*Roots, error) {
	r := &Roots{}
	for _, d := range dirs {
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, fmt.Errorf("workspace root %q: %w", d, err)
		}
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return nil, fmt.Errorf("workspace root: %w", err)
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, fmt.Errorf("workspace root: %w", err)
		}
		r.dirs = append(r.dirs, real)
	}
	if len(r.dirs) == 0 {
		return nil, errors.New("no workspace roots")
	}
	return r, nil
}

// Dirs lists the roots.
func (r *Roots) Dirs() []string { return append([]string(nil), r.dirs...) }

// Resolve returns the real directory of a session's workspace: ws as the client gave it
// ("" : the session's own folder in the first root; relative: inside the first root), which
// must resolve, symlinks included, to a folder strictly inside a root. It creates nothing;
// a refusal is an invalid_request rejection that says why.
func (r *Roots) Resolve(sessionID, ws string) (string, error) {
	if ws == "" {
		if err := signals.ValidateSessionID(sessionID); err != nil {
			return "", signals.Reject(signals.RejectInvalidRequest, "%v", err)
		}
		ws = sessionID
	}
	if strings.ContainsRune(ws, 0) {
		return "", signals.Reject(signals.RejectInvalidRequest, "workspace contains a NUL byte")
	}
	p := ws
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.dirs[0], p)
	}
	p = filepath.Clean(p)
	real, err := realPath(p, 0)
	if err != nil {
		return "", signals.Reject(signals.RejectInvalidRequest, "workspace %q: cannot resolve it: %v", clip(ws, 256), err)
	}
	if fi, err := os.Stat(real); err == nil && !fi.IsDir() {
		return "", signals.Reject(signals.RejectInvalidRequest, "workspace %q is not a directory", clip(ws, 256))
	}
	for _, root := range r.dirs {
		if rel, ok := within(root, real); ok && rel != "." {
			return real, nil
		}
	}
	return "", signals.Reject(signals.RejectInvalidRequest,
		"workspace %q is outside the workspace roots this worker allows (%s): a workspace must be a folder inside one of them, symlinks resolved",
		clip(ws, 256), strings.Join(r.dirs, ", "))
}

// Contains reports whether the real path p (absolute, resolved) lies in a root.
func (r *Roots) Contains(p string) bool {
	for _, root := range r.dirs {
		if _, ok := within(root, p); ok {
			return true
		}
	}
	return false
}

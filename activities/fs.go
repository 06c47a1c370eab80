package activities

// This file owns the ACP file system methods (fs/read_text_file, fs/write_text_file) and
// the rule of docs/contract.md §7 that they are served inside the session's workspace directory
// only. Every path goes through the same three steps, in this order:
//
//  1. lexical: refuse NUL bytes; resolve a relative path against the root; clean it; refuse
//     it if it lies outside the root ("path escapes the workspace");
//  2. real: follow the symlinks of every existing component (for a file that does not exist
//     yet, of its deepest existing parent; a dangling link is followed by hand) and refuse the
//     result if it lies outside the root ("symlink leaves the workspace");
//  3. I/O on the resolved path only, through an os.Root opened on the workspace.
//
// Steps 1 and 2 give the agent a clear reason; step 3 narrows the check-to-use window: on
// Unix os.Root resolves each component with openat and refuses anything that leaves the
// root, so a symlink swapped in after the check fails rather than escaping. What is left
// (a FIFO swapped in for a regular file, a Chmod racing a rename) is out of scope: the
// sandbox stops accidents and confused agents, not a hostile local user racing the
// file system.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

// maxTextFileBytes caps what one fs call moves: the content a read returns and the content
// a write accepts.
const maxTextFileBytes = 10 << 20

// maxSymlinkHops bounds the dangling links followed by hand (EvalSymlinks has its own bound).
const maxSymlinkHops = 40

// Sandbox serves the ACP file system methods inside one workspace directory.
type Sandbox struct {
	Root string // absolute, cleaned, symlinks resolved

	// alias is the root as the caller named it when that differs from Root (a symlinked
	// workspace): the agent was given that name as its cwd and sends paths under it.
	alias string
}

// NewSandbox returns a Sandbox rooted at root, which must be an existing directory. Symlinks
// in root itself are resolved once here; paths under either name are accepted.
func NewSandbox(root string) (*Sandbox, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("sandbox root %q: %w", root, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("sandbox root %q: %w", root, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("sandbox root %q: %w", root, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("sandbox root %q: not a directory", root)
	}
	s := &Sandbox{Root: real}
	if abs != real {
		s.alias = abs
	}
	return s, nil
}

// ReadTextFile serves fs/read_text_file: the file's text, or the Limit lines starting at
// line Line (1-based) when those are given.
func (s *Sandbox) ReadTextFile(ctx context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	if err := ctx.Err(); err != nil {
		return acp.ReadTextFileResponse{}, err
	}
	first, limit := 1, -1
	if p.Line != nil {
		if *p.Line < 1 {
			return acp.ReadTextFileResponse{}, refuse(p.Path, "line must be 1 or more")
		}
		first = *p.Line
	}
	if p.Limit != nil {
		if *p.Limit < 0 {
			return acp.ReadTextFileResponse{}, refuse(p.Path, "limit must not be negative")
		}
		limit = *p.Limit
	}
	rel, err := s.resolve(p.Path)
	if err != nil {
		return acp.ReadTextFileResponse{}, err
	}
	root, err := os.OpenRoot(s.Root)
	if err != nil {
		return acp.ReadTextFileResponse{}, ioFailure(p.Path, err)
	}
	defer root.Close()

	// Stat before opening so that a FIFO or a device is refused without being opened.
	fi, err := root.Stat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return acp.ReadTextFileResponse{}, refuse(p.Path, "no such file")
	}
	if err != nil {
		return acp.ReadTextFileResponse{}, ioFailure(p.Path, err)
	}
	if !fi.Mode().IsRegular() {
		return acp.ReadTextFileResponse{}, refuse(p.Path, "not a regular file")
	}
	f, err := root.Open(rel)
	if err != nil {
		return acp.ReadTextFileResponse{}, ioFailure(p.Path, err)
	}
	defer f.Close()
	if opened, err := f.Stat(); err != nil || !os.SameFile(fi, opened) {
		return acp.ReadTextFileResponse{}, refuse(p.Path, "file changed while being opened")
	}

	content, err := readLines(ctx, f, first, limit)
	if errors.Is(err, errTooLarge) {
		return acp.ReadTextFileResponse{}, refuse(p.Path, "content is larger than 10 MiB: read it in parts with line and limit")
	}
	if err != nil {
		return acp.ReadTextFileResponse{}, ioFailure(p.Path, err)
	}
	return acp.ReadTextFileResponse{Content: content}, nil
}

// WriteTextFile serves fs/write_text_file: it creates missing parent directories and
// replaces the file atomically (a temporary file in the same directory, then a rename), so
// a reader never sees half a file. A symlink inside the workspace is written through.
func (s *Sandbox) WriteTextFile(ctx context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	if err := ctx.Err(); err != nil {
		return acp.WriteTextFileResponse{}, err
	}
	if len(p.Content) > maxTextFileBytes {
		return acp.WriteTextFileResponse{}, refuse(p.Path, "content is larger than 10 MiB")
	}
	rel, err := s.resolve(p.Path)
	if err != nil {
		return acp.WriteTextFileResponse{}, err
	}
	root, err := os.OpenRoot(s.Root)
	if err != nil {
		return acp.WriteTextFileResponse{}, ioFailure(p.Path, err)
	}
	defer root.Close()

	fi, err := root.Lstat(rel)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		return acp.WriteTextFileResponse{}, refuse(p.Path, "not a regular file")
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return acp.WriteTextFileResponse{}, ioFailure(p.Path, err)
	}
	if err := root.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
		return acp.WriteTextFileResponse{}, ioFailure(p.Path, err)
	}
	if err := writeAtomic(root, rel, p.Content); err != nil {
		return acp.WriteTextFileResponse{}, ioFailure(p.Path, err)
	}
	return acp.WriteTextFileResponse{}, nil
}

// resolve applies the lexical and the real check to an agent's path and returns the real
// location relative to Root.
func (s *Sandbox) resolve(path string) (string, error) {
	if path == "" {
		return "", refuse(path, "path is required")
	}
	if strings.ContainsRune(path, 0) {
		return "", refuse(path, "path contains a NUL byte")
	}
	abs := path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(s.Root, abs)
	}
	abs = filepath.Clean(abs)
	if s.alias != "" {
		if rel, ok := within(s.alias, abs); ok {
			abs = filepath.Join(s.Root, rel)
		}
	}
	if _, ok := within(s.Root, abs); !ok {
		return "", refuse(path, "path escapes the workspace")
	}
	real, err := realPath(abs, 0)
	if err != nil {
		return "", refuse(path, "cannot resolve symlinks: "+err.Error())
	}
	rel, ok := within(s.Root, real)
	if !ok {
		return "", refuse(path, "symlink leaves the workspace")
	}
	return rel, nil
}

// within reports whether p lies in dir (or is dir), and p relative to dir. Both are
// absolute and clean.
func within(dir, p string) (string, bool) {
	rel, err := filepath.Rel(dir, p)
	if err != nil || !filepath.IsLocal(rel) {
		return "", false
	}
	return rel, true
}

// realPath resolves the symlinks of every existing component of p (absolute, clean). The
// components that do not exist yet are kept as they are, so a file about to be created
// resolves through its deepest existing parent. A dangling symlink is followed by hand,
// because writing to it creates its target.
func realPath(p string, hops int) (string, error) {
	if hops > maxSymlinkHops {
		return "", errors.New("too many levels of symbolic links")
	}
	real, err := filepath.EvalSymlinks(p)
	if err == nil {
		return real, nil
	}
	fi, lerr := os.Lstat(p)
	if lerr == nil && fi.Mode()&fs.ModeSymlink == 0 {
		return "", err // it exists but cannot be resolved (a parent unreadable, say)
	}
	parent := filepath.Dir(p)
	if parent == p {
		return "", err
	}
	realParent, err := realPath(parent, hops)
	if err != nil {
		return "", err
	}
	if lerr != nil {
		return filepath.Join(realParent, filepath.Base(p)), nil
	}
	// A dangling (or looping) link: its target is relative to the link's real directory.
	target, err := os.Readlink(p)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(realParent, target)
	}
	return realPath(filepath.Clean(target), hops+1)
}

var errTooLarge = errors.New("content too large")

// readLines returns limit lines (all when limit < 0) of r, starting at line first
// (1-based). Lines keep their terminators. It fails with errTooLarge when the content to
// return passes maxTextFileBytes; the lines it skips are read but never held.
func readLines(ctx context.Context, r io.Reader, first, limit int) (string, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out strings.Builder
	line, taken := 1, 0
	for chunks := 0; limit < 0 || taken < limit; chunks++ {
		if chunks%256 == 0 {
			if err := ctx.Err(); err != nil {
				return "", err
			}
		}
		chunk, err := br.ReadSlice('\n')
		if line >= first && len(chunk) > 0 {
			if out.Len()+len(chunk) > maxTextFileBytes {
				return "", errTooLarge
			}
			out.Write(chunk)
		}
		switch {
		case err == nil: // a whole line ended
			if line >= first {
				taken++
			}
			line++
		case errors.Is(err, bufio.ErrBufferFull): // the same line goes on
		case errors.Is(err, io.EOF):
			return out.String(), nil
		default:
			return "", err
		}
	}
	return out.String(), nil
}

// writeAtomic replaces rel under root with content: a temporary file beside it is written,
// synced, and renamed over it, and removed if anything fails on the way.
func writeAtomic(root *os.Root, rel, content string) (err error) {
	dir, base := filepath.Dir(rel), filepath.Base(rel)
	var f *os.File
	var tmp string
	for range 10 {
		tmp = filepath.Join(dir, "."+base+".tacp-"+strconv.FormatUint(rand.Uint64(), 36)+".tmp")
		f, err = root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			root.Remove(tmp)
		}
	}()
	if _, err = f.WriteString(content); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil { // the mode does not depend on the worker's umask
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return root.Rename(tmp, rel)
}

// refuse is the error the agent sees when a call is refused: a JSON-RPC invalid-params
// error naming the path and the reason. (The SDK has no resource-not-found constructor,
// so a missing file is refused the same way.)
func refuse(path, reason string) *acp.RequestError {
	return acp.NewInvalidParams(map[string]any{
		"error": fmt.Sprintf("%s: %q", reason, path),
		"path":  path,
	})
}

// ioFailure is the error for a call that was allowed but failed on the file system.
func ioFailure(path string, err error) *acp.RequestError {
	return acp.NewInternalError(map[string]any{
		"error": fmt.Sprintf("%q: %v", path, err),
		"path":  path,
	})
}

// Package checkpoint keeps a session's workspace as a chain of git commits, one a turn, in
// a shadow repository: its git dir lives under the worker's data dir, outside every
// workspace root and so outside the agent's sandbox, and its work tree is the workspace.
// The user's own .git in the workspace is never read or written: git never tracks a path
// named .git, the shadow has its own index, refs, hooks (none) and config, and every git
// command runs with the system and global configuration shut out.
//
// A checkpoint is a commit whose parent is the previous checkpoint, named by
// refs/tacp/<session>/turns/<N> and refs/tacp/<session>/head. After each checkpoint the
// session's refs are pushed to the store (store.go), from which any worker restores them.
package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultMaxFileBytes is the largest untracked file a checkpoint takes in.
const DefaultMaxFileBytes = 2 << 20

// Shadows holds the shadow repositories of a worker's sessions.
type Shadows struct {
	// Dir holds one git dir per session, <Dir>/<session>.git.
	Dir string
	// Exclude are gitignore patterns no checkpoint takes in, besides each workspace's own
	// .gitignore files.
	Exclude []string
	// MaxFileBytes is the largest untracked file a checkpoint takes in (0:
	// DefaultMaxFileBytes); a larger one is skipped and named in the result.
	MaxFileBytes int64
	// Store is where checkpoints are pushed and restored from (nil: kept on this worker
	// only).
	Store *Store
}

// Result is what one checkpoint holds and changed against the previous one.
type Result struct {
	Turn         int64  `json:"turn"`
	ID           string `json:"id"`
	FilesChanged int    `json:"files_changed"`
	Insertions   int    `json:"insertions"`
	Deletions    int    `json:"deletions"`
	// Bytes is the size of the files this checkpoint added or changed.
	Bytes int64 `json:"bytes"`
	// Skipped are untracked files over the size cap, left out, relative to the workspace.
	Skipped []string `json:"skipped,omitempty"`
}

// Restored is the checkpoint a workspace was restored from.
type Restored struct {
	ID   string `json:"id"`
	Turn int64  `json:"turn"`
}

// ErrNone is returned by Restore when no checkpoint of the session exists.
var ErrNone = errors.New("no checkpoint of this session")

// Ref names of a session's checkpoints.
func HeadRef(session string) string { return "refs/tacp/" + session + "/head" }

// TurnRef is the ref of the checkpoint taken at the end of turn.
func TurnRef(session string, turn int64) string {
	return "refs/tacp/" + session + "/turns/" + strconv.FormatInt(turn, 10)
}

// excludeAlways are paths of no checkpoint: tacp's own workspace marker.
var excludeAlways = []string{"/.tacp-workspace"}

// repo is one session's shadow repository over its work tree. objects, when set, is the
// object directory it writes to and reads from: a store on this machine's, so that storing a
// checkpoint costs no pack, only a ref update.
type repo struct {
	gitDir, work, objects string
}

func (s *Shadows) open(ctx context.Context, session, work string) (*repo, error) {
	if err := validSession(session); err != nil {
		return nil, err
	}
	r := &repo{gitDir: filepath.Join(s.Dir, session+".git"), work: work}
	if p := s.storePath(); p != "" {
		r.objects = filepath.Join(p, "objects")
	}
	if _, err := os.Stat(filepath.Join(r.gitDir, "HEAD")); err != nil {
		if err := os.MkdirAll(s.Dir, 0o700); err != nil {
			return nil, err
		}
		if _, err := run(ctx, isolatedEnv(), nil, "init", "-q", "--bare", r.gitDir); err != nil {
			return nil, err
		}
		for _, kv := range [][2]string{{"core.bare", "false"}, {"core.untrackedCache", "true"}, {"core.autocrlf", "false"}, {"gc.auto", "0"}} {
			if _, err := r.git(ctx, nil, "config", kv[0], kv[1]); err != nil {
				return nil, err
			}
		}
	}
	ex := strings.Join(append(append([]string(nil), excludeAlways...), s.Exclude...), "\n") + "\n"
	if err := os.WriteFile(filepath.Join(r.gitDir, "info", "exclude"), []byte(ex), 0o600); err != nil {
		if err := os.MkdirAll(filepath.Join(r.gitDir, "info"), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(r.gitDir, "info", "exclude"), []byte(ex), 0o600); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Checkpoint commits the session's workspace work as the checkpoint of turn, with message's
// first line, and pushes it to the store. A push that fails leaves the checkpoint on this
// worker and returns it with the error.
func (s *Shadows) Checkpoint(ctx context.Context, session, work string, turn int64, message string) (Result, error) {
	res := Result{Turn: turn}
	r, err := s.open(ctx, session, work)
	if err != nil {
		return res, err
	}
	parent, _ := r.revParse(ctx, HeadRef(session))
	if parent == "" && s.Store != nil {
		// A workspace that moved here from another worker: the chain goes on from the store.
		if err := s.Store.fetch(ctx, r, session); err == nil {
			parent, _ = r.revParse(ctx, HeadRef(session))
		}
	}
	if res.Skipped, err = r.largeUntracked(ctx, s.maxFileBytes()); err != nil {
		return res, err
	}
	specs := []string{"."}
	// The worker's data dir may lie in a workspace (a root at the home directory): the
	// shadows and the store are never part of a checkpoint.
	for _, own := range []string{s.Dir, s.storePath()} {
		if rel, err := filepath.Rel(work, own); err == nil && own != "" && rel != "." && !strings.HasPrefix(rel, "..") {
			specs = append(specs, ":(exclude,literal)"+filepath.ToSlash(rel))
		}
	}
	for _, p := range res.Skipped {
		specs = append(specs, ":(exclude,literal)"+p)
	}
	if _, err := r.git(ctx, []byte(strings.Join(specs, "\x00")), "add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul"); err != nil {
		return res, err
	}
	tree, err := r.git(ctx, nil, "write-tree")
	if err != nil {
		return res, err
	}
	args := []string{"commit-tree", tree, "-m", commitMessage(turn, message)}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	if res.ID, err = r.git(ctx, nil, args...); err != nil {
		return res, err
	}
	if err := r.stat(ctx, parent, &res); err != nil {
		return res, err
	}
	refs := []byte("update " + TurnRef(session, turn) + " " + res.ID + "\nupdate " + HeadRef(session) + " " + res.ID + "\n")
	if _, err := r.git(ctx, refs, "update-ref", "--stdin"); err != nil {
		return res, err
	}
	if s.Store != nil {
		if err := s.Store.push(ctx, r, session, turn, refs); err != nil {
			return res, err
		}
	}
	return res, nil
}

// Restore puts the session's last checkpoint, from the store, into the workspace work, and
// makes it the parent of the next checkpoint. ErrNone: the store holds no checkpoint of the
// session.
func (s *Shadows) Restore(ctx context.Context, session, work string) (Restored, error) {
	r, err := s.open(ctx, session, work)
	if err != nil {
		return Restored{}, err
	}
	if s.Store != nil {
		if err := s.Store.fetch(ctx, r, session); err != nil {
			return Restored{}, err
		}
	}
	id, err := r.revParse(ctx, HeadRef(session))
	if err != nil || id == "" {
		return Restored{}, ErrNone
	}
	if _, err := r.git(ctx, nil, "read-tree", "--reset", "-u", id); err != nil {
		return Restored{}, err
	}
	subject, err := r.git(ctx, nil, "log", "-1", "--format=%s", id)
	if err != nil {
		return Restored{}, err
	}
	return Restored{ID: id, Turn: turnOf(subject)}, nil
}

// RestoreFrom puts another session's checkpoint into the workspace work of session, a fork
// of it: the checkpoint of the last turn before beforeTurn that has one (beforeTurn 0: its
// last checkpoint). The fork's first checkpoint then has it as parent, so the fork's turns
// show what changed since the fork. ErrNone: the store holds no such checkpoint.
func (s *Shadows) RestoreFrom(ctx context.Context, session, from string, beforeTurn int64, work string) (Restored, error) {
	if err := validSession(from); err != nil {
		return Restored{}, err
	}
	if s.Store == nil {
		return Restored{}, ErrNone
	}
	r, err := s.open(ctx, session, work)
	if err != nil {
		return Restored{}, err
	}
	if err := s.Store.fetch(ctx, r, from); err != nil {
		return Restored{}, err
	}
	var id string
	if beforeTurn <= 0 {
		id, _ = r.revParse(ctx, HeadRef(from))
	}
	for n := beforeTurn - 1; n >= 1 && id == ""; n-- {
		id, _ = r.revParse(ctx, TurnRef(from, n))
	}
	if id == "" {
		return Restored{}, ErrNone
	}
	if _, err := r.git(ctx, nil, "read-tree", "--reset", "-u", id); err != nil {
		return Restored{}, err
	}
	if _, err := r.git(ctx, []byte("update "+HeadRef(session)+" "+id+"\n"), "update-ref", "--stdin"); err != nil {
		return Restored{}, err
	}
	subject, err := r.git(ctx, nil, "log", "-1", "--format=%s", id)
	if err != nil {
		return Restored{}, err
	}
	return Restored{ID: id, Turn: turnOf(subject)}, nil
}

// storePath is the store's directory when it is on this machine.
func (s *Shadows) storePath() string {
	if s.Store == nil || !isLocalPath(s.Store.URL) {
		return ""
	}
	return s.Store.URL
}

// Behind reports whether the store holds a later checkpoint of the session than this
// worker's shadow took or restored: its workspace here is stale (later turns ran on another
// worker), and Restore brings it up to date. false when there is no store, no shadow here,
// or no checkpoint in the store.
func (s *Shadows) Behind(ctx context.Context, session, work string) (bool, error) {
	if s.Store == nil || validSession(session) != nil {
		return false, nil
	}
	if _, err := os.Stat(filepath.Join(s.Dir, session+".git", "HEAD")); err != nil {
		return false, nil
	}
	r, err := s.open(ctx, session, work)
	if err != nil {
		return false, err
	}
	mine, _ := r.revParse(ctx, HeadRef(session))
	theirs, err := s.Store.head(ctx, session)
	if err != nil || theirs == "" || mine == "" {
		return false, err
	}
	return mine != theirs, nil
}

func (s *Shadows) maxFileBytes() int64 {
	if s.MaxFileBytes > 0 {
		return s.MaxFileBytes
	}
	return DefaultMaxFileBytes
}

// commitMessage is a checkpoint's message: its turn and the first line of the prompt.
func commitMessage(turn int64, prompt string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	if len(first) > 200 {
		first = first[:200]
	}
	return strings.TrimSpace(fmt.Sprintf("turn %d: %s", turn, first))
}

// turnOf reads the turn from a checkpoint's subject (commitMessage); 0 when it names none.
func turnOf(subject string) int64 {
	s, ok := strings.CutPrefix(subject, "turn ")
	if !ok {
		return 0
	}
	n, _, _ := strings.Cut(s, ":")
	t, _ := strconv.ParseInt(n, 10, 64)
	return t
}

// largeUntracked lists the untracked, not ignored files of the work tree larger than max.
func (r *repo) largeUntracked(ctx context.Context, max int64) ([]string, error) {
	out, err := r.git(ctx, nil, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	var large []string
	for _, p := range strings.Split(out, "\x00") {
		if p == "" {
			continue
		}
		if fi, err := os.Lstat(filepath.Join(r.work, p)); err == nil && fi.Mode().IsRegular() && fi.Size() > max {
			large = append(large, p)
		}
	}
	return large, nil
}

// stat fills in what res changed against parent ("": against nothing).
func (r *repo) stat(ctx context.Context, parent string, res *Result) error {
	base := parent
	if base == "" {
		empty, err := r.git(ctx, nil, "hash-object", "-t", "tree", "-w", "--stdin")
		if err != nil {
			return err
		}
		base = empty
	}
	num, err := r.git(ctx, nil, "diff-tree", "-r", "--numstat", "-z", "--no-renames", base, res.ID)
	if err != nil {
		return err
	}
	for _, rec := range strings.Split(num, "\x00") {
		f := strings.SplitN(rec, "\t", 3)
		if len(f) < 3 {
			continue
		}
		res.FilesChanged++
		ins, _ := strconv.Atoi(f[0]) // "-" for a binary file
		del, _ := strconv.Atoi(f[1])
		res.Insertions += ins
		res.Deletions += del
		// The work tree holds what the checkpoint took in: the size of an added or changed
		// file is its size there (a deleted one is gone, a nested repository a directory).
		if fi, err := os.Lstat(filepath.Join(r.work, f[2])); err == nil && !fi.IsDir() {
			res.Bytes += fi.Size()
		}
	}
	return nil
}

func (r *repo) revParse(ctx context.Context, ref string) (string, error) {
	return r.git(ctx, nil, "rev-parse", "-q", "--verify", ref+"^{commit}")
}

// git runs git on the shadow repository with stdin, isolated from the system's and the
// user's configuration, and returns its output, trimmed.
func (r *repo) git(ctx context.Context, stdin []byte, args ...string) (string, error) {
	pre := []string{"--git-dir=" + r.gitDir}
	if r.work != "" {
		pre = append(pre, "--work-tree="+r.work)
	}
	env := isolatedEnv()
	if r.objects != "" {
		env = append(env, "GIT_OBJECT_DIRECTORY="+r.objects)
	}
	return run(ctx, env, stdin, append(pre, args...)...)
}

// Error is a git command that failed, with what git said.
type Error struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.Args, " "), e.Err, strings.TrimSpace(e.Stderr))
}

func (e *Error) Unwrap() error { return e.Err }

func run(ctx context.Context, env []string, stdin []byte, args ...string) (string, error) {
	args = append([]string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "gc.auto=0"}, args...)
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", &Error{Args: args[6:], Stderr: clip(stderr.String(), 2048), Err: err}
	}
	return strings.TrimSpace(stdout.String()), nil
}

// isolatedEnv is the environment of git on a shadow repository: the process's own, without
// any GIT_ variable it inherited, with no system or global configuration and no prompt.
func isolatedEnv() []string {
	env := baseEnv()
	return append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=tacp", "GIT_AUTHOR_EMAIL=tacp@localhost",
		"GIT_COMMITTER_NAME=tacp", "GIT_COMMITTER_EMAIL=tacp@localhost")
}

// baseEnv is the process's environment without GIT_ variables, and with no terminal prompt.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env, "GIT_TERMINAL_PROMPT=0")
}

func validSession(s string) error {
	if s == "" || s == "." || s == ".." || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".lock") || strings.Contains(s, "..") {
		return fmt.Errorf("checkpoint: session id %q cannot name a ref", s)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("checkpoint: session id %q cannot name a ref", s)
		}
	}
	return nil
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

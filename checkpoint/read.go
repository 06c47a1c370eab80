package checkpoint

// Reading a store from outside a worker: what a turn changed (starter diff) and a session's
// checkpoints as a branch of the user's repository (starter export). Both read the store
// directly with git, with the caller's own git configuration and credentials.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tacp-dev/tacp/codec"
)

// Reader reads the checkpoints of a store.
type Reader struct {
	// URL is the store, as the workers' -checkpoint.store names it.
	URL string
	// Keys open an S3 store's sealed objects (nil: the store is not sealed).
	Keys *codec.Keys
	// Getenv reads an S3 store's credentials (TACP_S3_…; nil: os.Getenv).
	Getenv func(string) string
}

// view is a git dir holding the session's refs: the store itself when it is on this machine,
// else a temporary repository they were fetched into (done removes it).
func (rd Reader) view(ctx context.Context, session string) (gitDir string, done func(), err error) {
	if err := validSession(session); err != nil {
		return "", nil, err
	}
	if isLocalPath(rd.URL) {
		if _, err := os.Stat(filepath.Join(rd.URL, "HEAD")); err != nil {
			return "", nil, fmt.Errorf("checkpoint store %s: not a git repository: %w", rd.URL, err)
		}
		return rd.URL, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "tacp-checkpoints-")
	if err != nil {
		return "", nil, err
	}
	done = func() { _ = os.RemoveAll(tmp) }
	if _, err := run(ctx, isolatedEnv(), nil, "init", "-q", "--bare", tmp); err != nil {
		done()
		return "", nil, err
	}
	if isS3(rd.URL) {
		st, err := rd.openS3(ctx)
		if err == nil {
			err = st.fetch(ctx, &repo{gitDir: tmp}, session)
		}
		if err != nil {
			done()
			return "", nil, err
		}
		return tmp, done, nil
	}
	prefix := "refs/tacp/" + session + "/"
	if _, err := run(ctx, remoteEnv(), nil, "--git-dir="+tmp, "fetch", "-q", "--no-tags", rd.URL, "+"+prefix+"*:"+prefix+"*"); err != nil {
		done()
		return "", nil, err
	}
	return tmp, done, nil
}

// ref is the checkpoint ref of the session's turn (0: its last checkpoint).
func ref(session string, turn int64) string {
	if turn == 0 {
		return HeadRef(session)
	}
	return TurnRef(session, turn)
}

// find is view with the checkpoint of the session's turn (0: its last) in it: ErrNone when
// the store holds none.
func (rd Reader) find(ctx context.Context, session string, turn int64) (gitDir, id string, done func(), err error) {
	gitDir, done, err = rd.view(ctx, session)
	if err != nil {
		return "", "", nil, err
	}
	id, err = (&repo{gitDir: gitDir}).revParse(ctx, ref(session, turn))
	if err != nil || id == "" {
		done()
		return "", "", nil, fmt.Errorf("no checkpoint of session %s%s in %s: %w", session, turnText(turn), rd.URL, ErrNone)
	}
	return gitDir, id, done, nil
}

// Commit is the checkpoint of the session's turn (0: its last) in the store.
func (rd Reader) Commit(ctx context.Context, session string, turn int64) (string, error) {
	_, id, done, err := rd.find(ctx, session, turn)
	if err != nil {
		return "", err
	}
	done()
	return id, nil
}

// Diff is what the session's turn changed in its workspace (0: its last turn), as a unified
// diff, or with stat its diffstat. The first checkpoint is diffed against an empty tree.
func (rd Reader) Diff(ctx context.Context, session string, turn int64, stat bool) (string, error) {
	gitDir, id, done, err := rd.find(ctx, session, turn)
	if err != nil {
		return "", err
	}
	defer done()
	args := []string{"--git-dir=" + gitDir, "show", "--format=", "--no-color", "--no-ext-diff"}
	if stat {
		args = append(args, "--stat")
	}
	out, err := run(ctx, isolatedEnv(), nil, append(args, id)...)
	if err != nil {
		return "", err
	}
	return out, nil
}

// Export writes the session's checkpoints, up to turn (0: the last), into the git
// repository at repoDir as branch: one commit a turn, author tacp. Only the new branch and
// the objects it needs are written: the repository's index, work tree, HEAD and other
// branches stay as they are, and a branch that exists already is not overwritten.
func (rd Reader) Export(ctx context.Context, session string, turn int64, branch, repoDir string) (string, error) {
	if _, err := run(ctx, remoteEnv(), nil, "check-ref-format", "--branch", branch); err != nil {
		return "", fmt.Errorf("branch %q: not a valid branch name", branch)
	}
	gitDir, id, done, err := rd.find(ctx, session, turn)
	if err != nil {
		return "", err
	}
	defer done()
	userGitDir, err := run(ctx, remoteEnv(), nil, "-C", repoDir, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return "", err
	}
	target := "refs/heads/" + branch
	if _, err := run(ctx, remoteEnv(), nil, "--git-dir="+userGitDir, "rev-parse", "-q", "--verify", target); err == nil {
		return "", fmt.Errorf("branch %s exists in %s: choose another name", branch, repoDir)
	}
	if _, err := run(ctx, remoteEnv(), nil, "--git-dir="+userGitDir, "fetch", "-q", "--no-tags", "--no-write-fetch-head", gitDir, ref(session, turn)+":"+target); err != nil {
		return "", err
	}
	return id, nil
}

func turnText(turn int64) string {
	if turn == 0 {
		return ""
	}
	return fmt.Sprintf(" at turn %d", turn)
}

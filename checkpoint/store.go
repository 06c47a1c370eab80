package checkpoint

// The store: where each checkpoint is pushed and from which a worker without the workspace
// fetches it, reached by every worker of a deployment. By default a bare repository in the
// worker's data dir (one machine, no set-up); for many machines any git remote (a path on
// shared storage, ssh://, https://), reached with the worker's own git configuration and
// credentials, or an S3-compatible bucket (s3.go). The agent runs none of this and sees none
// of it.

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/tacp-dev/tacp/codec"
)

// StoreOff is the -checkpoint.store value that turns checkpoints off.
const StoreOff = "off"

// Store holds the checkpoints of sessions: a git remote, or an S3-compatible bucket (s3.go).
type Store struct {
	// URL is the remote: a path, any URL git fetches from and pushes to, or s3://….
	URL string
	s3  *s3Store
}

// DefaultStoreURL is the embedded store of a worker: a bare repository in its data dir.
func DefaultStoreURL(dataDir string) string {
	return filepath.Join(dataDir, "checkpoints", "store.git")
}

// OpenStore prepares the store at url: a local path that does not exist yet is created as
// a bare repository; an s3:// URL is reached (its bucket created when missing) and seals
// what it stores with keys when they are set; a git URL is taken as it is.
func OpenStore(ctx context.Context, url string, keys *codec.Keys) (*Store, error) {
	return openStore(ctx, url, keys, os.Getenv)
}

// OpenStoreWith is OpenStore for rd's store, with rd's keys and its Getenv (nil: os.Getenv)
// for an S3 store's credentials.
func OpenStoreWith(ctx context.Context, rd Reader) (*Store, error) {
	return openStore(ctx, rd.URL, rd.Keys, rd.env())
}

// openStore is OpenStore with the S3 store's credentials read through getenv.
func openStore(ctx context.Context, url string, keys *codec.Keys, getenv func(string) string) (*Store, error) {
	if isS3(url) {
		st, err := openS3(ctx, url, keys, getenv)
		if err != nil {
			return nil, err
		}
		return &Store{URL: url, s3: st}, nil
	}
	if isLocalPath(url) {
		if _, err := os.Stat(filepath.Join(url, "HEAD")); err != nil {
			if err := os.MkdirAll(filepath.Dir(url), 0o700); err != nil {
				return nil, err
			}
			if _, err := run(ctx, isolatedEnv(), nil, "init", "-q", "--bare", url); err != nil {
				return nil, err
			}
		}
	}
	return &Store{URL: url}, nil
}

// NormalizeStoreURL makes a store given as a path absolute; a URL (scheme://…, or git's
// host:path) is returned as it is.
func NormalizeStoreURL(url string) string {
	if isURL(url) {
		return url
	}
	if abs, err := filepath.Abs(url); err == nil {
		return abs
	}
	return url
}

// isURL reports whether store names a remote (ssh://, https://, file://, user@host:path)
// rather than a path: as git reads it, a colon before the first slash.
func isURL(store string) bool {
	for i, c := range store {
		switch {
		case c == '/':
			return false
		case c == ':' && i > 0:
			return true
		}
	}
	return false
}

// isLocalPath reports whether url names a directory on this machine.
func isLocalPath(url string) bool {
	return filepath.IsAbs(url) || strings.HasPrefix(url, "./") || strings.HasPrefix(url, "../")
}

// remoteEnv is the environment of git when it talks to the store: the worker's own git
// configuration (credential helpers, ssh settings), never a prompt.
func remoteEnv() []string { return baseEnv() }

// push sends the session's head and turn refs to the store, replacing what a lost attempt
// of the same turn may have pushed. refs are their update-ref --stdin lines: a store on this
// machine holds the objects already (repo.objects) and takes them as they are.
func (s *Store) push(ctx context.Context, r *repo, session string, turn int64, refs []byte) error {
	if s.s3 != nil {
		return s.s3.push(ctx, r, session, turn)
	}
	if isLocalPath(s.URL) {
		_, err := run(ctx, isolatedEnv(), refs, "--git-dir="+s.URL, "update-ref", "--stdin")
		return err
	}
	_, err := run(ctx, remoteEnv(), nil, "--git-dir="+r.gitDir, "push", "-q", "--no-verify", s.URL,
		"+"+HeadRef(session)+":"+HeadRef(session), "+"+TurnRef(session, turn)+":"+TurnRef(session, turn))
	return err
}

// fetch brings the session's refs from the store into r.
func (s *Store) fetch(ctx context.Context, r *repo, session string) error {
	if s.s3 != nil {
		return s.s3.fetch(ctx, r, session)
	}
	prefix := "refs/tacp/" + session + "/"
	if isLocalPath(s.URL) {
		out, err := run(ctx, isolatedEnv(), nil, "--git-dir="+s.URL, "for-each-ref", "--format=update %(refname) %(objectname)", prefix)
		if err != nil || out == "" {
			return err
		}
		_, err = r.git(ctx, []byte(out+"\n"), "update-ref", "--stdin")
		return err
	}
	_, err := run(ctx, remoteEnv(), nil, "--git-dir="+r.gitDir, "fetch", "-q", "--no-tags", s.URL, "+"+prefix+"*:"+prefix+"*")
	return err
}

// head is the commit of the session's last checkpoint in the store ("": none).
func (s *Store) head(ctx context.Context, session string) (string, error) {
	if s.s3 != nil {
		return s.s3.head(ctx, session)
	}
	if isLocalPath(s.URL) {
		out, err := run(ctx, isolatedEnv(), nil, "--git-dir="+s.URL, "for-each-ref", "--format=%(objectname)", HeadRef(session))
		return out, err
	}
	out, err := run(ctx, remoteEnv(), nil, "ls-remote", "--refs", s.URL, HeadRef(session))
	if err != nil {
		return "", err
	}
	id, _, _ := strings.Cut(out, "\t")
	return id, nil
}

// Delete removes the session's checkpoints: its refs in the store and its shadow repository
// on this worker. In a git store the objects no other ref reaches go at its next git gc; in
// an S3 store every object of the session goes now.
func (s *Shadows) Delete(ctx context.Context, session string) error {
	if err := validSession(session); err != nil {
		return err
	}
	if st := s.Store; st != nil {
		if err := st.deleteRefs(ctx, session); err != nil {
			return err
		}
	}
	return os.RemoveAll(filepath.Join(s.Dir, session+".git"))
}

// deleteRefs removes the session's refs from the store.
func (s *Store) deleteRefs(ctx context.Context, session string) error {
	if s.s3 != nil {
		return s.s3.deleteSession(ctx, session)
	}
	prefix := "refs/tacp/" + session + "/"
	if isLocalPath(s.URL) {
		out, err := run(ctx, isolatedEnv(), nil, "--git-dir="+s.URL, "for-each-ref", "--format=delete %(refname)", prefix)
		if err != nil || out == "" {
			return err
		}
		_, err = run(ctx, isolatedEnv(), []byte(out+"\n"), "--git-dir="+s.URL, "update-ref", "--stdin")
		return err
	}
	out, err := run(ctx, remoteEnv(), nil, "ls-remote", "--refs", s.URL, prefix+"*")
	if err != nil {
		return err
	}
	args := []string{"push", "-q", "--no-verify", s.URL}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			args = append(args, ":"+f[1])
		}
	}
	if len(args) == 4 {
		return nil
	}
	_, err = run(ctx, remoteEnv(), nil, args...)
	return err
}

package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tree lists the files under dir with their contents, .git excluded.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && rel == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// snapshot is every byte under dir (the user's .git included).
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			m[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func userGit(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=u", "GIT_AUTHOR_EMAIL=u@x", "GIT_COMMITTER_NAME=u", "GIT_COMMITTER_EMAIL=u@x")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
}

func newShadows(t *testing.T) (*Shadows, string) {
	t.Helper()
	data := t.TempDir()
	st, err := OpenStore(context.Background(), DefaultStoreURL(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Shadows{Dir: filepath.Join(data, "checkpoints"), Store: st}, data
}

// A worker's second machine restores, from the store it shares, exactly the tree the first
// checkpointed: a deletion stays deleted, a file a shell command wrote comes back, ignored
// files and the marker do not travel.
func TestCheckpointRestoresOnAnotherWorker(t *testing.T) {
	t.Run("a store on this machine", func(t *testing.T) {
		a, _ := newShadows(t)
		testRestoresOnAnotherWorker(t, a)
	})
	// A URL is reached by push and fetch, as an ssh:// or https:// remote is.
	t.Run("a remote store", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "remote.git")
		if _, err := run(context.Background(), isolatedEnv(), nil, "init", "-q", "--bare", dir); err != nil {
			t.Fatal(err)
		}
		st, err := OpenStore(context.Background(), "file://"+dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		testRestoresOnAnotherWorker(t, &Shadows{Dir: filepath.Join(t.TempDir(), "checkpoints"), Store: st})
	})
}

func testRestoresOnAnotherWorker(t *testing.T, a *Shadows) {
	ctx := context.Background()
	ws := t.TempDir()
	write(t, ws, ".gitignore", "build/\n*.log\n")
	write(t, ws, "main.go", "package main\n")
	write(t, ws, "gone.txt", "bye\n")
	write(t, ws, "build/out.bin", "ignored\n")
	write(t, ws, "debug.log", "ignored\n")
	write(t, ws, ".tacp-workspace", "s1\n")
	r1, err := a.Checkpoint(ctx, "s1", ws, 1, "write main\nmore")
	if err != nil {
		t.Fatal(err)
	}
	if r1.FilesChanged != 3 || r1.Insertions != 4 || r1.Deletions != 0 || r1.Bytes != int64(len("build/\n*.log\npackage main\nbye\n")) {
		t.Errorf("turn 1 checkpoint = %+v, want 3 files, 4 insertions, the three files' bytes", r1)
	}
	if err := os.Remove(filepath.Join(ws, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("sh", "-c", "printf 'from sh\\n' > made-by-sh.txt")
	sh.Dir = ws
	if err := sh.Run(); err != nil {
		t.Fatal(err)
	}
	r2, err := a.Checkpoint(ctx, "s1", ws, 2, "delete and shell")
	if err != nil {
		t.Fatal(err)
	}
	if r2.FilesChanged != 2 || r2.Insertions != 1 || r2.Deletions != 1 || r2.Bytes != int64(len("from sh\n")) {
		t.Errorf("turn 2 checkpoint = %+v, want 2 files, +1 -1, 8 bytes", r2)
	}

	// Another worker: its own data dir, the same store.
	b := &Shadows{Dir: filepath.Join(t.TempDir(), "checkpoints"), Store: a.Store}
	ws2 := t.TempDir()
	got, err := b.Restore(ctx, "s1", ws2)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != r2.ID || got.Turn != 2 {
		t.Errorf("restored %+v, want %s at turn 2", got, r2.ID)
	}
	want := map[string]string{".gitignore": "build/\n*.log\n", "main.go": "package main\n", "made-by-sh.txt": "from sh\n"}
	if g := tree(t, ws2); !mapsEqual(g, want) {
		t.Errorf("restored tree = %v, want %v", g, want)
	}
	// The chain goes on from the restored checkpoint.
	write(t, ws2, "main.go", "package main\n\nfunc main() {}\n")
	r3, err := b.Checkpoint(ctx, "s1", ws2, 3, "third")
	if err != nil {
		t.Fatal(err)
	}
	if r3.FilesChanged != 1 || r3.Insertions != 2 {
		t.Errorf("turn 3 checkpoint = %+v, want 1 file, +2", r3)
	}
	defer func() {
		// Deleting the session's checkpoints leaves nothing to restore, on any worker.
		if err := b.Delete(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
		c := &Shadows{Dir: filepath.Join(t.TempDir(), "checkpoints"), Store: a.Store}
		if _, err := c.Restore(ctx, "s1", t.TempDir()); !errors.Is(err, ErrNone) {
			t.Errorf("restore after delete: %v, want ErrNone", err)
		}
		if _, err := os.Stat(filepath.Join(b.Dir, "s1.git")); !os.IsNotExist(err) {
			t.Errorf("the shadow repository is still there: %v", err)
		}
	}()
	rb, err := b.open(ctx, "s1", ws2)
	if err != nil {
		t.Fatal(err)
	}
	parent, err := rb.git(ctx, nil, "rev-parse", r3.ID+"^")
	if err != nil || parent != r2.ID {
		t.Errorf("turn 3's parent = %q (%v), want turn 2's %s", parent, err, r2.ID)
	}
}

// An untracked file over the cap is left out and named; a worker's exclude list is honoured.
func TestCheckpointSkipsLargeAndExcluded(t *testing.T) {
	ctx := context.Background()
	s, _ := newShadows(t)
	s.Exclude = []string{"secrets/"}
	ws := t.TempDir()
	write(t, ws, "small.txt", "x\n")
	write(t, ws, "big.bin", strings.Repeat("b", DefaultMaxFileBytes+1))
	write(t, ws, "exact.bin", strings.Repeat("e", DefaultMaxFileBytes))
	write(t, ws, "secrets/key", "k\n")
	res, err := s.Checkpoint(ctx, "s2", ws, 1, "p")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Skipped, []string{"big.bin"}) {
		t.Errorf("skipped = %v, want [big.bin]", res.Skipped)
	}
	if res.FilesChanged != 2 {
		t.Errorf("files changed = %d, want 2 (small.txt, exact.bin)", res.FilesChanged)
	}
	ws2 := t.TempDir()
	if _, err := s.Restore(ctx, "s2", ws2); err != nil {
		t.Fatal(err)
	}
	g := tree(t, ws2)
	if _, ok := g["big.bin"]; ok {
		t.Error("big.bin was restored")
	}
	if _, ok := g["secrets/key"]; ok {
		t.Error("an excluded file was restored")
	}
	if g["small.txt"] != "x\n" || len(g["exact.bin"]) != DefaultMaxFileBytes {
		t.Errorf("restored %v", keys(g))
	}
}

// The user's own repository in the workspace, with staged and unstaged changes, is
// byte-identical after a checkpoint and a restore.
func TestCheckpointLeavesUsersGitAlone(t *testing.T) {
	ctx := context.Background()
	s, _ := newShadows(t)
	ws := t.TempDir()
	userGit(t, ws, "init", "-q")
	write(t, ws, "a.txt", "one\n")
	userGit(t, ws, "add", "a.txt")
	userGit(t, ws, "commit", "-q", "-m", "first")
	write(t, ws, "a.txt", "two\n")
	userGit(t, ws, "add", "a.txt") // staged
	write(t, ws, "a.txt", "three\n")
	write(t, ws, "b.txt", "untracked by the user\n")
	before := snapshot(t, filepath.Join(ws, ".git"))
	res, err := s.Checkpoint(ctx, "s3", ws, 1, "p")
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesChanged != 2 {
		t.Errorf("files changed = %d, want 2: the user's .git is never taken in", res.FilesChanged)
	}
	write(t, ws, "a.txt", "changed after\n")
	if _, err := s.Restore(ctx, "s3", ws); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); !bytes.Equal(b, []byte("three\n")) {
		t.Errorf("a.txt = %q after restore, want the checkpoint's", b)
	}
	after := snapshot(t, filepath.Join(ws, ".git"))
	if !mapsEqual(before, after) {
		for k := range after {
			if before[k] != after[k] {
				t.Errorf("the user's .git/%s changed", k)
			}
		}
		for k := range before {
			if _, ok := after[k]; !ok {
				t.Errorf("the user's .git/%s is gone", k)
			}
		}
	}
}

func TestRestoreWithoutCheckpoint(t *testing.T) {
	s, _ := newShadows(t)
	if _, err := s.Restore(context.Background(), "none", t.TempDir()); !errors.Is(err, ErrNone) {
		t.Errorf("restore of a session without checkpoints: %v, want ErrNone", err)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func keys(m map[string]string) []string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	slices.Sort(k)
	return k
}

// diff and export read the store as the workers left it: a turn's diff is git's diff of the
// two trees, and the exported branch holds one commit a turn, while the user's repository
// keeps its dirty index, work tree and HEAD byte for byte.
func TestDiffAndExport(t *testing.T) {
	ctx := context.Background()
	s, _ := newShadows(t)
	ws := t.TempDir()
	write(t, ws, "a.txt", "one\n")
	write(t, ws, "b.txt", "bee\n")
	if _, err := s.Checkpoint(ctx, "s4", ws, 1, "first\nline two"); err != nil {
		t.Fatal(err)
	}
	write(t, ws, "a.txt", "one\ntwo\n")
	if err := os.Remove(filepath.Join(ws, "b.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Checkpoint(ctx, "s4", ws, 2, "second"); err != nil {
		t.Fatal(err)
	}
	rd := Reader{URL: s.Store.URL}
	diff, err := rd.Diff(ctx, "s4", 2, false)
	if err != nil {
		t.Fatal(err)
	}
	want, err := run(ctx, isolatedEnv(), nil, "--git-dir="+s.Store.URL, "diff", "--no-color", TurnRef("s4", 1), TurnRef("s4", 2))
	if err != nil {
		t.Fatal(err)
	}
	if diff != want || !strings.Contains(diff, "+two") || !strings.Contains(diff, "deleted file mode") {
		t.Errorf("diff of turn 2 =\n%s\nwant git's\n%s", diff, want)
	}
	if last, err := rd.Diff(ctx, "s4", 0, false); err != nil || last != diff {
		t.Errorf("diff of the last turn = %q, %v; want turn 2's", last, err)
	}
	stat, err := rd.Diff(ctx, "s4", 1, true)
	if err != nil || !strings.Contains(stat, "2 files changed, 2 insertions(+)") {
		t.Errorf("stat of turn 1 = %q, %v", stat, err)
	}
	if _, err := rd.Diff(ctx, "s4", 9, false); err == nil {
		t.Error("diff of a turn with no checkpoint: no error")
	}

	user := t.TempDir()
	userGit(t, user, "init", "-q")
	write(t, user, "mine.txt", "v1\n")
	userGit(t, user, "add", "mine.txt")
	userGit(t, user, "commit", "-q", "-m", "mine")
	write(t, user, "mine.txt", "v2\n")
	userGit(t, user, "add", "mine.txt")
	write(t, user, "mine.txt", "v3\n")
	readIndex := func() []byte {
		b, err := os.ReadFile(filepath.Join(user, ".git", "index"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	indexBefore, headBefore := readIndex(), snapshot(t, user)["mine.txt"]
	headRef, _ := os.ReadFile(filepath.Join(user, ".git", "HEAD"))
	id, err := rd.Export(ctx, "s4", 0, "tacp/s4", user)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readIndex(), indexBefore) || snapshot(t, user)["mine.txt"] != headBefore {
		t.Error("export changed the user's index or work tree")
	}
	if h, _ := os.ReadFile(filepath.Join(user, ".git", "HEAD")); !bytes.Equal(h, headRef) {
		t.Errorf("export moved HEAD: %s", h)
	}
	log := gitOut(t, user, "log", "--format=%an %s", "tacp/s4")
	if log != "tacp turn 2: second\ntacp turn 1: first" {
		t.Errorf("exported branch log = %q", log)
	}
	if got := gitOut(t, user, "rev-parse", "tacp/s4"); got != id {
		t.Errorf("branch at %s, want %s", got, id)
	}
	if _, err := rd.Export(ctx, "s4", 1, "tacp/s4", user); err == nil {
		t.Error("export over an existing branch: no error")
	}
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

func TestNormalizeStoreURL(t *testing.T) {
	wd, _ := os.Getwd()
	for _, c := range []struct{ in, want string }{
		{"/srv/store.git", "/srv/store.git"},
		{"store.git", filepath.Join(wd, "store.git")},
		{"./a/b.git", filepath.Join(wd, "a/b.git")},
		{"ssh://git@host/tacp.git", "ssh://git@host/tacp.git"},
		{"https://host/tacp.git", "https://host/tacp.git"},
		{"git@host:tacp.git", "git@host:tacp.git"},
		{"file:///srv/store.git", "file:///srv/store.git"},
	} {
		if got := NormalizeStoreURL(c.in); got != c.want {
			t.Errorf("NormalizeStoreURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A worker whose workspace of a session is older than the store's last checkpoint (later
// turns ran elsewhere) is behind; a restore brings every file, deletions included, to the
// store's checkpoint, and then it is not behind.
func TestBehindAndRestoreOverAStaleWorkspace(t *testing.T) {
	a, _ := newShadows(t)
	testBehind(t, a)
}

func testBehind(t *testing.T, a *Shadows) {
	ctx := context.Background()
	wsA := t.TempDir()
	write(t, wsA, "keep.txt", "1\n")
	write(t, wsA, "gone.txt", "1\n")
	if _, err := a.Checkpoint(ctx, "s5", wsA, 1, "one"); err != nil {
		t.Fatal(err)
	}
	if behind, err := a.Behind(ctx, "s5", wsA); err != nil || behind {
		t.Fatalf("behind right after its own checkpoint: %v, %v", behind, err)
	}
	b := &Shadows{Dir: filepath.Join(t.TempDir(), "checkpoints"), Store: a.Store}
	wsB := t.TempDir()
	if _, err := b.Restore(ctx, "s5", wsB); err != nil {
		t.Fatal(err)
	}
	write(t, wsB, "keep.txt", "2\n")
	write(t, wsB, "new.txt", "2\n")
	if err := os.Remove(filepath.Join(wsB, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	r2, err := b.Checkpoint(ctx, "s5", wsB, 2, "two")
	if err != nil {
		t.Fatal(err)
	}
	behind, err := a.Behind(ctx, "s5", wsA)
	if err != nil || !behind {
		t.Fatalf("a after b's turn 2: behind %v, %v; want behind", behind, err)
	}
	got, err := a.Restore(ctx, "s5", wsA)
	if err != nil || got.ID != r2.ID {
		t.Fatalf("restore = %+v, %v; want turn 2's %s", got, err, r2.ID)
	}
	want := map[string]string{"keep.txt": "2\n", "new.txt": "2\n"}
	if g := tree(t, wsA); !mapsEqual(g, want) {
		t.Errorf("a's workspace after the restore = %v, want %v", g, want)
	}
	if behind, err := a.Behind(ctx, "s5", wsA); err != nil || behind {
		t.Errorf("behind after the restore: %v, %v", behind, err)
	}
	if behind, _ := (&Shadows{Dir: t.TempDir(), Store: a.Store}).Behind(ctx, "s5", t.TempDir()); behind {
		t.Error("a worker with no shadow of the session is behind (a missing workspace is Restore's case)")
	}
}

// A fork starts with the files of the turn before its fork point, from the store, on any
// worker; its first checkpoint shows only what changed since.
func TestRestoreFromForksTheFiles(t *testing.T) {
	a, _ := newShadows(t)
	testRestoreFromForks(t, a)
}

func testRestoreFromForks(t *testing.T, a *Shadows) {
	ctx := context.Background()
	ws := t.TempDir()
	write(t, ws, "kept.txt", "one\n")
	write(t, ws, "gone.txt", "bye\n")
	r1, err := a.Checkpoint(ctx, "src", ws, 1, "first")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(ws, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	write(t, ws, "later.txt", "two\n")
	if _, err := a.Checkpoint(ctx, "src", ws, 2, "second"); err != nil {
		t.Fatal(err)
	}

	b := &Shadows{Dir: filepath.Join(t.TempDir(), "checkpoints"), Store: a.Store}
	fork := t.TempDir()
	got, err := b.RestoreFrom(ctx, "fork", "src", 2, fork)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != r1.ID || got.Turn != 1 {
		t.Errorf("restored %+v, want turn 1's %s", got, r1.ID)
	}
	if g, want := tree(t, fork), map[string]string{"kept.txt": "one\n", "gone.txt": "bye\n"}; !mapsEqual(g, want) {
		t.Errorf("fork before turn 2 = %v, want turn 1's tree %v", g, want)
	}
	write(t, fork, "kept.txt", "one\nmore\n")
	r, err := b.Checkpoint(ctx, "fork", fork, 1, "the fork's first")
	if err != nil {
		t.Fatal(err)
	}
	if r.FilesChanged != 1 || r.Insertions != 1 {
		t.Errorf("the fork's first checkpoint = %+v, want 1 file, +1 since the fork point", r)
	}

	whole := t.TempDir()
	if _, err := b.RestoreFrom(ctx, "fork2", "src", 0, whole); err != nil {
		t.Fatal(err)
	}
	if g, want := tree(t, whole), map[string]string{"kept.txt": "one\n", "later.txt": "two\n"}; !mapsEqual(g, want) {
		t.Errorf("fork of the whole session = %v, want its last tree %v", g, want)
	}
	if _, err := b.RestoreFrom(ctx, "fork3", "src", 1, t.TempDir()); !errors.Is(err, ErrNone) {
		t.Errorf("fork before turn 1: %v, want ErrNone (no files before the first turn)", err)
	}
}

package activities

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// sandboxFixture is a workspace with an outside neighbour:
//
//	base/ws/a.txt           "alpha\n"
//	base/ws/lines.txt       "l1\nl2\nl3\nl4\nl5"
//	base/ws/dir/b.txt       "beta\n"
//	base/outside/secret.txt "secret\n"
type sandboxFixture struct {
	sb      *Sandbox
	ws      string // the workspace, real path
	outside string // a directory beside it, real path
}

func newSandboxFixture(t *testing.T) sandboxFixture {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for path, content := range map[string]string{
		filepath.Join(ws, "a.txt"):           "alpha\n",
		filepath.Join(ws, "lines.txt"):       "l1\nl2\nl3\nl4\nl5",
		filepath.Join(ws, "dir", "b.txt"):    "beta\n",
		filepath.Join(outside, "secret.txt"): "secret\n",
	} {
		sandboxWriteFile(t, path, content)
	}
	sb, err := NewSandbox(ws)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Root != ws {
		t.Fatalf("Root = %q, want %q", sb.Root, ws)
	}
	return sandboxFixture{sb: sb, ws: ws, outside: outside}
}

func sandboxWriteFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sandboxSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
}

func sandboxIntp(n int) *int { return &n }

// requireSandboxRefused checks that err is the invalid-params error the agent sees, naming the
// path and carrying the reason.
func requireSandboxRefused(t *testing.T, err error, path, reason string) {
	t.Helper()
	var re *acp.RequestError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v (%T), want *acp.RequestError", err, err)
	}
	if re.Code != -32602 {
		t.Fatalf("code = %d, want -32602 (invalid params): %v", re.Code, re)
	}
	data, _ := re.Data.(map[string]any)
	msg, _ := data["error"].(string)
	if !strings.Contains(msg, reason) {
		t.Fatalf("error = %q, want it to say %q", msg, reason)
	}
	if data["path"] != path {
		t.Fatalf("error names path %q, want %q", data["path"], path)
	}
}

func TestSandboxReadInsideWorkspace(t *testing.T) {
	f := newSandboxFixture(t)
	for _, tc := range []struct {
		name, path, want string
	}{
		{"absolute", filepath.Join(f.ws, "a.txt"), "alpha\n"},
		{"absolute nested", filepath.Join(f.ws, "dir", "b.txt"), "beta\n"},
		{"relative", "a.txt", "alpha\n"},
		{"relative nested", "dir/b.txt", "beta\n"},
		{"dot dot that stays inside", filepath.Join(f.ws, "dir", "..", "a.txt"), "alpha\n"},
		{"relative dot dot that stays inside", "dir/../dir/b.txt", "beta\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.sb.ReadTextFile(t.Context(), acp.ReadTextFileRequest{Path: tc.path})
			if err != nil {
				t.Fatal(err)
			}
			if got.Content != tc.want {
				t.Fatalf("content = %q, want %q", got.Content, tc.want)
			}
		})
	}
}

func TestSandboxReadHonoursLineAndLimit(t *testing.T) {
	f := newSandboxFixture(t)
	for _, tc := range []struct {
		name        string
		line, limit *int
		want        string
	}{
		{"neither", nil, nil, "l1\nl2\nl3\nl4\nl5"},
		{"line only", sandboxIntp(3), nil, "l3\nl4\nl5"},
		{"limit only", nil, sandboxIntp(2), "l1\nl2\n"},
		{"line and limit", sandboxIntp(2), sandboxIntp(2), "l2\nl3\n"},
		{"limit past the end", sandboxIntp(4), sandboxIntp(10), "l4\nl5"},
		{"last line without newline", sandboxIntp(5), sandboxIntp(1), "l5"},
		{"line past the end", sandboxIntp(9), nil, ""},
		{"limit zero", sandboxIntp(1), sandboxIntp(0), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.sb.ReadTextFile(t.Context(), acp.ReadTextFileRequest{Path: "lines.txt", Line: tc.line, Limit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			if got.Content != tc.want {
				t.Fatalf("content = %q, want %q", got.Content, tc.want)
			}
		})
	}
}

func TestSandboxReadRefusesBadLineOrLimit(t *testing.T) {
	f := newSandboxFixture(t)
	for _, tc := range []struct {
		name        string
		line, limit *int
		reason      string
	}{
		{"line zero", sandboxIntp(0), nil, "line must be 1 or more"},
		{"negative line", sandboxIntp(-1), nil, "line must be 1 or more"},
		{"negative limit", nil, sandboxIntp(-1), "limit must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.sb.ReadTextFile(t.Context(), acp.ReadTextFileRequest{Path: "lines.txt", Line: tc.line, Limit: tc.limit})
			requireSandboxRefused(t, err, "lines.txt", tc.reason)
		})
	}
}

func TestSandboxReadLinesLongerThanTheBuffer(t *testing.T) {
	f := newSandboxFixture(t)
	long := strings.Repeat("x", 200<<10)
	sandboxWriteFile(t, filepath.Join(f.ws, "long.txt"), long+"\n"+long+"\nshort\n")
	got, err := f.sb.ReadTextFile(t.Context(), acp.ReadTextFileRequest{Path: "long.txt", Line: sandboxIntp(2), Limit: sandboxIntp(2)})
	if err != nil {
		t.Fatal(err)
	}
	if want := long + "\nshort\n"; got.Content != want {
		t.Fatalf("content has %d bytes, want %d", len(got.Content), len(want))
	}
}

func TestSandboxWriteInsideWorkspace(t *testing.T) {
	f := newSandboxFixture(t)
	for _, tc := range []struct {
		name, path, file string
	}{
		{"absolute new file", filepath.Join(f.ws, "new.txt"), "new.txt"},
		{"absolute overwrite", filepath.Join(f.ws, "a.txt"), "a.txt"},
		{"relative new file", "rel.txt", "rel.txt"},
		{"relative overwrite", "dir/b.txt", "dir/b.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := "written by " + tc.name + "\n"
			if _, err := f.sb.WriteTextFile(t.Context(), acp.WriteTextFileRequest{Path: tc.path, Content: content}); err != nil {
				t.Fatal(err)
			}
			full := filepath.Join(f.ws, tc.file)
			got, err := os.ReadFile(full)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != content {
				t.Fatalf("file = %q, want %q", got, content)
			}
			fi, err := os.Lstat(full)
			if err != nil {
				t.Fatal(err)
			}
			if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
				t.Fatalf("mode = %v, want a regular file with 0644", fi.Mode())
			}
			back, err := f.sb.ReadTextFile(t.Context(), acp.ReadTextFileRequest{Path: tc.path})
			if err != nil || back.Content != content {
				t.Fatalf("read back = %q, %v; want %q", back.Content, err, content)
			}
		})
	}
}

func TestSandboxWriteCreatesParentDirectories(t *testing.T) {
	f := newSandboxFixture(t)
	path := filepath.Join(f.ws, "x", "y", "z", "deep.txt")
	if _, err := f.sb.WriteTextFile(t.Context(), acp.WriteTextFileRequest{Path: path, Content: "deep\n"}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "deep\n" {
		t.Fatalf("file = %q, %v", got, err)
	}
	for _, dir := range []string{"x", "x/y", "x/y/z"} {
		fi, err := os.Stat(filepath.Join(f.ws, dir))
		if err != nil {
			t.Fatal(err)
		}
		if !fi.IsDir() || fi.Mode().Perm()&^0o755 != 0 {
			t.Fatalf("%s: mode %v, want a directory within 0755", dir, fi.Mode())
		}
	}
}

func TestSandboxAtomicWriteLeavesNoTempFiles(t *testing.T) {
	f := newSandboxFixture(t)
	for i, content := range []string{"first\n", "second, longer than the first\n", "3\n"} {
		if _, err := f.sb.WriteTextFile(t.Context(), acp.WriteTextFileRequest{Path: "dir/atomic.txt", Content: content}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(f.ws, "dir"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "atomic.txt,b.txt" {
		t.Fatalf("dir holds %v, want only atomic.txt and b.txt", names)
	}
	if got, _ := os.ReadFile(filepath.Join(f.ws, "dir", "atomic.txt")); string(got) != "3\n" {
		t.Fatalf("file = %q, want the last write", got)
	}
}

func TestSandboxRefusesPathsThatEscapeTheWorkspace(t *testing.T) {
	f := newSandboxFixture(t)
	for _, tc := range []struct {
		name, path string
	}{
		{"dot dot", ".."},
		{"relative dot dot", "../outside/secret.txt"},
		{"relative dot dot deep in", "dir/../../outside/secret.txt"},
		{"absolute dot dot", filepath.Join(f.ws, "..", "outside", "secret.txt")},
		{"absolute outside", filepath.Join(f.outside, "secret.txt")},
		{"etc passwd", "/etc/passwd"},
		{"workspace name as a prefix", f.ws + "-sibling/file.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.sb.ReadTextFile(t.Context(), acp.ReadTextFileRequest{Path: tc.path})
			requireSandboxRefused(t, err, tc.path, "path escapes the workspace")
			_, err = f.sb.WriteTextFile(t.Context(), acp.WriteTextFileRequest{Path: tc.path, Content: "pwned\n"})
			requireSandboxRefused(t, err, tc.path, "path escapes the workspace")
		})
	}
	if got, _ := os.ReadFile(filepath.Join(f.outside, "secret.txt")); string(got) != "secret\n" {
		t.Fatalf("outside file changed to %q", got)
	}
}

func TestSandboxRefusesSymlinksThatLeaveTheWorkspace(t *testing.T) {
	f := newSandboxFixture(t)
	secret := filepath.Join(f.outside, "secret.txt")
	sandboxSymlink(t, secret, filepath.Join(f.ws, "file-out"))                                     // absolute target
	sandboxSymlink(t, "../outside/secret.txt", filepath.Join(f.ws, "file-out-rel"))                // relative target
	sandboxSymlink(t, f.outside, filepath.Join(f.ws, "dir-out"))                                   // a directory
	sandboxSymlink(t, filepath.Join(f.outside, "new.txt"), filepath.Join(f.ws, "dangling-out"))    // target missing
	sandboxSymlink(t, filepath.Join(f.outside, "sub", "new.txt"), filepath.Join(f.ws, "deep-out")) // missing dir too
	sandboxSymlink(t, "../../outside/secret.txt", filepath.Join(f.ws, "dir", "up-out"))            // nested, relative
	for _, tc := range []struct {
		name, path string
		read       bool // reading makes sense (the target exists)
	}{
		{"symlink file pointing out", "file-out", true},
		{"symlink file pointing out relative", "file-out-rel", true},
		{"symlink file pointing out absolute path", filepath.Join(f.ws, "file-out"), true},
		{"nested relative symlink pointing out", "dir/up-out", true},
		{"symlinked directory pointing out", "dir-out/secret.txt", true},
		{"new file under symlinked directory pointing out", "dir-out/new.txt", false},
		{"new dirs under symlinked directory pointing out", "dir-out/a/b/new.txt", false},
		{"dangling symlink pointing out", "dangling-out", false},
		{"dangling symlink pointing out into missing dir", "deep-out", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.read {
				_, err := f.sb.ReadTextFile(t.Context(), acp.ReadTextFileRequest{Path: tc.path})
				requireSandboxRefused(t, err, tc.path, "symlink leaves the workspace")
			}
			_, err := f.sb.WriteTextFile(t.Context(), acp.WriteTextFileRequest{Path: tc.path, Content: "pwned\n"})
			requireSandboxRefused(t, err, tc.path, "symlink leaves the workspace")
		})
	}
	entries, err := os.ReadDir(f.outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "secret.txt" {
		t.Fatalf("outside holds %v, want only secret.txt", entries)
	}
	if got, _ := os.ReadFile(secret); string(got) != "secret\n" {
		t.Fatalf("outside file changed to %q", got)
	}
}

func TestSandboxSymlinkPointingInsideIsFollowed(t *testing.T) {
	f := newSandboxFixture(t)
	sandboxSymlink(t, filepath.Join(f.ws, "a.txt"), filepath.Join(f.ws, "abs-link")) // absolute, inside
	sandboxSymlink(t, "dir/b.txt", filepath.Join(f.ws, "rel-link"))
	sandboxSymlink(t, "dir", filepath.Join(f.ws, "dir-link"))
	sandboxSymlink(t, "dir/made-by-write.txt", filepath.Join(f.ws, "dangling-in"))

	for _, tc := range []struct{ name, path, want string }{
		{"absolute target", "abs-link", "alpha\n"},
		{"relative target", "rel-link", "beta\n"},
		{"symlinked directory", "dir-link/b.txt", "beta\n"},
	} {
		t.Run("read "+tc.name, func(t *testing.T) {
			got, err := f.sb.ReadTextFile(t.Context(), acp.ReadTextFileRequest{Path: tc.path})
			if err != nil {
				t.Fatal(err)
			}
			if got.Content != tc.want {
				t.Fatalf("content = %q, want %q", got.Content, tc.want)
			}
		})
	}

	for _, tc := range []struct{ name, path, target string }{
		{"absolute target", "abs-link", "a.txt"},
		{"relative target", "rel-link", "dir/b.txt"},
		{"symlinked directory", "dir-link/c.txt", "dir/c.txt"},
		{"dangling target", "dangling-in", "dir/made-by-write.txt"},
	} {
		t.Run("write "+tc.name, func(t *testing.T) {
			content := "through " + tc.name + "\n"
			if _, err := f.sb.WriteTextFile(t.Context(), acp.WriteTextFileRequest{Path: tc.path, Content: content}); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(filepath.Join(f.ws, tc.target)); err != nil || string(got) != content {
				t.Fatalf("target = %q, %v; want %q", got, err, content)
			}
		})
	}
	// Writing through a link writes its target and leaves the link a link.
	if fi, err := os.Lstat(filepath.Join(f.ws, "abs-link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("abs-link is no longer a symlink: %v, %v", fi, err)
	}
}

func TestSandboxRootGivenAsSymlinkWorks(t *testing.T) {
	f := newSandboxFixture(t)
	link := filepath.Join(filepath.Dir(f.ws), "ws-link")
	sandboxSymlink(t, f.ws, link)
	sb, err := NewSandbox(link)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Root != f.ws {
		t.Fatalf("Root = %q, want the resolved %q", sb.Root, f.ws)
	}
	for _, path := range []string{filepath.Join(link, "a.txt"), filepath.Join(f.ws, "a.txt"), "a.txt"} {
		got, err := sb.ReadTextFile(t.Context(), acp.ReadTextFileRequest{Path: path})
		if err != nil || got.Content != "alpha\n" {
			t.Fatalf("read %s = %q, %v", path, got.Content, err)
		}
	}
	if _, err := sb.WriteTextFile(t.Context(), acp.WriteTextFileRequest{Path: filepath.Join(link, "via-link.txt"), Content: "v\n"}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(f.ws, "via-link.txt")); err != nil || string(got) != "v\n" {
		t.Fatalf("file = %q, %v", got, err)
	}
	escape := filepath.Join(link, "..", "outside", "secret.txt")
	_, err = sb.ReadTextFile(t.Context(), acp.ReadTextFileRequest{Path: escape})
	requireSandboxRefused(t, err, escape, "path escapes the workspace")
}

func TestNewSandboxRequiresAnExistingDirectory(t *testing.T) {
	f := newSandboxFixture(t)
	for _, root := range []string{filepath.Join(f.ws, "missing"), filepath.Join(f.ws, "a.txt")} {
		if sb, err := NewSandbox(root); err == nil {
			t.Fatalf("NewSandbox(%q) = %+v, want an error", root, sb)
		}
	}
}

func TestSandboxRefusesNULBytes(t *testing.T) {
	f := newSandboxFixture(t)
	for _, path := range []string{"a.txt\x00.png", filepath.Join(f.ws, "a\x00")} {
		_, err := f.sb.ReadTextFile(t.Context(), acp.ReadTextFileRequest{Path: path})
		requireSandboxRefused(t, err, path, "NUL byte")
		_, err = f.sb.WriteTextFile(t.Context(), acp.WriteTextFileRequest{Path: path, Content: "x"})
		requireSandboxRefused(t, err, path, "NUL byte")
	}
}

func TestSandboxRefusesEmptyPath(t *testing.T) {
	f := newSandboxFixture(t)
	_, err := f.sb.ReadTextFile(t.Context(), acp.ReadTextFileRequest{})
	requireSandboxRefused(t, err, "", "path is required")
}

func TestSandboxRefusesNonRegularFiles(t *testing.T) {
	f := newSandboxFixture(t)
	sandboxSymlink(t, "dir", filepath.Join(f.ws, "dir-link"))
	for _, path := range []string{"dir", f.ws, ".", "dir-link"} {
		t.Run("read "+path, func(t *testing.T) {
			_, err := f.sb.ReadTextFile(t.Context(), acp.ReadTextFileRequest{Path: path})
			requireSandboxRefused(t, err, path, "not a regular file")
		})
		t.Run("write "+path, func(t *testing.T) {
			_, err := f.sb.WriteTextFile(t.Context(), acp.WriteTextFileRequest{Path: path, Content: "x"})
			requireSandboxRefused(t, err, path, "not a regular file")
		})
	}
}

func TestSandboxReadMissingFile(t *testing.T) {
	f := newSandboxFixture(t)
	for _, path := range []string{"nope.txt", filepath.Join(f.ws, "dir", "nope.txt"), "no/such/dir.txt"} {
		_, err := f.sb.ReadTextFile(t.Context(), acp.ReadTextFileRequest{Path: path})
		requireSandboxRefused(t, err, path, "no such file")
	}
}

func TestSandboxSymlinkLoopIsAnError(t *testing.T) {
	f := newSandboxFixture(t)
	sandboxSymlink(t, "loop-b", filepath.Join(f.ws, "loop-a"))
	sandboxSymlink(t, "loop-a", filepath.Join(f.ws, "loop-b"))
	_, err := f.sb.ReadTextFile(t.Context(), acp.ReadTextFileRequest{Path: "loop-a"})
	requireSandboxRefused(t, err, "loop-a", "too many levels of symbolic links")
	_, err = f.sb.WriteTextFile(t.Context(), acp.WriteTextFileRequest{Path: "loop-a", Content: "x"})
	requireSandboxRefused(t, err, "loop-a", "too many levels of symbolic links")
}

func TestSandboxRefusesOversizeContent(t *testing.T) {
	f := newSandboxFixture(t)
	big := strings.Repeat("x", maxTextFileBytes+1)
	t.Run("write", func(t *testing.T) {
		_, err := f.sb.WriteTextFile(t.Context(), acp.WriteTextFileRequest{Path: "big.txt", Content: big})
		requireSandboxRefused(t, err, "big.txt", "larger than 10 MiB")
		if _, err := os.Lstat(filepath.Join(f.ws, "big.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("big.txt was written: %v", err)
		}
	})
	t.Run("write at the cap", func(t *testing.T) {
		if _, err := f.sb.WriteTextFile(t.Context(), acp.WriteTextFileRequest{Path: "cap.txt", Content: big[1:]}); err != nil {
			t.Fatal(err)
		}
		got, err := f.sb.ReadTextFile(t.Context(), acp.ReadTextFileRequest{Path: "cap.txt"})
		if err != nil || len(got.Content) != maxTextFileBytes {
			t.Fatalf("read %d bytes, %v; want %d", len(got.Content), err, maxTextFileBytes)
		}
	})
	sandboxWriteFile(t, filepath.Join(f.ws, "big.log"), "head\n"+big)
	t.Run("read", func(t *testing.T) {
		_, err := f.sb.ReadTextFile(t.Context(), acp.ReadTextFileRequest{Path: "big.log"})
		requireSandboxRefused(t, err, "big.log", "larger than 10 MiB")
	})
	t.Run("read a part of a big file", func(t *testing.T) {
		got, err := f.sb.ReadTextFile(t.Context(), acp.ReadTextFileRequest{Path: "big.log", Limit: sandboxIntp(1)})
		if err != nil || got.Content != "head\n" {
			t.Fatalf("content = %q, %v; want the first line", got.Content, err)
		}
	})
}

func TestSandboxCancelledContext(t *testing.T) {
	f := newSandboxFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.sb.ReadTextFile(ctx, acp.ReadTextFileRequest{Path: "a.txt"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("read err = %v, want context.Canceled", err)
	}
	if _, err := f.sb.WriteTextFile(ctx, acp.WriteTextFileRequest{Path: "a.txt", Content: "x"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("write err = %v, want context.Canceled", err)
	}
}

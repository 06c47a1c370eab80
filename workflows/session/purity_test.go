package session

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// This package is the session's pure core, and activities/turn the turn's: each decides
// and does nothing. The compiler keeps each apart from its Temporal shell (workflows and
// activities import them, never the reverse), and this test keeps them pure: nothing they
// import, however deep, is Temporal, a process or a socket (nor, for the session, the ACP
// SDK: the turn speaks ACP, the session its own contract); and no file of theirs names the
// file system, a random source or a lock, reads the clock, or starts a goroutine. A core that did would make the scenario files, the fuzz targets and the replay
// of recorded histories prove less than they say.

// neverBelow are the packages no pure core may depend on, directly or not: a prefix ending
// in "/" covers a tree.
var neverBelow = []string{"go.temporal.io/", "github.com/coder/acp-go-sdk", "os/exec", "net", "net/"}

// impure are the imports no file of a core may name itself.
var impure = append([]string{"os", "math/rand", "crypto/rand", "io/fs", "syscall", "sync"}, neverBelow...)

// clockReads are the time functions that read or wait on the clock.
var clockReads = map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true, "AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true}

func matches(p string, list []string) bool {
	for _, bad := range list {
		if p == bad || (strings.HasSuffix(bad, "/") && strings.HasPrefix(p, bad)) {
			return true
		}
	}
	return false
}

// cores are the pure cores' directories, each with what it may use that the other may not.
var cores = []struct {
	dir     string
	allowed string
}{
	{".", ""},
	{"../../activities/turn", "github.com/coder/acp-go-sdk"},
}

func forbiddenFor(list []string, allowed string) []string {
	var out []string
	for _, p := range list {
		if p != allowed {
			out = append(out, p)
		}
	}
	return out
}

func TestTheCoresDependOnNoRuntime(t *testing.T) {
	for _, c := range cores {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", c.dir).Output()
		require.NoError(t, err)
		deps := strings.Fields(string(out))
		require.NotEmpty(t, deps)
		for _, dep := range deps {
			if matches(dep, forbiddenFor(neverBelow, c.allowed)) {
				t.Errorf("%s depends on %s", c.dir, dep)
			}
		}
	}
}

func TestTheCoresAreKeptPure(t *testing.T) {
	for _, c := range cores {
		files, err := filepath.Glob(filepath.Join(c.dir, "*.go"))
		require.NoError(t, err)
		require.NotEmpty(t, files)
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			for _, fault := range impurities(t, path, forbiddenFor(impure, c.allowed)) {
				t.Errorf("%s: %s", path, fault)
			}
		}
	}
}

// impurities lists what makes the Go file at path more than a pure core: an import of
// forbidden, a clock read, a goroutine.
func impurities(t *testing.T, path string, forbidden []string) []string {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	require.NoError(t, err)
	var out []string
	timeName := ""
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if matches(p, forbidden) {
			out = append(out, "imports "+p)
		}
		if p == "time" {
			timeName = "time"
			if imp.Name != nil {
				timeName = imp.Name.Name
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			out = append(out, "starts a goroutine")
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && id.Name == timeName && clockReads[n.Sel.Name] {
				out = append(out, "reads the clock: time."+n.Sel.Name)
			}
		}
		return true
	})
	return out
}

func TestThePurityCheckCatchesAnImpureCore(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/impure.go"
	require.NoError(t, os.WriteFile(path, []byte(`package session

import (
	clock "time"

	"go.temporal.io/sdk/workflow"
	"os/exec"
)

func decide() {
	_ = workflow.Now
	_ = exec.Command
	go func() {}()
	_ = clock.Now()
}
`), 0o644))
	require.ElementsMatch(t, []string{"imports go.temporal.io/sdk/workflow", "imports os/exec", "starts a goroutine", "reads the clock: time.Now"}, impurities(t, path, impure))
}

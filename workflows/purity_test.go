package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The pure cores are the files doc.go lists under "The cores (pure)", and the turn core
// (activities/turncore.go). Each decides and does nothing: none imports the Temporal SDK
// or API, a process, a socket or a random source, reads the clock, or starts a goroutine.
// A core that did would make the scenario files, the fuzz targets and the replay of
// recorded histories prove less than they say.

// impure are the imports no core may name: a prefix ending in "/" covers a tree.
var impure = []string{"go.temporal.io/", "os", "os/exec", "net", "net/", "math/rand", "crypto/rand", "io/fs", "syscall", "sync"}

// clockReads are the time functions that read or wait on the clock.
var clockReads = map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true, "AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true}

var docListedFile = regexp.MustCompile(`[a-z_]+\.go`)

// pureCores reads doc.go's list of the session's pure files.
func pureCores(t *testing.T) []string {
	b, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	doc := string(b)
	start, end := strings.Index(doc, "The cores (pure):"), strings.Index(doc, "The shell (uses workflow.Context):")
	require.True(t, start >= 0 && end > start, "doc.go lists the pure cores, then the shell")
	seen := map[string]bool{}
	var out []string
	for _, f := range docListedFile.FindAllString(doc[start:end], -1) {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	require.Greater(t, len(out), 20, "the list of pure cores in doc.go")
	return out
}

func TestTheCoresAreKeptPure(t *testing.T) {
	// The session's cores take no ACP type either: the turn runner speaks ACP, the session
	// its own contract (signals).
	for _, path := range pureCores(t) {
		for _, fault := range impurities(t, path, append(impure, "github.com/coder/acp-go-sdk")) {
			t.Errorf("%s: %s", path, fault)
		}
	}
	for _, fault := range impurities(t, "../activities/turncore.go", impure) {
		t.Errorf("activities/turncore.go: %s", fault)
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
		for _, bad := range forbidden {
			if p == bad || (strings.HasSuffix(bad, "/") && strings.HasPrefix(p, bad)) {
				out = append(out, "imports "+p)
			}
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
	require.NoError(t, os.WriteFile(path, []byte(`package workflows

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

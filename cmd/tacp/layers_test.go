package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/tacp-dev/tacp"

// layers are the production packages, from the bottom: a package imports only packages of
// layers below its own. The wire contract and the utilities are at the bottom; the session
// (workflows) and the turn (activities) above them; the composition root
// (worker/tacpworker) and the CLI above everything they assemble; the commands and binaries
// on top, and nothing production imports them.
var layers = [][]string{
	{"signals", "codec", "internal/datadir", "internal/flagenv", "internal/freeport", "internal/logging",
		"internal/proctree", "internal/sandbox", "internal/telemetry", "internal/wsline", "testagent/acpschema", "testagent/mcpask"},
	{"signals/rejection", "workflows/session", "activities/turn"},
	{"checkpoint", "internal/dial", "workflows", "tacpclient", "testagent/agent"},
	{"internal/transcript", "notify", "gateway", "remote"},
	{"activities", "deck", "internal/selfagent", "devserver"},
	{"starter/cli", "worker/tacpworker"},
	{"worker/workercmd", "demo/democmd"},
	{"cmd/tacp", "worker", "demo", "starter", "testagent"},
}

// testMachinery are packages that only tests, benches and their tools run: production
// imports none of them, and they may import anything.
var testMachinery = []string{"internal/testkit/", "bench", "e2e", "docker", "activities/onserver"}

func isTestMachinery(p string) bool {
	for _, m := range testMachinery {
		if p == strings.TrimSuffix(m, "/") || strings.HasPrefix(p, m) || strings.HasPrefix(p, m+"/") {
			return true
		}
	}
	return false
}

func TestNoPackageImportsOneAboveIt(t *testing.T) {
	layer := map[string]int{}
	for i, ps := range layers {
		for _, p := range ps {
			layer[p] = i
		}
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").Output()
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		if isTestMachinery(pkg) {
			continue
		}
		at, ok := layer[pkg]
		if !ok {
			t.Errorf("%s is in no layer: add it to layers (cmd/tacp/layers_test.go) or testMachinery", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			dep, ours := strings.CutPrefix(imp, module+"/")
			if !ours {
				continue
			}
			if isTestMachinery(dep) {
				t.Errorf("%s imports the test machinery %s", pkg, dep)
			} else if l, ok := layer[dep]; ok && l >= at {
				t.Errorf("%s (layer %d) imports %s (layer %d): a package imports only layers below its own", pkg, at, dep, l)
			}
		}
	}
}

// The wire contract is what a client in any language reads and a Go client imports: the
// payload types, names and rules of signals import only the standard library, so that no
// one who wants them pulls in Temporal. The Temporal client lives in tacpclient, and a
// rejection meets the SDK in signals/rejection.
func TestTheWireContractImportsOnlyTheStandardLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`, module+"/signals").Output()
	require.NoError(t, err)
	require.Equal(t, []string{module + "/signals"}, strings.Fields(string(out)), "signals and the packages it needs beyond the standard library")
}

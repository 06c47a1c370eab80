package main

// What the starter binary is: a client that carries no Temporal server (editors launch it
// as their ACP agent), whose old demo command says where the demo went.

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStarterLinksNoTemporalServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	require.NoError(t, err)
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"go.temporal.io/server", "github.com/tacp-dev/tacp/devserver", "github.com/tacp-dev/tacp/workflows", "github.com/tacp-dev/tacp/activities"} {
			require.False(t, pkg == banned || strings.HasPrefix(pkg, banned+"/"), "starter links %s: it must stay a client (the demo is ./demo)", pkg)
		}
	}
}

func TestDemoSaysWhereItWent(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"demo", "--exit"}, &stdout, &stderr)
	require.Equal(t, exitRejected, code)
	require.Contains(t, stderr.String(), "go run ./demo")
	require.Empty(t, stdout.String())
}

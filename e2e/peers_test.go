package e2e

// The ACP peers nobody on this team wrote (the real coding agents, acpx, the TypeScript
// SDK's examples) are installed by .ci/peers with npm into .ci/npm. A test that needs one
// asks requirePeer: missing, it skips with the command that installs it, or fails under
// TACP_REQUIRE_PEERS=1 (CI), so a broken install can never pass as a skip.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// npmRoot is .ci/npm/node_modules, where .ci/peers installs.
var npmRoot = filepath.Join("..", ".ci", "npm", "node_modules")

// requirePeer returns the absolute path of rel under .ci/npm/node_modules (e.g.
// ".bin/codex-acp"), after checking that it and node are installed.
func requirePeer(t testing.TB, rel string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join(npmRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	missing := ""
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not installed"
	} else if _, err := os.Stat(path); err != nil {
		missing = rel + " is not installed"
	}
	if missing == "" {
		return path
	}
	if os.Getenv("TACP_REQUIRE_PEERS") == "1" {
		t.Fatalf("TACP_REQUIRE_PEERS=1 but %s: run `bash .ci/peers`", missing)
	}
	t.Skipf("%s: run `bash .ci/peers` (TACP_REQUIRE_PEERS=1 makes this a failure)", missing)
	return ""
}

// peerTB records what requirePeer does with a test, without ending it.
type peerTB struct {
	testing.TB
	fatal, skip string
}

func (p *peerTB) Helper() {}

func (p *peerTB) Fatalf(format string, args ...any) {
	if p.fatal == "" && p.skip == "" {
		p.fatal = fmt.Sprintf(format, args...)
	}
}

func (p *peerTB) Skipf(format string, args ...any) {
	if p.fatal == "" && p.skip == "" {
		p.skip = fmt.Sprintf(format, args...)
	}
}

func TestRequirePeerSkipsAMissingPeerOrFailsUnderTACP_REQUIRE_PEERS(t *testing.T) {
	t.Setenv("TACP_REQUIRE_PEERS", "")
	tb := &peerTB{TB: t}
	require.Empty(t, requirePeer(tb, "no-such-peer/bin.js"))
	require.Empty(t, tb.fatal)
	require.Contains(t, tb.skip, "no-such-peer/bin.js is not installed: run `bash .ci/peers`")

	t.Setenv("TACP_REQUIRE_PEERS", "1")
	tb = &peerTB{TB: t}
	requirePeer(tb, "no-such-peer/bin.js")
	require.Empty(t, tb.skip)
	require.Contains(t, tb.fatal, "TACP_REQUIRE_PEERS=1 but no-such-peer/bin.js is not installed")
}

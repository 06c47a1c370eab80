package tacpworker

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/internal/sandbox"
)

func sandboxOpts(t *testing.T, deflt string, profiles ...activities.Profile) (Options, *activities.Trust) {
	t.Helper()
	opts := Options{DataDir: t.TempDir(), Sandbox: deflt, Profiles: profiles}
	trust, err := NewTrust(opts)
	require.NoError(t, err)
	return opts, trust
}

func TestSandboxIsRefusedWhereTheKernelCannotSandbox(t *testing.T) {
	defer sandbox.PretendABI(3)()
	opts, trust := sandboxOpts(t, activities.SandboxOn, activities.Profile{Name: "claude", Command: "claude-agent-acp"})
	box, err := newSandbox(opts, trust)
	require.Nil(t, box)
	require.ErrorContains(t, err, `agent profile "claude" runs sandboxed`)
	require.ErrorContains(t, err, "Landlock is ABI 3")
	require.ErrorContains(t, err, `"sandbox": "off"`)
	require.ErrorContains(t, err, "-agent.sandbox=off")
	require.NoDirExists(t, filepath.Join(opts.DataDir, "sandbox"), "a refused start changes nothing")
}

func TestSandboxOptOut(t *testing.T) {
	defer sandbox.PretendABI(0)()
	t.Run("TheWorker", func(t *testing.T) {
		opts, trust := sandboxOpts(t, activities.SandboxOff, activities.Profile{Name: "a", Command: "agent"})
		box, err := newSandbox(opts, trust)
		require.NoError(t, err)
		require.Nil(t, box)
	})
	t.Run("AProfile", func(t *testing.T) {
		opts, trust := sandboxOpts(t, activities.SandboxOn, activities.Profile{Name: "a", Command: "agent", Sandbox: activities.SandboxOff})
		box, err := newSandbox(opts, trust)
		require.NoError(t, err)
		require.Nil(t, box)
		p, _ := trust.Profiles.Resolve("a")
		require.False(t, p.Sandboxed())
	})
}

func TestSandboxDefaultOfTheGoAPIIsOff(t *testing.T) {
	_, trust := sandboxOpts(t, "", activities.Profile{Name: "a", Command: "agent"})
	p, _ := trust.Profiles.Resolve("a")
	require.False(t, p.Sandboxed())
	_, err := NewTrust(Options{DataDir: t.TempDir(), Sandbox: "maybe"})
	require.ErrorContains(t, err, `sandbox "maybe"`)
}

func TestSandboxOnAKernelThatCan(t *testing.T) {
	opts, trust := sandboxOpts(t, activities.SandboxOn)
	box, err := newSandbox(opts, trust)
	require.NoError(t, err, "this project's machines sandbox agents")
	t.Cleanup(box.Close)
	p, _ := trust.Profiles.Resolve(activities.DefaultProfile)
	require.True(t, p.Sandboxed(), "the built-in test agent, sandboxed")
	require.Contains(t, p.State, "TESTAGENT_TRANSCRIPTS", "its transcripts kept per session")
}

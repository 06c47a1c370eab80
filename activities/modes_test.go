package activities

import (
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

func TestAgentOfCommandRecognisesTheWellKnownAgentsProgram(t *testing.T) {
	for cmd, want := range map[string]string{
		"claude-agent-acp --some-flag": "claude",
		"/opt/npm/bin/codex-acp":       "codex",
		"gemini --experimental-acp":    "gemini",
		"gemini --acp":                 "gemini",
		"opencode acp":                 "opencode",
		"/usr/bin/env HOME=/tmp/h IS_SANDBOX=1 claude-agent-acp": "claude",
		"env -i PATH=/bin /usr/local/bin/opencode acp":           "opencode",
		"testagent -settings":                                    "",
		"node claude-agent-acp":                                  "",
	} {
		argv, err := SplitCommand(cmd)
		require.NoError(t, err)
		require.Equal(t, want, agentOfCommand(argv), cmd)
	}
}

// An operator's profile of a well-known agent, by its command, gets the built-in profile's
// environment, quirks and state folders, and keeps its own word where it has one.
func TestAnOperatorsProfileOfAWellKnownAgentGetsItsSettings(t *testing.T) {
	ps, err := NewProfiles([]Profile{
		{Name: "cc", Command: "claude-agent-acp --some-flag", Env: map[string]string{"DISABLE_AUTOUPDATER": "0"}},
		{Name: "oc", Command: "/usr/bin/env OPENCODE_PERMISSION={} opencode acp"},
		{Name: "cx", Command: "codex-acp", Env: map[string]string{"CODEX_HOME": "/srv/codex"}},
		{Name: "mine", Command: "testagent", Modes: &ModeTable{Ask: "ask"}},
	}, "cc")
	require.NoError(t, err)
	cc, _ := ps.Resolve("cc")
	require.Equal(t, "claude", cc.Agent)
	require.Equal(t, "1", cc.Env["IS_SANDBOX"])
	require.Equal(t, "0", cc.Env["DISABLE_AUTOUPDATER"], "the operator's own value wins")
	require.Equal(t, "~/.claude", cc.State["CLAUDE_CONFIG_DIR"])
	require.Equal(t, "default", cc.modeTable(nil).Ask)
	oc, _ := ps.Resolve("oc")
	require.NotContains(t, oc.Env, "OPENCODE_PERMISSION", "set by the command's env(1) words")
	require.Equal(t, "--port", oc.OwnPortFlag)
	require.Nil(t, oc.modeTable(nil), "OpenCode has no modes")
	cx, _ := ps.Resolve("cx")
	require.NotContains(t, cx.State, "CODEX_HOME", "the operator set the variable")
	require.Equal(t, "read-only", cx.Env["INITIAL_AGENT_MODE"])
	require.False(t, cx.AsksTypedFailures())
	mine, _ := ps.Resolve("mine")
	require.Equal(t, "ask", mine.modeTable(&acp.Implementation{Name: "@agentclientprotocol/claude-agent-acp"}).Ask, "the profile's own table wins")

	_, err = NewProfiles([]Profile{{Name: "x", Command: "x", Agent: "cursor"}}, "")
	require.ErrorContains(t, err, `agent "cursor"`)
	_, err = NewProfiles([]Profile{{Name: "x", Command: "x", Modes: &ModeTable{}}}, "")
	require.ErrorContains(t, err, `"ask"`)
}

func TestAnUnknownProfileIsGovernedByTheAgentInfoItAnswers(t *testing.T) {
	pr := Profile{Name: "x", Command: "x"}
	require.Nil(t, pr.modeTable(&acp.Implementation{Name: "some-agent"}))
	require.Equal(t, "read-only", pr.modeTable(&acp.Implementation{Name: "@agentclientprotocol/codex-acp"}).Ask)
	require.Equal(t, "default", pr.modeTable(&acp.Implementation{Name: "gemini-cli"}).Ask)
}

func TestGovernChoicesKeepsWhatThePolicyAllows(t *testing.T) {
	claude := knownAgents["claude"].modes
	for _, tt := range []struct {
		policy, chosen, want string
	}{
		{signals.PolicyAskForRisky, "", "default"},
		{signals.PolicyAskForRisky, "auto", "default"},
		{signals.PolicyAskAlways, "bypassPermissions", "default"},
		{"", "acceptEdits", "default"},
		{signals.PolicyAskForRisky, "plan", "plan"},
		{signals.PolicyAllowAll, "bypassPermissions", "bypassPermissions"},
		{signals.PolicyAllowAll, "", "default"},
	} {
		c := governChoices(claude, tt.policy, signals.SessionChoices{ModeID: tt.chosen,
			ConfigOptions: []signals.ConfigChoice{{ConfigID: "mode", Value: tt.chosen}, {ConfigID: "model", Value: "opus"}}})
		require.Equal(t, tt.want, c.ModeID, "%s %s", tt.policy, tt.chosen)
		require.Contains(t, c.ConfigOptions, signals.ConfigChoice{ConfigID: "model", Value: "opus"})
		if tt.policy != signals.PolicyAllowAll && !claude.asks(tt.chosen) {
			require.NotContains(t, c.ConfigOptions, signals.ConfigChoice{ConfigID: "mode", Value: tt.chosen})
		}
	}
	require.Equal(t, "auto", governMode(nil, signals.PolicyAskAlways, "auto"), "no table: nothing known, nothing changed")
}

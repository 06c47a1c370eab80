package cli

// Every command takes its flags before or after its arguments, --flag=value or --flag value,
// "--" ends the flags, and a text argument that begins with '-' is refused before "--".

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFlagsStandAfterPositionalArguments(t *testing.T) {
	for _, tc := range []struct {
		line string
		rest []string
		flag map[string]string
	}{
		{"deployment drained BUILD_ID --wait 60s", []string{"drained", "BUILD_ID"}, map[string]string{"wait": "1m0s"}},
		{"deployment --wait=60s drained BUILD_ID", []string{"drained", "BUILD_ID"}, map[string]string{"wait": "1m0s"}},
		{"answer REQ --field a=b --session s", []string{"REQ"}, map[string]string{"field": "a=b", "session": "s"}},
		{"answer --session=s REQ --content {}", []string{"REQ"}, map[string]string{"content": "{}"}},
		{"prompt --session s hi --no-wait", []string{"hi"}, map[string]string{"session": "s", "no-wait": "true"}},
		{"prompt hi there --session s", []string{"hi", "there"}, map[string]string{"session": "s"}},
		{"prompt --session s - --no-wait", []string{"-"}, map[string]string{"no-wait": "true"}},
		{"steer --session s go on --expect T7", []string{"go", "on"}, map[string]string{"expect": "T7"}},
		{"approve REQ allow --session s --json", []string{"REQ", "allow"}, map[string]string{"json": "true"}},
		{"title --session s a new title --clear=false", []string{"a", "new", "title"}, map[string]string{"clear": "false"}},
		{"tail --session s --follow --after 3", []string{}, map[string]string{"follow": "true", "after": "3"}},
		{"acp --session s --observe", []string{}, map[string]string{"observe": "true"}},
	} {
		t.Run(tc.line, func(t *testing.T) {
			p := dryParse(strings.Fields(tc.line))
			require.NoError(t, p.err)
			require.Equal(t, tc.rest, p.fs.Args())
			for name, want := range tc.flag {
				require.Equal(t, want, p.fs.Lookup(name).Value.String(), name)
			}
		})
	}
}

func TestDoubleDashSendsATextThatLooksLikeAFlag(t *testing.T) {
	p := dryParse([]string{"prompt", "--session", "s", "--", "--not-a-flag"})
	require.NoError(t, p.err)
	text, err := textArg(p.fs.Args(), nil)
	require.NoError(t, err)
	require.Equal(t, "--not-a-flag", text)
}

func TestATextThatLooksLikeAFlagIsRefusedBeforeDoubleDash(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitError, run([]string{"prompt", "--session", "s", "--not-a-flag"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "unknown flag --not-a-flag")
	require.Contains(t, stderr.String(), "starter prompt -- --not-a-flag")
}

func TestEveryCommandAnswersHelp(t *testing.T) {
	for _, c := range commands {
		if c.name == "demo" {
			continue // it takes no flags: it says where the demo went
		}
		for _, h := range []string{"-h", "--help"} {
			var stdout, stderr bytes.Buffer
			run([]string{c.name, "ARG", h}, &stdout, &stderr)
			require.Contains(t, stderr.String(), "Usage: starter "+c.name, "%s %s", c.name, h)
			require.Contains(t, stderr.String(), "-session", "%s %s", c.name, h)
		}
	}
}

func TestFlagsAfterArgumentsKeepTheirEnvironmentFallbacks(t *testing.T) {
	t.Setenv("TACP_SESSION", "from-env")
	p := dryParse([]string{"answer", "REQ", "--decline"})
	require.NoError(t, p.err)
	require.Equal(t, "from-env", p.fs.Lookup("session").Value.String())
	require.Equal(t, "true", p.fs.Lookup("decline").Value.String())
}

func TestCompletionScriptsNameEveryCommandOfTheTable(t *testing.T) {
	for _, shell := range Shells {
		var stdout, stderr bytes.Buffer
		require.Equal(t, exitOK, run([]string{"completion", shell}, &stdout, &stderr), stderr.String())
		for _, c := range commands {
			require.Contains(t, stdout.String(), c.name, "%s completes %s", shell, c.name)
		}
		require.Contains(t, stdout.String(), "no-wait", "%s completes prompt's own flags", shell)
		if shell == "bash" {
			if _, err := exec.LookPath("bash"); err == nil {
				cmd := exec.Command("bash", "-n")
				cmd.Stdin = strings.NewReader(stdout.String())
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, "%s", out)
			}
		}
	}
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitError, run([]string{"completion", "tcsh"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "unknown shell")
}

// Every command of the table, a new row included, takes the shared flags after a positional
// argument.
func TestEveryCommandTakesFlagsAfterItsArguments(t *testing.T) {
	for _, c := range commands {
		p := dryParse([]string{c.name, "ARG", "--session", "s", "--json", "--address=h:1"})
		if c.name == "demo" {
			continue // it parses nothing: it says where the demo went
		}
		require.NoError(t, p.err, c.name)
		require.Equal(t, []string{"ARG"}, p.fs.Args(), c.name)
		for name, want := range map[string]string{"session": "s", "json": "true", "address": "h:1"} {
			require.Equal(t, want, p.fs.Lookup(name).Value.String(), "%s --%s", c.name, name)
		}
	}
}

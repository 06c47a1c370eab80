package main

// tacp is one binary with the client's commands, the worker and the demo; its completion
// scripts name every command and parse in each shell that is installed.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/starter/cli"
)

func TestTacpTakesEveryClientCommandTheWorkerAndDev(t *testing.T) {
	for _, line := range []string{
		"worker -dev --dev.port 7234 --agent.max=3",
		"worker --task-queue q --log.level debug",
		"dev --exit --dev.ui-port 0",
		"demo --exit",
		"deployment drained BUILD_ID --wait 60s",
		"answer REQ --field a=b --session s",
		"prompt --session s hi --no-wait",
		"prompt --session s -- --not-a-flag",
		"acp --session s --observe",
		"completion bash",
	} {
		require.NoError(t, parse(strings.Fields(line)), line)
	}
	for _, line := range []string{"nosuch", "worker --nosuch", "dev --nosuch", "prompt --session s --nosuch"} {
		require.Error(t, parse(strings.Fields(line)), line)
	}
}

func TestTacpUsageListsItsCommandsOnce(t *testing.T) {
	var out bytes.Buffer
	require.Equal(t, 0, run(nil, &out, &out))
	for _, s := range specs() {
		require.Equal(t, 1, strings.Count(out.String(), "\n  "+s.Name+" "), s.Name)
	}
	require.NotContains(t, out.String(), "moved: the demo", "tacp runs the demo itself")
}

func completion(t *testing.T, shell string) string {
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"completion", shell}, &out, &errb), errb.String())
	return out.String()
}

func TestCompletionScriptsNameEveryCommandAndParse(t *testing.T) {
	for _, shell := range cli.Shells {
		script := completion(t, shell)
		for _, s := range specs() {
			require.Contains(t, script, s.Name, "%s names %s", shell, s.Name)
		}
		require.Contains(t, script, "dev.ui-port", "%s completes the worker's and the demo's flags", shell)
		if _, err := exec.LookPath(shell); err != nil {
			t.Logf("%s is not installed: its script is checked by content only", shell)
			continue
		}
		cmd := exec.Command(shell, "-n")
		cmd.Stdin = strings.NewReader(script)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s -n: %s", shell, out)
	}
}

// complete runs bash's completion of a command line ending in cur and returns the words
// offered.
func complete(t *testing.T, script string, words ...string) []string {
	src := script + "\nCOMP_WORDS=(" + strings.Join(words, " ") + ")\nCOMP_CWORD=" +
		string(rune('0'+len(words)-1)) + "\n_tacp\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
	cmd := exec.Command("bash", "-c", src)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.Fields(string(out))
}

func TestBashCompletesCommandsAndEachCommandsFlags(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	script := completion(t, "bash")
	require.ElementsMatch(t, []string{"deployment", "delete", "deny", "dev", "demo"}, complete(t, script, "tacp", "de"))
	require.ElementsMatch(t, []string{"--no-wait"}, complete(t, script, "tacp", "prompt", "hi", "--no"))
	require.ElementsMatch(t, []string{"--wait"}, complete(t, script, "tacp", "deployment", "drained", "--wa"))
	require.Contains(t, complete(t, script, "tacp", "worker", "--dev."), "--dev.ui-port")
	require.ElementsMatch(t, []string{"bash"}, complete(t, script, "tacp", "completion", "ba"))
}

func TestFishCompletesCommandsAndEachCommandsFlags(t *testing.T) {
	if _, err := exec.LookPath("fish"); err != nil {
		t.Skip("fish is not installed")
	}
	script := filepath.Join(t.TempDir(), "tacp.fish")
	require.NoError(t, os.WriteFile(script, []byte(completion(t, "fish")), 0o600))
	for line, want := range map[string]string{
		"tacp prompt --no":      "--no-wait",
		"tacp dep":              "deployment",
		"tacp worker --dev.ui":  "--dev.ui-port",
		"tacp completion ba":    "bash",
		"tacp answer REQ --fie": "--field",
	} {
		out, err := exec.Command("fish", "-c", "source "+script+"; complete -C '"+line+"'").CombinedOutput()
		require.NoError(t, err, "%s", out)
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			got = append(got, strings.SplitN(l, "\t", 2)[0])
		}
		require.Contains(t, got, want, line)
	}
}

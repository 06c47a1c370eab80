package main

// Every command line the README and docs/ give parses against the real command tree: an
// unknown command or flag, or a flag without its value, fails here rather than in a
// newcomer's terminal. The lines are those of shell code blocks and inline code that run
// tacp, starter, worker or the demo (go run ./starter ..., starter ..., tacp ...), also
// when quoted inside another command (acpx --agent "tacp acp"). The editor set-ups of
// docs/acp.md are parsed the same way, from each editor's own format.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/demo/democmd"
	"github.com/tacp-dev/tacp/starter/cli"
	"github.com/tacp-dev/tacp/worker/workercmd"
)

// docLine is one command line of a document.
type docLine struct {
	where  string // file:line
	words  []string
	inline bool // an inline code span of prose, which may name a flag without its value
}

// docFiles are the Markdown files whose command lines are checked.
func docFiles(t *testing.T) []string {
	files, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	return append([]string{"../../README.md"}, files...)
}

var inlineCode = regexp.MustCompile("`([^`]+)`")

// docLines are the shell lines of fenced code blocks (sh, bash, shell, console) and
// the inline code spans of path.
func docLines(t *testing.T, path string) []docLine {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []docLine
	inBlock, shell := false, false
	cont := ""
	for i, line := range strings.Split(string(b), "\n") {
		where := fmt.Sprintf("%s:%d", filepath.Base(path), i+1)
		if fence := strings.TrimSpace(line); strings.HasPrefix(fence, "```") {
			if !inBlock {
				lang := strings.TrimPrefix(fence, "```")
				shell = lang == "sh" || lang == "bash" || lang == "shell" || lang == "console"
			}
			inBlock = !inBlock
			continue
		}
		if inBlock {
			if !shell {
				continue
			}
			line = cont + strings.TrimPrefix(strings.TrimSpace(line), "$ ")
			if strings.HasSuffix(line, "\\") {
				cont = strings.TrimSuffix(line, "\\") + " "
				continue
			}
			cont = ""
			if strings.ContainsAny(line, "─│▶◀") {
				continue // a diagram in a plain block
			}
			for _, cmd := range shellCommands(line) {
				out = append(out, docLine{where, cmd, false})
			}
			continue
		}
		for _, m := range inlineCode.FindAllStringSubmatch(line, -1) {
			span := m[1]
			// Usage patterns ([--flag X], A | B, <placeholder>, COMMAND) are not command lines.
			if strings.ContainsAny(span, "[]<>|{}") || strings.Contains(span, "COMMAND") || !strings.Contains(span, " ") {
				continue
			}
			for _, cmd := range shellCommands(span) {
				out = append(out, docLine{where, cmd, true})
			}
		}
	}
	return out
}

// shellCommands splits a shell line into its simple commands (at |, ;, & and a redirection),
// each as its words with quotes removed; a comment ends the line.
func shellCommands(line string) [][]string {
	var cmds [][]string
	var words []string
	var w strings.Builder
	inWord, skip := false, false
	var quote rune
	end := func() {
		if inWord && !skip {
			words = append(words, w.String())
		}
		w.Reset()
		inWord = false
	}
	endCmd := func() {
		end()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words, skip = nil, false
	}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else if r == '\\' && quote == '"' && i+1 < len(rs) {
				i++
				w.WriteRune(rs[i])
			} else {
				w.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '\\' && i+1 < len(rs):
			i++
			w.WriteRune(rs[i])
			inWord = true
		case r == ' ' || r == '\t':
			end()
		case r == '#' && !inWord:
			endCmd()
			return cmds
		case r == '|' || r == ';' || r == '&':
			endCmd()
		case r == '>' || r == '<':
			end()
			skip = true // a redirection's target and what follows are not arguments
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	endCmd()
	return cmds
}

// program is the tacp program a command line runs, and its arguments; ok is false for a line
// that runs none.
func program(words []string) (prog string, args []string, ok bool) {
	for len(words) > 0 && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(words[0]) {
		words = words[1:] // VAR=value before the command
	}
	if len(words) >= 3 && words[0] == "go" && words[1] == "run" {
		words = append([]string{strings.TrimPrefix(words[2], "./")}, words[3:]...)
	}
	if len(words) == 0 {
		return "", nil, false
	}
	switch name := filepath.Base(words[0]); name {
	case "tacp", "starter", "worker", "demo", "cmd/tacp":
		if name == "cmd/tacp" || words[0] == "cmd/tacp" {
			name = "tacp"
		}
		return name, words[1:], true
	}
	if words[0] == "cmd/tacp" {
		return "tacp", words[1:], true
	}
	return "", nil, false
}

// parseLine parses a tacp program's arguments through its command tree.
func parseLine(prog string, args []string) error {
	var err error
	switch prog {
	case "tacp":
		err = parse(args)
	case "starter":
		_, err = cli.Parse(args)
	case "worker":
		_, err = workercmd.Parse(args)
	case "demo":
		_, err = democmd.Parse(args)
	}
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// invocations are the tacp command lines of words: itself, and those quoted in its words.
func invocations(words []string) [][]string {
	var out [][]string
	if _, _, ok := program(words); ok {
		out = append(out, words)
	}
	for _, w := range words[1:] {
		if strings.Contains(w, " ") {
			for _, cmd := range shellCommands(w) {
				out = append(out, invocations(cmd)...)
			}
		}
	}
	return out
}

func TestEveryDocumentedCommandLineParses(t *testing.T) {
	checked := 0
	for _, path := range docFiles(t) {
		for _, l := range docLines(t, path) {
			for _, words := range invocations(l.words) {
				prog, args, _ := program(words)
				if len(args) > 0 && (args[0] == "..." || args[0] == "…") {
					continue // "go run ./starter ...": any command
				}
				checked++
				err := parseLine(prog, args)
				if err != nil && l.inline && (strings.Contains(err.Error(), "needs an argument") || strings.Contains(err.Error(), "invalid value")) {
					err = nil // prose names the flag (`starter acp --remote`) or its value's kind (D)
				}
				if err != nil {
					t.Errorf("%s: %s: %v", l.where, strings.Join(words, " "), err)
				}
			}
		}
	}
	t.Logf("%d documented command lines parse", checked)
	require.Greater(t, checked, 50, "the docs test finds the documented command lines")
}

func TestTheDocsTestCatchesDrift(t *testing.T) {
	for _, line := range []string{
		"go run ./starter answer REQ --json-content '{}'",
		"starter nosuch --session s",
		"tacp deployment drained BUILD --wait",
		"go run ./worker -dev --no-such-flag",
	} {
		cmds := invocations(shellCommands(line)[0])
		require.Len(t, cmds, 1, line)
		prog, args, _ := program(cmds[0])
		require.Error(t, parseLine(prog, args), line)
	}
	cmds := invocations(shellCommands(`npx acpx --approve-all --agent "go run ./starter acp --nope" exec "/chunks 5"`)[0])
	require.Len(t, cmds, 1, "a command line quoted in another is found")
	prog, args, _ := program(cmds[0])
	require.Error(t, parseLine(prog, args))
}

// snippet returns the body of the fenced block of lang that follows the line containing
// title in docs/acp.md.
func snippet(t *testing.T, title, lang string) string {
	b, err := os.ReadFile("../../docs/acp.md")
	require.NoError(t, err)
	s := string(b)
	i := strings.Index(s, title)
	require.GreaterOrEqual(t, i, 0, "docs/acp.md has the %s set-up", title)
	s = s[i:]
	j := strings.Index(s, "```"+lang+"\n")
	require.GreaterOrEqual(t, j, 0, "%s: a %s block", title, lang)
	s = s[j+len("```"+lang+"\n"):]
	return s[:strings.Index(s, "```")]
}

// requireLaunchesTacpACP checks that command and args are a tacp command line that parses
// and runs acp.
func requireLaunchesTacpACP(t *testing.T, editor string, argv []string) {
	require.NotEmpty(t, argv, editor)
	require.Contains(t, []string{"tacp", "starter"}, argv[0], "%s launches tacp", editor)
	require.Equal(t, "acp", argv[1], "%s launches the acp command", editor)
	require.NoError(t, parseLine(argv[0], argv[1:]), "%s: %v", editor, argv)
}

func TestEditorSetUpsLaunchTacpACP(t *testing.T) {
	type server struct {
		Type    string            `json:"type"`
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
	}
	for _, editor := range []string{"**Zed**", "**JetBrains IDEs**"} {
		var cfg struct {
			AgentServers map[string]server `json:"agent_servers"`
		}
		require.NoError(t, json.Unmarshal([]byte(snippet(t, editor, "json")), &cfg), editor)
		s, ok := cfg.AgentServers["tacp"]
		require.True(t, ok, "%s names the agent tacp", editor)
		requireLaunchesTacpACP(t, editor, append([]string{s.Command}, s.Args...))
		require.NotEmpty(t, s.Env["TEMPORAL_ADDRESS"], editor)
		if editor == "**Zed**" {
			require.Equal(t, "custom", s.Type, "Zed's custom agent servers say so")
		}
	}

	var acpx struct {
		Agents map[string]server `json:"agents"`
	}
	require.NoError(t, json.Unmarshal([]byte(snippet(t, "**acpx**", "json")), &acpx))
	requireLaunchesTacpACP(t, "acpx", shellCommands(acpx.Agents["tacp"].Command)[0])

	// Lua and Emacs Lisp: the strings of the command line, read from each one's fields.
	strs := func(s string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`"([^"]*)"`).FindAllStringSubmatch(s, -1) {
			out = append(out, m[1])
		}
		return out
	}
	field := func(src, re string) string {
		m := regexp.MustCompile(re).FindStringSubmatch(src)
		require.NotNil(t, m, re)
		return m[1]
	}
	cc := snippet(t, "**Neovim, CodeCompanion**", "lua")
	requireLaunchesTacpACP(t, "CodeCompanion", strs(field(cc, `default = \{([^}]*)\}`)))
	av := snippet(t, "**Neovim, avante.nvim**", "lua")
	requireLaunchesTacpACP(t, "avante.nvim", append(strs(field(av, `command = ("[^"]*")`)), strs(field(av, `args = \{([^}]*)\}`))...))
	require.Contains(t, av, "acp_providers", "avante.nvim reads ACP agents from acp_providers")
	el := snippet(t, "**Emacs, agent-shell**", "elisp")
	requireLaunchesTacpACP(t, "agent-shell", append(strs(field(el, `:command ("[^"]*")`)), strs(field(el, `:command-params '\(([^)]*)\)`))...))
	require.Equal(t, strings.Count(el, "("), strings.Count(el, ")"), "agent-shell's set-up balances its parentheses")
}

// citedFile is a file name a comment or a document cites: dir/name.ext or name.go.
var citedFile = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./~$-])((?:[A-Za-z0-9_-]+/)*[A-Za-z0-9][A-Za-z0-9_-]*\.(?:go|md))\b`)

// citedElsewhere are the names that cite files of other repositories or none of this one's.
var citedElsewhere = map[string]bool{
	"raft.go": true, "node.go": true, // etcd-io/raft, the model of the session core
	"DESIGN.md": true, // lived outside the repository (docs/contract.md says so)
}

func TestCitedFilesExist(t *testing.T) {
	root := "../.."
	names := map[string]bool{}
	var sources []string
	require.NoError(t, filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata" || d.Name() == "npm") {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			names[d.Name()] = true
			if (strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go")) || strings.HasSuffix(path, ".md") {
				sources = append(sources, path)
			}
		}
		return nil
	}))
	for _, src := range sources {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		for _, m := range citedFile.FindAllStringSubmatch(string(b), -1) {
			cited := m[1]
			base := filepath.Base(cited)
			if citedElsewhere[base] || strings.HasPrefix(cited, "schema/") {
				continue
			}
			if !strings.Contains(cited, "/") && strings.HasSuffix(src, ".go") && strings.HasSuffix(cited, ".go") {
				// A source cites a file of its own package by name, another's by its path.
				if _, err := os.Stat(filepath.Join(filepath.Dir(src), cited)); err != nil {
					t.Errorf("%s cites %s, which its package has no file named (cite another package's file by its path)", src, cited)
				}
				continue
			}
			if !strings.Contains(cited, "/") {
				if !names[base] {
					t.Errorf("%s cites %s, which no file of the repository is named", src, cited)
				}
				continue
			}
			_, e1 := os.Stat(filepath.Join(root, cited))
			_, e2 := os.Stat(filepath.Join(filepath.Dir(src), cited))
			if e1 != nil && e2 != nil {
				t.Errorf("%s cites %s, which does not exist", src, cited)
			}
		}
	}
}

// The README's first screen gives exactly two set-up commands, and CI runs both: the demo on
// a fresh clone and the test command.
func TestREADMESetUpCommandsAreTheOnesCIRuns(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	s := string(b)
	i := strings.Index(s, "```sh\n")
	require.GreaterOrEqual(t, i, 0)
	block := s[i+len("```sh\n"):]
	block = block[:strings.Index(block, "```")]
	var cmds []string
	for _, line := range strings.Split(block, "\n") {
		for _, c := range shellCommands(line) {
			cmds = append(cmds, strings.Join(c, " "))
		}
	}
	require.Equal(t, []string{"go run ./demo", "go test -timeout 30m ./..."}, cmds)
	ci, err := os.ReadFile("../../.ci/run")
	require.NoError(t, err)
	require.Contains(t, string(ci), "git clone -q . ")
	require.Contains(t, string(ci), "go run ./demo --exit)")
	require.Contains(t, string(ci), "\ngo test -timeout 30m ./...\n")
}

package e2e

// The command lines of README.md and docs/ that stand under a `<!-- runnable -->` marker run
// as written, in their order, against this suite's embedded server and worker:
// cmd/tacp's docs test proves that every documented line parses; this one proves that the
// lines a newcomer pastes first do what the text says.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/checkpoint"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

// runnableMarker stands on the line before a fenced shell block whose lines run in the test.
const runnableMarker = "<!-- runnable -->"

// runnableBlock is a marked block: where it is and its command lines, each split into words.
// What follows "→ " in a line's comment is text its output holds.
type runnableBlock struct {
	where string
	lines [][]string
	wants []string
}

// runnableBlocks are the marked blocks of path.
func runnableBlocks(t *testing.T, path string) []runnableBlock {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []runnableBlock
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != runnableMarker {
			continue
		}
		require.Less(t, i+1, len(lines))
		require.True(t, strings.HasPrefix(lines[i+1], "```sh"), "%s:%d: the marker stands right above a ```sh block", path, i+1)
		blk := runnableBlock{where: fmt.Sprintf("%s:%d", filepath.Base(path), i+1)}
		for i += 2; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			words, comment, err := shellWords(lines[i])
			require.NoError(t, err, "%s:%d", path, i+1)
			if len(words) > 0 {
				_, want, _ := strings.Cut(comment, "→ ")
				blk.lines = append(blk.lines, words)
				blk.wants = append(blk.wants, want)
			}
		}
		out = append(out, blk)
	}
	return out
}

// shellWords splits a line as sh would for the plain lines the docs give: words, single and
// double quotes, and a comment from an unquoted '#' (returned without the '#').
func shellWords(line string) ([]string, string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == '#' && !inWord:
			return words, line[i+1:], nil
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, "", fmt.Errorf("unclosed quote in %q", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, "", nil
}

// serverLine says whether words start what the suite already runs: the worker with its
// embedded server, or the demo.
func serverLine(words []string) bool {
	s := strings.Join(words, " ")
	for _, p := range []string{"go run ./worker -dev", "go run ./demo", "tacp dev", "tacp worker -dev"} {
		if s == p || strings.HasPrefix(s, p+" ") {
			return true
		}
	}
	return false
}

// clientArgs are the arguments of a client command line (go run ./starter, starter or tacp
// and a command), or nil when the line is not one.
func clientArgs(words []string) []string {
	switch {
	case len(words) > 3 && words[0] == "go" && words[1] == "run" && words[2] == "./starter":
		return words[3:]
	case len(words) > 1 && (words[0] == "starter" || words[0] == "tacp"):
		return words[1:]
	}
	return nil
}

func TestRunnableDocLinesRunAsWritten(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../docs/*.md")
	require.NoError(t, err)
	ran := 0
	for _, path := range append([]string{"../README.md"}, files...) {
		for _, blk := range runnableBlocks(t, path) {
			t.Run(strings.ReplaceAll(blk.where, ":", "_"), func(t *testing.T) {
				// Each session the block names gets an id of this run, wherever it appears
				// (--session s1, a branch tacp/s1).
				sessions := map[string]string{}
				for _, words := range blk.lines {
					for i, w := range words {
						if w == "--session" && i+1 < len(words) {
							sessions[words[i+1]] = fmt.Sprintf("docs-%s-%d", words[i+1], time.Now().UnixNano())
						}
					}
				}
				// `go run ./worker -dev` is a worker with the default flags: its checkpoint
				// store is a bare repository in its data dir, which the client, on the same
				// machine, finds by default. This worker keeps its data dir of its own.
				data := t.TempDir()
				store := checkpoint.DefaultStoreURL(data)
				queue := "tacp-docs-" + signals.NewID()[:8]
				extraWorker(t, tc, tacpworker.Options{TaskQueue: queue, DataDir: data, CheckpointStore: store})
				// The block's --repo . is a fresh repository the block runs in.
				repo := t.TempDir()
				out, err := exec.Command("git", "init", "-q", repo).CombinedOutput()
				require.NoError(t, err, "%s", out)
				for n, words := range blk.lines {
					if serverLine(words) {
						continue // the suite's embedded server and worker stand in for it
					}
					args := clientArgs(words)
					require.NotNil(t, args, "%s: a runnable block runs tacp commands only: %q", blk.where, words)
					for i, a := range args {
						for from, to := range sessions {
							a = regexp.MustCompile(`\b`+regexp.QuoteMeta(from)+`\b`).ReplaceAllString(a, to)
						}
						args[i] = a
					}
					cmd := starterCmd(ctxFor(t, 2*time.Minute), args...)
					cmd.Dir = repo
					cmd.Env = append(cmd.Env, "TACP_TASK_QUEUE="+queue, "TACP_CHECKPOINT_STORE="+store)
					out, err := cmd.CombinedOutput()
					require.NoError(t, err, "%s: %s\n%s", blk.where, strings.Join(words, " "), out)
					if want := blk.wants[n]; want != "" {
						for from, to := range sessions {
							want = strings.ReplaceAll(strings.TrimSpace(want), from, to)
						}
						require.Contains(t, string(out), want, "%s: %s says it prints this", blk.where, strings.Join(words, " "))
					}
					t.Logf("%s\n%s", strings.Join(words, " "), out)
					ran++
				}
			})
		}
	}
	require.GreaterOrEqual(t, ran, 5, "the README's first commands are marked runnable")
}

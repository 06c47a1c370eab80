package e2e

// The stdio shim end to end: acpx (an ACP client nobody on this team wrote) starts
// `starter acp --remote` as its agent, with no Temporal address it could use, and the
// shim speaks to a deck running as its own process (`starter web`). The deck is killed
// mid-turn and started again on the same port; the shim reconnects, resumes by seq, and
// acpx gets the whole turn and its answer.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/internal/freeport"
	"github.com/tacp-dev/tacp/signals"
)

// deckProcess is `starter web` as a child process.
type deckProcess struct {
	cmd *exec.Cmd
	// ready is when it said it serves.
	ready time.Time
}

// startDeckProcess starts `starter web` on addr with an operator token, the gateway
// tests' agent and extra flags (and environment variables env), and waits until it
// serves.
func startDeckProcess(t *testing.T, addr, token string, env []string, extra ...string) *deckProcess {
	t.Helper()
	args := append([]string{"web", "--listen", addr, "--token", token, "--agent", gatewayAgent(), "--log.level", "warn"}, extra...)
	cmd := starterCmd(context.Background(), args...)
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &deckProcess{cmd: cmd}
	t.Cleanup(p.kill)
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "deck on ") {
			p.ready = time.Now()
			break
		}
		t.Log("starter web: " + lines.Text())
	}
	require.False(t, p.ready.IsZero(), "starter web did not start")
	go func() { _, _ = io.Copy(&testLog{t: t, prefix: "starter web: "}, stderr) }()
	return p
}

// kill ends the deck at once, as a crash or an OOM kill would: no close frames, no
// detach.
func (p *deckProcess) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// lineTap collects a process's output lines and signals each one.
type lineTap struct {
	mu    sync.Mutex
	lines []string
	part  string
	wake  chan struct{}
}

func (l *lineTap) Write(p []byte) (int, error) {
	l.mu.Lock()
	s := l.part + string(p)
	i := strings.LastIndexByte(s, '\n')
	if i >= 0 {
		l.lines = append(l.lines, strings.Split(s[:i], "\n")...)
		s = s[i+1:]
	}
	l.part = s
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (l *lineTap) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append(append([]string(nil), l.lines...), l.part)
}

// updates returns the session/update params among acpx's JSON output lines.
func acpxUpdates(t *testing.T, lines []string) []acpxUpdate {
	t.Helper()
	var out []acpxUpdate
	for _, line := range lines {
		var m struct {
			Method string     `json:"method"`
			Params acpxUpdate `json:"params"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.Method == "session/update" {
			out = append(out, m.Params)
		}
	}
	return out
}

type acpxUpdate struct {
	SessionID string `json:"sessionId"`
	Update    struct {
		Kind    string `json:"sessionUpdate"`
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"update"`
	Meta map[string]any `json:"_meta"`
}

func TestAcpxThroughTheRemoteShimSurvivesTheDeckRestartingMidTurn(t *testing.T) {
	t.Parallel()
	bin := npmFile(t, ".bin/acpx")
	ports, err := freeport.Take("127.0.0.1", 1)
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	token := "op-" + signals.NewID()
	deck := startDeckProcess(t, addr, token, nil)

	dir := t.TempDir()
	const chunks = 60
	agent := fmt.Sprintf("%s acp --remote ws://%s/acp --token %s --remote.max-backoff 500ms", starterBin, addr, token)
	cmd := exec.CommandContext(ctxFor(t, 120*time.Second), bin, "--approve-all", "--format", "json", "--agent", agent, "exec", fmt.Sprintf("/chunks %d every 100ms", chunks))
	cmd.Dir = dir
	// The laptop knows no Temporal: an address that answers nothing.
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(dir, ".home"), "TEMPORAL_ADDRESS=127.0.0.1:1", "TACP_TOKEN=", "TACP_REMOTE=")
	out := &lineTap{wake: make(chan struct{}, 1)}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Mid-turn: acpx has shown some of the turn's chunks.
	require.Eventually(t, func() bool {
		n := 0
		for _, u := range acpxUpdates(t, out.all()) {
			if u.Update.Kind == "agent_message_chunk" {
				n++
			}
		}
		return n >= 5
	}, 90*time.Second, 20*time.Millisecond, "acpx streams the turn:\n%s", strings.Join(out.all(), "\n"))
	deck.kill()
	deck = startDeckProcess(t, addr, token, nil)

	select {
	case err = <-exited:
	case <-time.After(100 * time.Second):
		t.Fatalf("acpx did not finish:\n%s", strings.Join(out.all(), "\n"))
	}
	lines := out.all()
	require.NoError(t, err, "acpx:\n%s", strings.Join(lines, "\n"))
	text := strings.Join(lines, "\n")
	require.Contains(t, text, `"stopReason":"end_turn"`, "the prompt in flight across the restart got its answer")
	id := acpSessionID.FindString(text)
	require.NotEmpty(t, id)

	evs := turnEnd(t, id, 1)
	var ended time.Time
	for _, ev := range evs {
		if ev.TurnID == 1 && signals.IsTerminal(ev.Kind) {
			ended = ev.At
		}
	}
	require.True(t, ended.After(deck.ready), "the turn was still running when the new deck came up (ended %s, deck up %s)", ended, deck.ready)
	// Every chunk once, in order, and every update's seq after the last.
	var got []string
	var last int64
	for _, u := range acpxUpdates(t, lines) {
		m, err := signals.ACPMetaOf(u.Meta)
		require.NoError(t, err)
		require.Greater(t, m.Seq, last, "seqs only grow: nothing twice")
		last = m.Seq
		if u.Update.Kind == "agent_message_chunk" {
			got = append(got, u.Update.Content.Text)
		}
	}
	require.Equal(t, agentTexts(t, allEvents(t, id), 1), got)
	require.Len(t, got, chunks)
	checkInvariants(t, allEvents(t, id))
}

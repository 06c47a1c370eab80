package e2e

// A turn restarted after its worker was killed (kill -9), as an ACP client sees it: the
// chunks of the lost attempt, one visible separator naming turn.restarted, then the chunks
// of the attempt that runs it again — never the two attempts run together.

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

func TestARestartedTurnIsSeparatedInTheEditor(t *testing.T) {
	t.Parallel()
	queue := "tacp-acprestart-" + signals.NewID()[:8]
	roots := "TACP_E2E_ROOTS=" + strings.Join(suiteRoots(), string(filepath.ListSeparator))
	first := startWorkerProcess(t, queue, roots)
	p := startACP(t, "--task-queue", queue)
	id := p.newSession()
	done := make(chan acp.StopReason, 1)
	go func() {
		res, err := p.prompt(id, "/chunks 30 every 100ms")
		if err == nil {
			done <- res.StopReason
		}
		close(done)
	}()
	waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventAgentUpdate })
	startWorkerProcess(t, queue, roots)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	select {
	case stop := <-done:
		require.Equal(t, acp.StopReasonEndTurn, stop)
	case <-time.After(2 * time.Minute):
		t.Fatal("the restarted turn never answered")
	}

	texts := p.texts(false)
	var seps []int
	for i, s := range texts {
		if strings.Contains(s, "—") {
			seps = append(seps, i)
		}
	}
	require.Len(t, seps, 1, "one separator: %q", texts)
	sep := seps[0]
	require.Contains(t, texts[sep], "this turn")
	require.Contains(t, texts[sep], "attempt 2 took the turn over", "the cause, from the journal")
	t.Logf("what the editor showed: %q", texts)
	require.Greater(t, sep, 0, "the lost attempt's chunks come before it")
	require.Less(t, sep, len(texts)-1, "the new attempt's chunks come after it")
	require.Equal(t, "chunk 30\n", texts[len(texts)-1])

	// The separator names its journal event for tools.
	p.mu.Lock()
	var meta map[string]any
	var seq any
	for _, n := range p.updates {
		if c := n.Update.AgentMessageChunk; c != nil && c.Content.Text != nil && c.Content.Text.Text == texts[sep] {
			meta, _ = c.Meta["tacp"].(map[string]any)
			seq = n.Meta["tacp"].(map[string]any)["seq"]
		}
	}
	p.mu.Unlock()
	require.NotNil(t, meta)
	require.Equal(t, signals.EventTurnRestarted, meta["notice"].(map[string]any)["kind"])
	var restartedSeq int64
	for _, ev := range allEvents(t, id) {
		if ev.Kind == signals.EventTurnRestarted {
			restartedSeq = ev.Seq
		}
	}
	require.EqualValues(t, restartedSeq, seq)
}

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/checkpoint"
	"github.com/tacp-dev/tacp/codec"
	"github.com/tacp-dev/tacp/internal/testkit/seaweedfs"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

// Issue 37: two workers with data dirs of their own (no workspace storage shared) and one
// checkpoint store both reach: a bare git repository, or a real S3-compatible server
// (SeaweedFS) that no agent holds the keys to. Turn 1 writes a file with the agent's edit
// tool (fs/write_text_file) and another with a shell command; its worker is killed -9; turn
// 2 lands on the other worker, which restores the workspace from the checkpoint, and reads
// both files. The journal says checkpoint and restored, never missing.
func TestWorkspaceFollowsTheSessionToAnotherWorker(t *testing.T) {
	t.Parallel()
	t.Run("git", func(t *testing.T) {
		t.Parallel()
		store := filepath.Join(t.TempDir(), "store.git")
		testWorkspaceFollows(t, store, nil)
	})
	t.Run("s3", func(t *testing.T) {
		t.Parallel()
		s3 := seaweedfs.Start(t)
		testWorkspaceFollows(t, s3.URL("tacp-e2e", "follows"), s3.Env())
	})
}

func testWorkspaceFollows(t *testing.T, store string, env []string) {
	queue := "tacp-checkpoint-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	worker := func() (*os.Process, string) {
		data := t.TempDir()
		cmd := startWorkerProcess(t, queue, append([]string{"TACP_E2E_DATA=" + data, "TACP_E2E_CHECKPOINT_STORE=" + store}, env...)...)
		return cmd.Process, data
	}
	first, firstData := worker()

	id := session(t)
	cfg := signals.SessionConfig{SessionID: id, Policy: signals.PolicyAllowAll}
	ctx := ctxFor(t, 180*time.Second)
	_, err := qc.Prompt(ctx, cfg, signals.PromptRequest{Text: "/write notes/edited.txt\nwritten by the edit tool", ClientMessageID: "turn-1"})
	require.NoError(t, err)
	_, err = qc.Prompt(ctx, cfg, signals.PromptRequest{Text: "/sh printf 'written by sh' > shelled.txt", ClientMessageID: "turn-2"})
	require.NoError(t, err)
	evs := turnEnd(t, id, 2)
	require.Equal(t, []string{"wrote notes/edited.txt"}, agentTexts(t, evs, 1))
	edited, err := os.ReadFile(filepath.Join(firstData, "workspaces", id, "notes", "edited.txt"))
	require.NoError(t, err, "the first worker's workspace holds the file")
	require.Equal(t, "written by the edit tool", string(edited))

	worker()
	require.NoError(t, first.Signal(syscall.SIGKILL))
	_, _ = first.Wait()

	_, err = qc.Prompt(ctx, cfg, signals.PromptRequest{Text: "/sh cat notes/edited.txt; echo; cat shelled.txt; echo; env | grep -c ^TACP_S3_ || true", ClientMessageID: "turn-3"})
	require.NoError(t, err)
	evs = turnEnd(t, id, 3)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind, data)
	require.Equal(t, "sh: exit 0: written by the edit tool written by sh 0", strings.Join(agentTexts(t, evs, 3), ""), "both files, and no store credential in the agent's environment")

	checkpoints, restored := filesFollowed(t, evs)
	for _, r := range restored {
		require.Equal(t, int64(3), r.turnID)
	}
	require.Len(t, checkpoints, 3, "one checkpoint a turn")
	require.Equal(t, 1, checkpoints[0].FilesChanged, "turn 1 wrote one file")
	require.Equal(t, 1, checkpoints[1].FilesChanged, "turn 2 wrote one file")
	require.Equal(t, 0, checkpoints[2].FilesChanged, "turn 3 only read")
	require.Len(t, restored, 1)
	require.Equal(t, signals.WorkspaceRestoredData{From: checkpoints[1].ID, Turn: 2, Path: restored[0].Path, Host: restored[0].Host}, restored[0].WorkspaceRestoredData)
	keys, err := codec.KeysFromEnv()
	require.NoError(t, err)
	held, err := checkpoint.Reader{URL: store, Keys: keys, Getenv: seaweedfs.Lookup(env)}.Commit(ctx, id, 2)
	require.NoError(t, err)
	require.Equal(t, checkpoints[1].ID, held, "the store holds turn 2's checkpoint")
	checkInvariants(t, allEvents(t, id))
}

// restoredIn is a workspace.restored event's data and the turn that journaled it.
type restoredIn struct {
	signals.WorkspaceRestoredData
	turnID int64
}

// filesFollowed reads a journal in which a session's files followed it to another worker:
// its checkpoints, each without error and of the turn that journaled it, and its restores.
// A workspace.missing fails the test.
func filesFollowed(t *testing.T, evs []signals.Event) ([]signals.WorkspaceCheckpointData, []restoredIn) {
	t.Helper()
	var checkpoints []signals.WorkspaceCheckpointData
	var restored []restoredIn
	for _, ev := range evs {
		switch ev.Kind {
		case signals.EventWorkspaceMissing:
			t.Fatalf("workspace.missing journaled: %s", ev.Data)
		case signals.EventWorkspaceCheckpoint:
			var d signals.WorkspaceCheckpointData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			require.Empty(t, d.Error, "turn %d's checkpoint", ev.TurnID)
			require.Equal(t, ev.TurnID, d.Turn)
			checkpoints = append(checkpoints, d)
		case signals.EventWorkspaceRestored:
			var d signals.WorkspaceRestoredData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			restored = append(restored, restoredIn{d, ev.TurnID})
		}
	}
	return checkpoints, restored
}

// commitOf is the commit ref names in the git repository dir.
func commitOf(t *testing.T, dir, ref string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ref))
	if err != nil {
		// Packed refs.
		packed, perr := os.ReadFile(filepath.Join(dir, "packed-refs"))
		require.NoError(t, perr, "ref %s in %s", ref, dir)
		for _, line := range strings.Split(string(packed), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[1] == ref {
				return f[0]
			}
		}
		t.Fatalf("no ref %s in %s", ref, dir)
	}
	return strings.TrimSpace(string(b))
}

// A checkpoint that cannot be stored never fails the turn: the turn ends as the agent ended
// it, and workspace.checkpoint carries the commit and the error, so every client sees it.
func TestWorkspaceCheckpointFailureDoesNotFailTheTurn(t *testing.T) {
	t.Parallel()
	queue := "tacp-checkpoint-fail-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	unreachable := "file://" + filepath.Join(t.TempDir(), "no-such-store.git")
	first := startWorkerProcess(t, queue, "TACP_E2E_DATA="+t.TempDir(), "TACP_E2E_CHECKPOINT_STORE="+unreachable)

	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	_, err := qc.Prompt(ctxFor(t, time.Minute), cfg, signals.PromptRequest{Text: "/sh echo x > x.txt", ClientMessageID: "turn-1"})
	require.NoError(t, err)
	evs := turnEnd(t, id, 1)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind, data)
	var cp *signals.WorkspaceCheckpointData
	for _, ev := range evs {
		if ev.Kind == signals.EventWorkspaceCheckpoint {
			cp = &signals.WorkspaceCheckpointData{}
			require.NoError(t, json.Unmarshal(ev.Data, cp))
		}
	}
	require.NotNil(t, cp, "workspace.checkpoint journaled")
	require.NotEmpty(t, cp.ID, "the checkpoint was taken on the worker")
	require.Contains(t, cp.Error, "no-such-store.git", "the push's failure is told")
	require.Equal(t, 1, cp.FilesChanged)

	// The next turn lands where the workspace is missing and the store is out of reach: the
	// worker's -workspace.missing applies (fail), and workspace.missing says why.
	startWorkerProcess(t, queue, "TACP_E2E_DATA="+t.TempDir(), "TACP_E2E_CHECKPOINT_STORE="+unreachable)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	_, err = qc.Prompt(ctxFor(t, time.Minute), cfg, signals.PromptRequest{Text: "/sh cat x.txt", ClientMessageID: "turn-2"})
	require.NoError(t, err)
	evs = turnEnd(t, id, 2)
	kind, data = terminalData(t, evs)
	require.Equal(t, signals.EventTurnFailed, kind, data)
	var missing *signals.WorkspaceMissingData
	for _, ev := range evs {
		if ev.Kind == signals.EventWorkspaceMissing {
			missing = &signals.WorkspaceMissingData{}
			require.NoError(t, json.Unmarshal(ev.Data, missing))
		}
	}
	require.NotNil(t, missing, "workspace.missing journaled")
	require.Contains(t, missing.RestoreError, "no-such-store.git")
}

// starter delete --with-workspace removes the session's checkpoints with its workspace: the
// store keeps no ref of the session.
func TestDeleteWithWorkspaceRemovesItsCheckpoints(t *testing.T) {
	t.Parallel()
	queue := "tacp-checkpoint-delete-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	store := filepath.Join(t.TempDir(), "store.git")
	startWorkerProcess(t, queue, "TACP_E2E_DATA="+t.TempDir(), "TACP_E2E_CHECKPOINT_STORE="+store)
	id := session(t)
	_, err := qc.Prompt(ctxFor(t, time.Minute), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "/sh echo x > x.txt", ClientMessageID: "turn-1"})
	require.NoError(t, err)
	turnEnd(t, id, 1)
	require.NotEmpty(t, sessionRefs(t, store, id), "turn 1's checkpoint is in the store")

	out, errOut, code := starter(t, "delete", "--task-queue", queue, "--session", id, "--with-workspace")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "removed  the workspace checkpoints")
	require.Empty(t, sessionRefs(t, store, id))
}

// sessionRefs lists the refs of session id in the git repository dir.
func sessionRefs(t *testing.T, dir, id string) string {
	t.Helper()
	out, err := exec.Command("git", "--git-dir="+dir, "for-each-ref", "refs/tacp/"+id+"/").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// A worker that comes back with its disk finds the workspace of a session whose later turns
// ran elsewhere: the files there are stale. The turn restores the store's last checkpoint
// over them (a deletion included) before the agent runs.
func TestAStaleWorkspaceCatchesUpWithTheStore(t *testing.T) {
	t.Parallel()
	queue := "tacp-checkpoint-stale-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	store := filepath.Join(t.TempDir(), "store.git")
	dataA, dataB := t.TempDir(), t.TempDir()
	env := func(data string) []string {
		return []string{"TACP_E2E_DATA=" + data, "TACP_E2E_CHECKPOINT_STORE=" + store}
	}
	kill := func(p *os.Process) {
		require.NoError(t, p.Signal(syscall.SIGKILL))
		_, _ = p.Wait()
	}
	a := startWorkerProcess(t, queue, env(dataA)...)
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	ctx := ctxFor(t, 3*time.Minute)
	say := func(turn int64, text string) []signals.Event {
		_, err := qc.Prompt(ctx, cfg, signals.PromptRequest{Text: text, ClientMessageID: fmt.Sprintf("turn-%d", turn)})
		require.NoError(t, err)
		evs := turnEnd(t, id, turn)
		kind, data := terminalData(t, evs)
		require.Equal(t, signals.EventTurnEnded, kind, data)
		return evs
	}
	say(1, "/sh echo one > a.txt; echo old > old.txt")

	b := startWorkerProcess(t, queue, env(dataB)...)
	kill(a.Process)
	say(2, "/sh echo two > a.txt; rm old.txt")

	startWorkerProcess(t, queue, env(dataA)...) // worker A again, its disk as it left it
	kill(b.Process)
	evs := say(3, "/sh cat a.txt; ls")
	require.Equal(t, "sh: exit 0: two a.txt", strings.Join(agentTexts(t, evs, 3), ""))
	var restored []signals.WorkspaceRestoredData
	for _, ev := range evs {
		if ev.Kind == signals.EventWorkspaceRestored {
			var d signals.WorkspaceRestoredData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			restored = append(restored, d)
		}
	}
	require.Len(t, restored, 2, "turn 2 on B and turn 3 on A each restored")
	require.Equal(t, int64(2), restored[1].Turn)
}

// A fork starts with its origin's files as they were before the fork point: turn 1 wrote
// kept.txt and gone.txt, turn 2 deleted one and wrote another with a shell command; a fork
// before turn 2 reads turn 1's tree, and its first checkpoint counts only its own change.
func TestAForkStartsWithTheFilesOfItsForkPoint(t *testing.T) {
	t.Parallel()
	queue := "tacp-forkfiles-" + signals.NewID()[:8]
	data := t.TempDir()
	extraWorker(t, tc, tacpworker.Options{TaskQueue: queue, DataDir: data, CheckpointStore: checkpoint.DefaultStoreURL(data)})
	qc := tacpclient.NewClient(tc, queue)
	ctx := ctxFor(t, 120*time.Second)

	origin := session(t)
	cfg := signals.SessionConfig{SessionID: origin, Policy: signals.PolicyAllowAll}
	for i, text := range []string{"/sh printf one > kept.txt; printf bye > gone.txt", "/sh rm gone.txt; printf two > later.txt"} {
		res, err := qc.Prompt(ctx, cfg, signals.PromptRequest{Text: text, ClientMessageID: fmt.Sprintf("origin-%d", i)})
		require.NoError(t, err)
		endedWith(t, origin, res.TurnID, "end_turn")
	}

	fork := origin + "-fork"
	fcfg, err := qc.Fork(ctx, origin, signals.ForkRequest{SessionID: fork, BeforeTurn: 2})
	require.NoError(t, err)
	fcfg.Policy = signals.PolicyAllowAll
	res, err := qc.Prompt(ctx, fcfg, signals.PromptRequest{Text: "/sh ls; printf ' more' >> kept.txt", ClientMessageID: "fork-1"})
	require.NoError(t, err)
	evs := endedWith(t, fork, res.TurnID, "end_turn")
	require.Equal(t, "sh: exit 0: gone.txt kept.txt", strings.TrimSpace(strings.ReplaceAll(strings.Join(agentTexts(t, evs, 1), ""), "\n", " ")))

	var restored []signals.WorkspaceRestoredData
	var cps []signals.WorkspaceCheckpointData
	for _, ev := range evs {
		switch ev.Kind {
		case signals.EventWorkspaceRestored:
			var d signals.WorkspaceRestoredData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			restored = append(restored, d)
		case signals.EventWorkspaceCheckpoint:
			var d signals.WorkspaceCheckpointData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			cps = append(cps, d)
		}
	}
	require.Len(t, restored, 1, "workspace.restored names the origin's checkpoint")
	require.Equal(t, origin, restored[0].Session)
	require.Equal(t, int64(1), restored[0].Turn)
	require.Equal(t, commitOf(t, checkpoint.DefaultStoreURL(data), checkpoint.TurnRef(origin, 1)), restored[0].From)
	require.Len(t, cps, 1)
	require.Equal(t, 1, cps[0].FilesChanged, "the fork's first checkpoint counts its own change only")

	// starter rewind --to-turn 1 is the same fork, by the CLI: turn 1's conversation and files.
	rewound := origin + "-rewound"
	cmd := starterCmd(ctx, "rewind", "--session", origin, "--to-turn", "1", "--new", rewound)
	cmd.Env = append(cmd.Env, "TACP_TASK_QUEUE="+queue)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "rewound "+origin+" to the end of turn 1 as "+rewound)
	res, err = qc.Prompt(ctx, signals.SessionConfig{SessionID: rewound, Policy: signals.PolicyAllowAll}, signals.PromptRequest{Text: "/sh ls", ClientMessageID: "rewound-1"})
	require.NoError(t, err)
	evs = endedWith(t, rewound, res.TurnID, "end_turn")
	require.Equal(t, "sh: exit 0: gone.txt kept.txt", strings.TrimSpace(strings.ReplaceAll(strings.Join(agentTexts(t, evs, 1), ""), "\n", " ")))

	// An ACP client rewinds the same way: session/fork before turn 2, in a folder of its own
	// (_meta.tacp.own_workspace), has turn 1's files, and the editor's folder, which holds
	// files of its own, stays as it is; a bad value is refused.
	p := startACP(t, "--task-queue", queue)
	editor := projectDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(editor, "mine.txt"), []byte("mine"), 0o644))
	fres, err := p.conn.UnstableForkSession(ctx, acp.UnstableForkSessionRequest{
		SessionId: acp.SessionId(origin), Cwd: editor, Meta: map[string]any{"tacp": map[string]any{"before_turn": 2, "own_workspace": true}},
	})
	require.NoError(t, err)
	_, err = p.conn.Prompt(ctx, acp.PromptRequest{SessionId: fres.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("/sh ls")}})
	require.NoError(t, err)
	evs = endedWith(t, string(fres.SessionId), 1, "end_turn")
	require.Equal(t, "sh: exit 0: gone.txt kept.txt", strings.TrimSpace(strings.ReplaceAll(strings.Join(agentTexts(t, evs, 1), ""), "\n", " ")))
	entries, err := os.ReadDir(editor)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the editor's folder holds only its own file")
	_, err = p.conn.UnstableForkSession(ctx, acp.UnstableForkSessionRequest{
		SessionId: acp.SessionId(origin), Cwd: editorCwd(), Meta: map[string]any{"tacp": map[string]any{"own_workspace": "yes"}},
	})
	require.ErrorContains(t, err, "own_workspace")

	cmd = starterCmd(ctx, "rewind", "--session", origin, "--to-turn", "3")
	cmd.Env = append(cmd.Env, "TACP_TASK_QUEUE="+queue)
	out, err = cmd.CombinedOutput()
	require.Error(t, err, "a turn past the last is refused")
	require.Contains(t, string(out), "has 2 turns")
}

// The store's retention: starter checkpoints lists the sessions a store holds, and prune
// removes those of sessions Temporal no longer runs (their last checkpoint older than
// --older-than), never a running one's.
func TestCheckpointsPruneKeepsRunningSessions(t *testing.T) {
	t.Parallel()
	store := filepath.Join(t.TempDir(), "store.git")
	_, qc := extraWorker(t, tc, tacpworker.Options{DataDir: t.TempDir(), CheckpointStore: store})
	closed, running := session(t), session(t)
	for _, id := range []string{closed, running} {
		_, err := qc.Prompt(ctxFor(t, time.Minute), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "/sh echo x > x.txt", ClientMessageID: "turn-1"})
		require.NoError(t, err)
		turnEnd(t, id, 1)
	}
	_, err := qc.Close(ctxFor(t, time.Minute), closed, signals.CloseRequest{Reason: "done"})
	require.NoError(t, err)

	// Visibility shows the close a moment later: until then the session counts as running
	// and keeps its checkpoints.
	var (
		out, errOut string
		code        int
	)
	require.Eventually(t, func() bool {
		out, errOut, code = starter(t, "checkpoints", "--checkpoint-store", store)
		return code == 0 && regexp.MustCompile(closed+` +last checkpoint .*  closed\n`).MatchString(out)
	}, time.Minute, 200*time.Millisecond, "the closed session is listed as closed: %s", out)
	require.Regexp(t, running+` +last checkpoint .*  running\n`, out)

	require.Eventually(t, func() bool {
		out, _, _ = starter(t, "checkpoints", "prune", "--older-than", "0s", "--dry-run", "--checkpoint-store", store)
		return strings.Contains(out, closed) && regexp.MustCompile(closed+` .*would prune`).MatchString(out)
	}, time.Minute, 200*time.Millisecond, "the closed session is pruned: %s", out)
	require.Regexp(t, running+` .*  running\n`, out)
	require.NotEmpty(t, sessionRefs(t, store, closed), "a dry run removes nothing")

	out, errOut, code = starter(t, "checkpoints", "prune", "--older-than", "0s", "--checkpoint-store", store, "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"state":"pruned"`)
	require.Empty(t, sessionRefs(t, store, closed), "the closed session's checkpoints are gone")
	require.NotEmpty(t, sessionRefs(t, store, running), "the running session's stay")

	_, errOut, code = starter(t, "checkpoints", "prune", "now", "--checkpoint-store", store)
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "want no argument or prune")
}

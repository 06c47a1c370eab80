package e2e

// Deleting a session (contract §3 "Deleting", issue 27): `starter delete` closes the session
// and the worker that holds its agent removes the agent's per-session state (its
// conversations, in the sandbox's per-session folder) and, asked to, the workspace tacp
// created for it; a workspace tacp did not create is kept, and the journal says what went.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

func TestDeleteRemovesWhatTacpKeepsAndSaysSo(t *testing.T) {
	t.Parallel()
	sw := newSandboxWorker(t)
	id := session(t)
	require.Contains(t, sw.sh(t, id, "echo kept > notes && echo written"), "written")
	state := filepath.Join(sw.data, "sandbox", id)
	require.DirExists(t, state, "the agent's per-session state")
	require.FileExists(t, filepath.Join(sw.workspace(id), "notes"))

	// A session in a workspace tacp did not create (an operator's folder): deleted, the
	// folder stays.
	shared := filepath.Join(sw.data, "workspaces", "shared")
	require.NoError(t, os.MkdirAll(shared, 0o755))
	other := session(t) + "-shared"
	res, err := sw.qc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: other, Workspace: shared}, signals.PromptRequest{Text: "hello", ClientMessageID: signals.NewID()})
	require.NoError(t, err)
	endedWith(t, other, res.TurnID, "end_turn")

	out, errOut, code := starter(t, "delete", "--task-queue", sw.qc.TaskQueue, "--session", id, "--with-workspace")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "removed  the agent's per-session state")
	require.Contains(t, out, "removed  the workspace")
	require.NoDirExists(t, state)
	require.NoDirExists(t, sw.workspace(id))
	var deleted signals.SessionDeletedData
	for _, ev := range allEvents(t, id) {
		if ev.Kind == signals.EventSessionDeleted {
			require.NoError(t, json.Unmarshal(ev.Data, &deleted))
		}
	}
	require.NotEmpty(t, deleted.Host, "the worker that held the agent did it")
	require.Len(t, deleted.Removed, 2)

	out, errOut, code = starter(t, "delete", "--task-queue", sw.qc.TaskQueue, "--session", other, "--with-workspace", "--history")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "kept     the workspace "+shared)
	require.Contains(t, out, "removed  the workflow history")
	require.DirExists(t, shared, "the folder tacp did not create stays")
	require.Eventually(t, func() bool { // the server deletes it in the background
		_, err := sw.qc.Status(ctxFor(t, 10*time.Second), other)
		return err != nil
	}, time.Minute, 100*time.Millisecond, "its history is gone")

	// Bad input changes nothing.
	_, errOut, code = starter(t, "delete", "--task-queue", sw.qc.TaskQueue, "--session", "no-such-"+signals.NewID())
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "unknown_session")
}

package activities

// Workspace checkpoints at turn boundaries (package checkpoint): the runner checkpoints the
// workspace as the agent left it when a turn ends, and restores a workspace missing on this
// worker from the session's last checkpoint before the agent starts. Neither ever fails a
// turn: a checkpoint that fails is journaled with its error, a restore that fails falls back
// to the worker's -workspace.missing.

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/tacp-dev/tacp/checkpoint"
	"github.com/tacp-dev/tacp/signals"
)

// checkpointTimeout bounds a checkpoint or a restore, its push or fetch included.
const checkpointTimeout = 2 * time.Minute

// maxSkippedReported bounds the skipped paths one workspace.checkpoint names.
const maxSkippedReported = 50

// checkpoint checkpoints the turn's workspace into the result, which carries it to the
// session (workspace.checkpoint). It runs after a cancel too: a cancelled turn's files are
// a turn boundary like any other.
func (t *turnRun) checkpoint() {
	cp := t.r.Checkpoints
	if cp == nil || t.dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.sendCtx), checkpointTimeout)
	defer cancel()
	start := time.Now()
	res, err := cp.Checkpoint(ctx, t.in.SessionID, t.dir, t.in.TurnID, t.in.Text)
	data := &signals.WorkspaceCheckpointData{
		Turn: t.in.TurnID, ID: res.ID, FilesChanged: res.FilesChanged, Insertions: res.Insertions,
		Deletions: res.Deletions, Bytes: res.Bytes, Skipped: res.Skipped, Host: t.r.Host.Queue,
	}
	if len(data.Skipped) > maxSkippedReported {
		data.Skipped = data.Skipped[:maxSkippedReported]
	}
	if err != nil {
		data.Error = err.Error()
		t.log.Warn("workspace checkpoint failed", "id", res.ID, "error", err)
	} else {
		t.log.Info("workspace checkpoint", "id", res.ID, "files_changed", res.FilesChanged, "bytes", res.Bytes,
			"skipped", len(res.Skipped), "took", time.Since(start))
	}
	t.res.Checkpoint = data
}

// restore puts the session's last checkpoint into its workspace dir, missing on this
// worker, and tells the session (workspace.restored). false: checkpoints are off, the store
// holds none for the session, or the restore failed (err): the worker's -workspace.missing
// applies.
func (t *turnRun) restore(ctx context.Context, dir string) (bool, error) {
	r := t.r
	if r.Checkpoints == nil {
		return false, nil
	}
	rctx, cancel := context.WithTimeout(ctx, checkpointTimeout)
	defer cancel()
	got, err := r.Checkpoints.Restore(rctx, t.in.SessionID, dir)
	if errors.Is(err, checkpoint.ErrNone) {
		return false, nil
	}
	if err != nil {
		t.log.Warn("workspace restore failed", "path", dir, "error", err)
		return false, err
	}
	t.log.Info("restored the session's workspace from its last checkpoint", "path", dir, "id", got.ID, "turn", got.Turn)
	if serr := r.signal(context.WithoutCancel(ctx), t.in.SessionWorkflowID, signals.SignalTurnStarted, signals.TurnStartedSignal{
		TurnID: t.in.TurnID, Attempt: t.attempt, HostQueue: r.Host.Queue,
		WorkspaceRestored: &signals.WorkspaceRestoredData{From: got.ID, Turn: got.Turn, Path: dir, Host: r.Host.Queue},
	}); serr != nil {
		t.log.Warn("turn_started failed", "error", serr)
	}
	return true, nil
}

// forkFiles starts a fork's empty workspace with its origin's files as they were before the
// fork point (checkpoint.Shadows.RestoreFrom) and tells the session (workspace.restored
// naming the origin). A workspace that holds files (one the person named, or an earlier
// attempt's) keeps them; with no checkpoint of the origin, the fork starts empty as before.
// A failure is logged and the turn goes on.
func (t *turnRun) forkFiles(ctx context.Context, dir string) {
	cp := t.r.Checkpoints
	if cp == nil || !emptyWorkspace(dir) {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, checkpointTimeout)
	defer cancel()
	origin := t.in.ForkOf
	got, err := cp.RestoreFrom(rctx, t.in.SessionID, origin.SessionID, origin.BeforeTurn, dir)
	if errors.Is(err, checkpoint.ErrNone) {
		return
	}
	if err != nil {
		t.log.Warn("a fork's workspace was not given its origin's files", "origin", origin.SessionID, "error", err)
		return
	}
	t.log.Info("started the fork's workspace from its origin's checkpoint", "origin", origin.SessionID, "id", got.ID, "turn", got.Turn)
	if serr := t.r.signal(context.WithoutCancel(ctx), t.in.SessionWorkflowID, signals.SignalTurnStarted, signals.TurnStartedSignal{
		TurnID: t.in.TurnID, Attempt: t.attempt, HostQueue: t.r.Host.Queue,
		WorkspaceRestored: &signals.WorkspaceRestoredData{From: got.ID, Turn: got.Turn, Session: origin.SessionID, Path: dir, Host: t.r.Host.Queue},
	}); serr != nil {
		t.log.Warn("turn_started failed", "error", serr)
	}
}

// emptyWorkspace reports whether dir holds nothing but tacp's marker.
func emptyWorkspace(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.Name() != WorkspaceMarker {
			return false
		}
	}
	return true
}

// catchUp restores the session's last checkpoint into its workspace dir when the store holds
// a later one than this worker took: the session's last turn ran on another worker, and the
// files here are those of an earlier turn. A turn whose last turn ran here skips the check
// (prepare): its files are the latest. A failed check or restore is logged and the
// turn goes on with the files here.
func (t *turnRun) catchUp(ctx context.Context, dir string) {
	cp := t.r.Checkpoints
	if cp == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, checkpointTimeout)
	defer cancel()
	behind, err := cp.Behind(cctx, t.in.SessionID, dir)
	if err != nil {
		t.log.Warn("workspace checkpoint check failed: the turn goes on with the files here", "path", dir, "error", err)
		return
	}
	if !behind {
		return
	}
	if _, err := t.restore(ctx, dir); err != nil {
		t.log.Warn("the workspace here is older than the session's last checkpoint and was not restored", "path", dir, "error", err)
	}
}

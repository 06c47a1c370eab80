package activities

// Deleting a session's data on the worker that holds it (contract §3 "Deleting"): after a
// deleting close stopped the session's agent, DeleteSessionData removes the session's
// sandbox folders (its agent's per-session state — its conversations — and temp) and, when
// asked, its workspace. A workspace goes only when it is the session's own: strictly inside a
// root, and marked by tacp's WorkspaceMarker as created for this session; another workspace
// (a shared one a client named, one tacp did not create) is kept, and the result says why.
// The workspace's checkpoints (package checkpoint) go with the workspace, whichever it is.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tacp-dev/tacp/signals"
)

// DeleteSessionData removes what req names of session req.SessionID on this worker.
func (r *Runner) DeleteSessionData(ctx context.Context, req signals.DeleteSessionDataRequest) (signals.DeleteSessionDataResult, error) {
	var res signals.DeleteSessionDataResult
	if err := signals.ValidateSessionID(req.SessionID); err != nil {
		return res, err
	}
	if r.Sandbox != nil {
		dir := filepath.Join(r.Sandbox.Dir, req.SessionID)
		if _, err := os.Stat(dir); err == nil {
			if err := os.RemoveAll(dir); err != nil {
				return res, fmt.Errorf("the session's sandbox folders: %w", err)
			}
			res.Removed = append(res.Removed, "the agent's per-session state and temp ("+dir+")")
		}
	} else {
		res.Kept = append(res.Kept, "the agent's own conversation store (its profile is not sandboxed: the store is the agent's, shared by its sessions)")
	}
	if !req.Workspace {
		return res, nil
	}
	if r.Trust == nil || r.Trust.Roots == nil {
		return res, fmt.Errorf("this worker has no workspace roots")
	}
	dir, err := r.Trust.Roots.Resolve(req.SessionID, req.WorkspaceName)
	if err != nil {
		return res, err
	}
	marker, err := os.ReadFile(filepath.Join(dir, WorkspaceMarker))
	switch {
	case os.IsNotExist(err) && dirMissing(dir):
		res.Kept = append(res.Kept, "the workspace "+dir+": not on this worker")
	case err != nil || strings.TrimSpace(string(marker)) != req.SessionID:
		res.Kept = append(res.Kept, "the workspace "+dir+": tacp did not create it for this session (no "+WorkspaceMarker+" naming it)")
	default:
		if err := os.RemoveAll(dir); err != nil {
			return res, fmt.Errorf("the workspace: %w", err)
		}
		res.Removed = append(res.Removed, "the workspace "+dir)
	}
	if r.Checkpoints != nil {
		// The checkpoints are copies of the workspace: they go with it.
		if err := r.Checkpoints.Delete(ctx, req.SessionID); err != nil {
			return res, fmt.Errorf("the workspace checkpoints: %w", err)
		}
		res.Removed = append(res.Removed, "the workspace checkpoints (their refs in the checkpoint store; the objects go at its next git gc)")
	}
	return res, nil
}

func dirMissing(dir string) bool {
	_, err := os.Stat(dir)
	return os.IsNotExist(err)
}

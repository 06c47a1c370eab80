package activities

// Admission of a turn: its agent profile and workspace through the worker's Trust, and the
// workspace's marker.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tacp-dev/tacp/signals"
)

// WorkspaceMarker is the file tacp writes into a workspace it creates, naming the session:
// a later turn on a worker that finds no such workspace knows it did not follow the session.
const WorkspaceMarker = ".tacp-workspace"

// What a turn does when the session's workspace is missing on its worker.
const (
	MissingWorkspaceFail  = "fail"
	MissingWorkspaceEmpty = "empty"
)

// admit resolves the turn's agent profile and workspace through the worker's Trust, and
// creates the workspace when it does not exist yet (inside its root, resolved first).
//
// missing is set when the workspace did not exist on this worker although the session had
// turns before (it holds an agent session): its files are on the machine that ran them.
// tacp writes WorkspaceMarker, naming the session, into every workspace it creates.
func (r *Runner) admit(in signals.RunTurnInput) (profile Profile, dir string, missing bool, err error) {
	if r.Trust == nil || r.Trust.Profiles == nil || r.Trust.Roots == nil {
		return Profile{}, "", false, errors.New("this worker has no agent profiles or workspace roots configured")
	}
	if in.Agent != "" {
		if err := signals.ValidateProfileName(in.Agent); err != nil {
			return Profile{}, "", false, err
		}
	}
	profile, err = r.Trust.Profiles.Resolve(in.Agent)
	if err != nil {
		return Profile{}, "", false, err
	}
	dir, err = r.Trust.Roots.Resolve(in.SessionID, in.Workspace)
	if err != nil {
		return Profile{}, "", false, err
	}
	_, statErr := os.Stat(dir)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Profile{}, "", false, fmt.Errorf("workspace: %w", err)
	}
	// Created through a path checked a moment ago: check what it became.
	if real, err := filepath.EvalSymlinks(dir); err != nil || !r.Trust.Roots.Contains(real) {
		return Profile{}, "", false, fmt.Errorf("workspace %q moved outside the workspace roots while it was created", in.Workspace)
	}
	if created {
		if err := os.WriteFile(filepath.Join(dir, WorkspaceMarker), []byte(in.SessionID+"\n"), 0o644); err != nil {
			r.Logger.Warn("workspace marker not written", "session", in.SessionID, "error", err)
		}
	}
	return profile, dir, created && in.AgentSessionID != "", nil
}

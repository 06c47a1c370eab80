package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tacp-dev/tacp/signals"
)

// An editor is told of a restored workspace and of a failed checkpoint; a checkpoint that
// went well, as every turn has one, says nothing.
func TestNoticeOfWorkspaceCheckpoints(t *testing.T) {
	ev := func(kind string, data any) signals.Event {
		b, _ := json.Marshal(data)
		return signals.Event{Kind: kind, TurnID: 2, Data: b}
	}
	text, ok := noticeText(ev(signals.EventWorkspaceRestored, signals.WorkspaceRestoredData{From: "abc", Turn: 1}))
	if !ok || !strings.Contains(text, "restored from the checkpoint of turn 1") {
		t.Errorf("workspace.restored: %q, %v", text, ok)
	}
	if text, ok := noticeText(ev(signals.EventWorkspaceCheckpoint, signals.WorkspaceCheckpointData{Turn: 2, ID: "def"})); ok {
		t.Errorf("a checkpoint that went well is told: %q", text)
	}
	text, ok = noticeText(ev(signals.EventWorkspaceCheckpoint, signals.WorkspaceCheckpointData{Turn: 2, Error: "push: denied"}))
	if !ok || !strings.Contains(text, "push: denied") {
		t.Errorf("a failed checkpoint: %q, %v", text, ok)
	}
}

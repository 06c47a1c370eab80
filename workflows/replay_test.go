package workflows

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
)

// TestReplayRecordedHistories replays every recorded history (real runs on the in-process
// server, see e2e/record_test.go) against today's workflow code: a change that would break a
// running session is a non-determinism error here, in CI, instead of in production.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(SessionWorkflow, workflow.RegisterOptions{Name: signals.SessionWorkflowType})
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(quiet{}, f))
		})
	}
}

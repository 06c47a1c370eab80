package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/tacp-dev/tacp/signals"
)

// TestRecordHistoriesCarriedReports records the session of carried reports (issue 28): a
// short turn whose turn_started rides on its first batch and whose last batch rides on its
// turn_finished, with one search-attribute upsert (its end); a quiet turn whose turn_started
// goes alone after the hold and whose runner beats, shown running at the beat; a permission
// asked (turn_started goes out before it) and answered (-run TestRecordHistories records it
// too).
func TestRecordHistoriesCarriedReports(t *testing.T) {
	dir, stamp := recordingTo(t)

	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	prompt(t, cfg, "/echo\na short answer")
	turnEnd(t, id, 1)
	prompt(t, cfg, "/sh sleep 4")
	turnEnd(t, id, 2)
	prompt(t, cfg, "/permission edit")
	req := permissionRequestedIn(t, id, 3)
	_, err := sc.PermissionRespond(ctxFor(t, 10*time.Second), id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: "allow"})
	require.NoError(t, err)
	turnEnd(t, id, 3)

	// The shape recorded is the new one: no turn_started of its own for the short turn, its
	// end one signal, and a short turn's single upsert.
	var started, upserts int
	iter := tc.GetWorkflowHistory(ctxFor(t, 30*time.Second), signals.SessionWorkflowID(id), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			if ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == signals.SignalTurnStarted {
				started++
			}
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			upserts++
		}
	}
	t.Logf("turn_started signals %d, upserts %d", started, upserts)
	require.Less(t, started, 3, "the short turn's turn_started rode on a batch")
	closeAndRecord(t, sc, id, signals.CloseRequest{Reason: "recorded"}, filepath.Join(dir, fmt.Sprintf("session-carried-reports-%s.json", stamp)))
}

package gateway

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/tacpclient"
)

func TestSessionInfoShowsTheSessionsOwnCwdAndLastActivity(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name, workspace, filter string
		last                    time.Time
		listed                  bool
		updated                 string
	}{
		{"its workspace, dated by its last activity", "/work/a", "", start.Add(time.Hour), true, "2026-12-01T11:00:00Z"},
		{"no activity yet: its start", "/work/a", "", time.Time{}, true, "2026-12-01T10:00:00Z"},
		{"the filter's directory", "/work/a/", "/work/a", start, true, "2026-12-01T10:00:00Z"},
		{"another directory than the filter's", "/work/a", "/work/b", start, false, ""},
		{"the worker's default workspace", "", "", start, false, ""},
		{"a workspace relative to the worker's roots", "proj", "", start, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			si, ok := sessionInfo(tacpclient.SessionInfo{SessionID: "s", Workspace: tt.workspace, StartedAt: start, LastActivity: tt.last}, tt.filter)
			require.Equal(t, tt.listed, ok)
			if ok {
				require.Equal(t, "/work/a", si.Cwd)
				require.Equal(t, tt.updated, *si.UpdatedAt)
			}
		})
	}
}

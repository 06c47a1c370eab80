package e2e

// session/list through the ACP face: every session with the absolute cwd it was started
// in, the cwd filter applied, paging by nextCursor over more sessions than one page, and
// updatedAt from the session's last activity.

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

func TestSessionListPagesFiltersByCwdAndDatesByLastActivity(t *testing.T) {
	t.Parallel()
	projA, projB := projectDir(t), projectDir(t)
	const inA = 115 // more than one page (100)
	ctx := ctxFor(t, 3*time.Minute)
	ids := make(chan string, inA)
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < inA; i += 6 {
				id := fmt.Sprintf("acp-list-%s-%03d", filepath.Base(projA), i)
				_, err := sc.Start(ctx, signals.SessionConfig{SessionID: id, Workspace: projA}, signals.AttachRequest{})
				if err != nil {
					t.Errorf("start %s: %v", id, err)
				}
				ids <- id
			}
		}()
	}
	wg.Wait()
	close(ids)
	want := map[string]bool{}
	for id := range ids {
		want[id] = true
	}

	// One session in proj-b, with a turn that ends a few seconds after it started.
	p := startACP(t, "--agent", gatewayAgent(), "--workspace", projB)
	inB := p.newSession()
	time.Sleep(1100 * time.Millisecond) // updatedAt has whole seconds
	_, err := p.prompt(inB, "/chunks 2")
	require.NoError(t, err)

	list := func(cwd string) ([]acp.SessionInfo, int) {
		var all []acp.SessionInfo
		var cursor *string
		pages := 0
		for {
			res, err := p.conn.ListSessions(ctx, acp.ListSessionsRequest{Cwd: &cwd, Cursor: cursor})
			require.NoError(t, err)
			pages++
			all = append(all, res.Sessions...)
			if res.NextCursor == nil {
				return all, pages
			}
			cursor = res.NextCursor
		}
	}
	gotA, pages := list(projA)
	require.Greater(t, pages, 1, "more sessions than one page: a nextCursor")
	seen := map[string]bool{}
	for _, s := range gotA {
		require.Equal(t, projA, s.Cwd, "the filter keeps proj-a's sessions only")
		require.False(t, seen[string(s.SessionId)], "%s listed twice", s.SessionId)
		seen[string(s.SessionId)] = true
	}
	require.Equal(t, want, seen, "every one of proj-a's %d sessions, through the cursor", inA)

	gotB, _ := list(projB)
	require.Len(t, gotB, 1)
	require.Equal(t, inB, string(gotB[0].SessionId))
	require.Equal(t, projB, gotB[0].Cwd)
	// updatedAt is the last activity (the turn's end), not the start.
	var info tacpclient.SessionInfo
	require.Eventually(t, func() bool {
		infos, err := sc.List(ctx, 1000)
		require.NoError(t, err)
		for _, s := range infos {
			if s.SessionID == inB {
				info = s
			}
		}
		return info.LastActivity.Sub(info.StartedAt) > time.Second
	}, 30*time.Second, 100*time.Millisecond)
	gotB, _ = list(projB)
	require.NotNil(t, gotB[0].UpdatedAt)
	require.Equal(t, info.LastActivity.UTC().Format(time.RFC3339), *gotB[0].UpdatedAt)
	require.NotEqual(t, info.StartedAt.UTC().Format(time.RFC3339), *gotB[0].UpdatedAt)

	// Without a filter every listed session has an absolute cwd.
	res, err := p.conn.ListSessions(ctx, acp.ListSessionsRequest{})
	require.NoError(t, err)
	require.NotEmpty(t, res.Sessions)
	for _, s := range res.Sessions {
		require.True(t, filepath.IsAbs(s.Cwd), "%s: cwd %q", s.SessionId, s.Cwd)
	}
}

package gateway

// session/list: the sessions a connection may see, read from visibility a page at a time,
// each shown with its workspace as cwd and its last activity.

import (
	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/tacpclient"
)

func (c *conn) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	var token []byte
	if p.Cursor != nil && *p.Cursor != "" {
		var err error
		if token, err = base64.RawURLEncoding.DecodeString(*p.Cursor); err != nil {
			return acp.ListSessionsResponse{}, invalidParams("cursor %q is not one this agent gave", *p.Cursor)
		}
	}
	filter := ""
	if p.Cwd != nil && *p.Cwd != "" {
		if !filepath.IsAbs(*p.Cwd) {
			return acp.ListSessionsResponse{}, invalidParams("cwd %q is not an absolute path", *p.Cwd)
		}
		filter = filepath.Clean(*p.Cwd)
	}
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	out := acp.ListSessionsResponse{Sessions: []acp.SessionInfo{}}
	// Visibility pages until one has a session to show (a cwd filter may leave pages
	// empty), at most listPages of them per request: the cursor carries on from there.
	for range listPages {
		infos, next, err := c.client().ListPage(cctx, c.visibleWhere(), listPageSize, token)
		if err != nil {
			return acp.ListSessionsResponse{}, rpcErr(err)
		}
		for _, s := range infos {
			if si, ok := sessionInfo(s, filter); ok && c.listable(s) {
				out.Sessions = append(out.Sessions, si)
			}
		}
		token = next
		if len(token) == 0 || len(out.Sessions) > 0 {
			break
		}
	}
	if len(token) > 0 {
		cursor := base64.RawURLEncoding.EncodeToString(token)
		out.NextCursor = &cursor
	}
	return out, nil
}

// session/list reads visibility listPageSize sessions at a time, at most listPages pages
// per request.
const (
	listPageSize = 100
	listPages    = 10
)

// sessionInfo is how session/list shows s: its cwd is the absolute workspace it was
// started with (a session without one — the worker's default, a path relative to the
// worker's roots — has no directory a client can name, and is not listed), updatedAt its
// last activity. filter, when set, keeps only the sessions whose cwd it is.
func sessionInfo(s tacpclient.SessionInfo, filter string) (acp.SessionInfo, bool) {
	if !filepath.IsAbs(s.Workspace) {
		return acp.SessionInfo{}, false
	}
	cwd := filepath.Clean(s.Workspace)
	if filter != "" && cwd != filter {
		return acp.SessionInfo{}, false
	}
	title := fmt.Sprintf("%s (%s, turn %d)", s.SessionID, s.State, s.Turn)
	at := s.LastActivity
	if at.IsZero() {
		at = s.StartedAt
	}
	updated := at.UTC().Format(time.RFC3339)
	return acp.SessionInfo{
		SessionId: acp.SessionId(s.SessionID),
		Cwd:       cwd,
		Title:     &title,
		UpdatedAt: &updated,
		Meta:      map[string]any{"tacp": s},
	}, true
}

package tacpclient

// Listing sessions from visibility: one row per session, read from its workflow's search
// attributes and memo, and the decoders of those attributes.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tacp-dev/tacp/signals"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
)

// SessionInfo is one session as visibility lists it.
type SessionInfo struct {
	SessionID string `json:"session_id"`
	State     string `json:"state"`
	Turn      int64  `json:"turn"`
	Agent     string `json:"agent"`
	Running   bool   `json:"running"`
	// AwaitingApproval: a permission request waits for a person.
	AwaitingApproval bool      `json:"awaiting_approval"`
	StartedAt        time.Time `json:"started_at"`
	// LastOutcome is how the last turn ended (a stop reason, or "failed"); LastActivity when
	// the session's state last changed (zero for sessions whose worker predates them).
	LastOutcome  string    `json:"last_outcome,omitempty"`
	LastActivity time.Time `json:"last_activity,omitempty"`
	// Ended says how a session that did not close ended ("failed: invalid session config:
	// …", "terminated by an operator: …"); empty for running and closed sessions.
	Ended string `json:"ended,omitempty"`
	// Version is the Worker Deployment version ("<deployment>:<build id>") the session's
	// current run is on, Behavior its versioning behavior (Pinned for tacp's sessions);
	// both empty on an unversioned cluster.
	Version  string `json:"version,omitempty"`
	Behavior string `json:"behavior,omitempty"`
	// Workspace is the workspace the session was started with (its MemoWorkspace): empty
	// for the worker's default, and for sessions started before the memo was kept.
	Workspace string `json:"workspace,omitempty"`
	// Access is the session's owner, sharing rule and shares (empty for a session created
	// by a client that named nobody).
	signals.Access
}

// List lists sessions from visibility, newest first (at most limit; 0 means 100).
func (c *Client) List(ctx context.Context, limit int) ([]SessionInfo, error) {
	return c.ListWhere(ctx, "", limit)
}

// ListAwaitingApproval lists the running sessions where a person is asked to answer a
// permission request (the TacpAwaitingApproval search attribute).
func (c *Client) ListAwaitingApproval(ctx context.Context, limit int) ([]SessionInfo, error) {
	return c.ListWhere(ctx, AwaitingApprovalWhere, limit)
}

// AwaitingApprovalWhere is the visibility query of the running sessions where a person is
// asked to answer a permission request.
const AwaitingApprovalWhere = signals.SearchAttrAwaitingApproval + " = true AND ExecutionStatus = 'Running'"

// ListOnVersion lists the running sessions whose current run is on a Worker Deployment
// version ("<deployment>:<build id>").
func (c *Client) ListOnVersion(ctx context.Context, version string, limit int) ([]SessionInfo, error) {
	if strings.ContainsAny(version, "'\\") {
		return nil, signals.Reject(signals.RejectInvalidRequest, "version %q has a quote", version)
	}
	return c.ListWhere(ctx, fmt.Sprintf("%s = '%s' AND ExecutionStatus = 'Running'", signals.SearchAttrDeploymentVersion, version), limit)
}

// ListWhere lists sessions matching a visibility query (ANDed with the session workflow
// type; empty: all sessions), newest first. A page the server is too busy to read is asked
// again until ctx ends (askWhileBusy): a slow visibility store is late, not an error.
func (c *Client) ListWhere(ctx context.Context, where string, limit int) ([]SessionInfo, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []SessionInfo
	seen := map[string]bool{}
	var token []byte
	for len(out) < limit {
		page, next, err := c.listPage(ctx, where, min(limit, 1000), token, seen)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		token = next
		if len(token) == 0 {
			break
		}
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ListPage lists one page of at most pageSize sessions matching where (as ListWhere),
// newest first, from the page token of the previous page (nil: the first). The token it
// returns reads the next page; nil when there is none.
func (c *Client) ListPage(ctx context.Context, where string, pageSize int, token []byte) ([]SessionInfo, []byte, error) {
	if pageSize <= 0 {
		pageSize = 100
	}
	return c.listPage(ctx, where, min(pageSize, 1000), token, map[string]bool{})
}

func (c *Client) listPage(ctx context.Context, where string, pageSize int, token []byte, seen map[string]bool) ([]SessionInfo, []byte, error) {
	// One row per session: a run that continued as new is not the session's.
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus != 'ContinuedAsNew'", signals.SessionWorkflowType)
	if where != "" {
		query += " AND " + where
	}
	var resp *workflowservice.ListWorkflowExecutionsResponse
	err := askWhileBusy(ctx, func(ctx context.Context) (err error) {
		resp, err = c.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         query,
			PageSize:      int32(pageSize),
			NextPageToken: token,
		})
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list sessions: %w", err)
	}
	var out []SessionInfo
	for _, e := range resp.GetExecutions() {
		info := SessionInfo{
			SessionID: strings.TrimPrefix(e.GetExecution().GetWorkflowId(), "tacp-session-"),
			Running:   e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
			StartedAt: e.GetStartTime().AsTime(),
		}
		if seen[info.SessionID] {
			continue // visibility can lag a continue-as-new: the newest run listed first wins
		}
		seen[info.SessionID] = true
		fields := e.GetSearchAttributes().GetIndexedFields()
		info.LastOutcome = decodeString(fields[signals.SearchAttrLastOutcome])
		info.Workspace = decodeString(e.GetMemo().GetFields()[signals.MemoWorkspace])
		info.Access = accessOf(fields)
		info.LastActivity = decodeTime(fields[signals.SearchAttrLastActivity])
		info.State = decodeString(fields[signals.SearchAttrSessionState])
		info.Agent = decodeString(fields[signals.SearchAttrAgent])
		info.Turn = decodeInt(fields[signals.SearchAttrTurn])
		info.AwaitingApproval = decodeBool(fields[signals.SearchAttrAwaitingApproval])
		info.Version = decodeString(fields[signals.SearchAttrDeploymentVersion])
		info.Behavior = decodeString(fields[signals.SearchAttrVersioningBehavior])
		if vi := e.GetVersioningInfo(); vi != nil {
			if v := vi.GetDeploymentVersion(); v != nil && info.Version == "" {
				info.Version = signals.DeploymentVersion(v.GetDeploymentName(), v.GetBuildId())
			}
			if info.Behavior == "" && vi.GetBehavior() != enumspb.VERSIONING_BEHAVIOR_UNSPECIFIED {
				info.Behavior = behaviorName(vi.GetBehavior())
			}
		}
		if !info.Running {
			info.State = signals.StateClosed
			if e.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
				info.State = endedState(e.GetStatus()) // failed, terminated, …
				// Rare rows: one history read each says why (a refused config, a failed run).
				info.Ended = c.endReason(ctx, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), e.GetStatus())
			}
		}
		out = append(out, info)
	}
	return out, resp.GetNextPageToken(), nil
}

func decodeString(p *commonpb.Payload) string {
	var s string
	if p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &s)
	}
	return s
}

func decodeTime(p *commonpb.Payload) time.Time {
	var t time.Time
	if p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &t)
	}
	return t
}

func decodeBool(p *commonpb.Payload) bool {
	var b bool
	if p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &b)
	}
	return b
}

func decodeInt(p *commonpb.Payload) int64 {
	var n int64
	if p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &n)
	}
	return n
}

// behaviorName is a versioning behavior as the server's search attribute spells it.
func behaviorName(b enumspb.VersioningBehavior) string {
	switch b {
	case enumspb.VERSIONING_BEHAVIOR_PINNED:
		return signals.VersioningBehaviorPinned
	case enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE:
		return signals.VersioningBehaviorAutoUpgrade
	}
	return ""
}

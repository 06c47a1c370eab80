// Package tacpclient is the Go client of tacp sessions over the Temporal SDK's client
// (docs/contract.md §3–5): the typed updates and queries of signals, the Follower every
// viewer follows a session with, the actions a session has cost, the search attributes a
// namespace needs, and the administration of a Worker Deployment's versions. A refusal
// comes back as a *signals.Rejection (signals/rejection).
package tacpclient

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tacp-dev/tacp/signals"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

// Client is a typed client of tacp sessions over a Temporal client. Rejections come back as
// *signals.Rejection (errors.As); other errors are transport or server errors.
type Client struct {
	Temporal  client.Client
	TaskQueue string
	// SafetyPoll is the longest a viewer that follows a session (Follow, Watch) goes without
	// an events query while the session's history wakes nothing (0: DefaultSafetyPoll).
	SafetyPoll time.Duration
	// Confidential keeps prompt text out of a new session's static details (the Temporal
	// UI's user metadata): set it when the client's payloads are encrypted, as the UI renders
	// user metadata, once decoded, through its own server with the text in a URL.
	Confidential bool
}

// NewClient returns a Client that starts sessions on taskQueue (DefaultTaskQueue if empty).
func NewClient(c client.Client, taskQueue string) *Client {
	if taskQueue == "" {
		taskQueue = signals.DefaultTaskQueue
	}
	return &Client{Temporal: c, TaskQueue: taskQueue}
}

// Prompt sends a prompt to session cfg.SessionID, creating the session with cfg when it does
// not exist (Update-with-Start, conflict policy USE_EXISTING). An empty ClientMessageID is
// filled with a new id, which the returned result's turn is then known by.
func (c *Client) Prompt(ctx context.Context, cfg signals.SessionConfig, req signals.PromptRequest) (signals.PromptResult, error) {
	// A config the workflow would refuse is refused here, before it starts (and so uses up)
	// a session id.
	if err := signals.ValidateSessionConfig(cfg); err != nil {
		return signals.PromptResult{}, signals.Reject(signals.RejectInvalidRequest, "%v", err)
	}
	if req.ClientMessageID == "" {
		req.ClientMessageID = signals.NewID()
	}
	// So is a prompt the session would refuse: a new session is not started only to hold
	// the refusal.
	if rej := signals.ValidatePrompt(req); rej != nil {
		return signals.PromptResult{}, rej
	}
	if err := c.admitProfile(ctx, cfg); err != nil {
		return signals.PromptResult{}, err
	}
	release, err := inFlight.acquire(ctx, cfg.SessionID)
	if err != nil {
		return signals.PromptResult{}, err
	}
	defer release()
	var res signals.PromptResult
	if err := c.updateWithStart(ctx, cfg, signals.Updates.Prompt.Name, req, &res); err != nil {
		return res, err
	}
	return res, nil
}

// Start starts session cfg.SessionID with cfg unless it already runs (conflict policy
// USE_EXISTING: starting a running session changes nothing) and attaches req's viewer to
// it (none when req.ViewerID is empty), in one Update-with-Start: a session the worker refuses (an agent profile it does not
// offer, a workspace outside its roots) answers with the reason. A closed session stays
// closed.
func (c *Client) Start(ctx context.Context, cfg signals.SessionConfig, req signals.AttachRequest) (signals.Status, error) {
	if err := signals.ValidateSessionConfig(cfg); err != nil {
		return signals.Status{}, signals.Reject(signals.RejectInvalidRequest, "%v", err)
	}
	if err := c.admitProfile(ctx, cfg); err != nil {
		return signals.Status{}, err
	}
	release, err := inFlight.acquire(ctx, cfg.SessionID)
	if err != nil {
		return signals.Status{}, err
	}
	defer release()
	var st signals.Status
	if req.ViewerID == "" {
		// No viewer to attach: a detach of nobody is the no-op the session starts with.
		var none signals.DetachResult
		return signals.Status{}, c.updateWithStart(ctx, cfg, signals.UpdateDetach, signals.DetachRequest{}, &none)
	}
	if err := c.updateWithStart(ctx, cfg, signals.Updates.Attach.Name, req, &st); err != nil {
		return st, err
	}
	return st, nil
}

// admitProfile refuses, before anything starts, a new session whose agent profile no worker
// offers, with the worker's own words: a refused request leaves no failed session behind.
// It asks only for a session that would start (one that runs ignores cfg), and costs one
// describe and, then, one profiles query. When no worker answers within a few seconds the
// start goes ahead and the worker decides, as it always does.
func (c *Client) admitProfile(ctx context.Context, cfg signals.SessionConfig) error {
	if cfg.Agent == "" {
		return nil
	}
	d, err := c.Temporal.DescribeWorkflowExecution(ctx, signals.SessionWorkflowID(cfg.SessionID), "")
	var nf *serviceerror.NotFound
	switch {
	case err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return nil
	case err != nil && !errors.As(err, &nf):
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, profilesWait)
	defer cancel()
	profiles, err := c.Profiles(pctx)
	if err != nil || len(profiles) == 0 {
		return nil
	}
	names := make([]string, 0, len(profiles))
	for _, p := range profiles {
		if p.Name == cfg.Agent {
			return nil
		}
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return signals.Reject(signals.RejectInvalidRequest, "unknown agent profile %q: this worker offers %s", cfg.Agent, strings.Join(names, ", "))
}

// profilesWait bounds how long admitProfile waits for a worker to say what it offers.
const profilesWait = 5 * time.Second

// Profiles asks a worker of the client's task queue which agent profiles a session may name
// (ProfilesWorkflow). A run stays open ProfilesLinger after it answers: a call meanwhile is
// one query to it, and only a call after that starts a run (one workflow start and its
// workflow task). No worker polling within ctx is an error.
func (c *Client) Profiles(ctx context.Context) ([]signals.ProfileInfo, error) {
	id := signals.ProfilesWorkflowID(c.TaskQueue)
	run, err := c.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                c.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowRunTimeout:       signals.ProfilesLinger + time.Minute,
		StaticSummary:            "tacp: which agent profiles the workers offer",
	}, signals.ProfilesWorkflowType)
	if err != nil {
		return nil, err
	}
	var out []signals.ProfileInfo
	for pause := 50 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		v, err := c.Temporal.QueryWorkflow(ctx, id, run.GetRunID(), signals.QueryProfiles)
		if err == nil {
			return out, v.Get(&out)
		}
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("no worker of task queue %s answered: %w", c.TaskQueue, ctx.Err())
		case strings.Contains(err.Error(), "unknown queryType"):
			// A run of a worker that answers only with its result.
			if err := run.Get(ctx, &out); err != nil {
				return nil, err
			}
			return out, nil
		case !busy(err):
			return nil, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

// updateWithStart sends update name with arg to session cfg.SessionID, starting the session
// with cfg when it does not run (Update-with-Start), and decodes the result into res.
func (c *Client) updateWithStart(ctx context.Context, cfg signals.SessionConfig, name string, arg, res any) error {
	err := resendNotReady(ctx, func() error {
		// An operation is good for one call: each send builds its own.
		start := c.Temporal.NewWithStartWorkflowOperation(c.startOptions(cfg, arg), signals.SessionWorkflowType, cfg)
		h, err := c.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: start,
			UpdateOptions: client.UpdateWorkflowOptions{
				UpdateName:   name,
				Args:         []any{arg},
				WaitForStage: client.WorkflowUpdateStageCompleted,
			},
		})
		if err == nil {
			err = h.Get(ctx, res)
		}
		return err
	})
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return signals.Reject(signals.RejectSessionClosed, "session %s is closed", cfg.SessionID)
		}
		var invalid *serviceerror.InvalidArgument
		if errors.As(err, &invalid) && strings.Contains(err.Error(), "Tacp") && strings.Contains(err.Error(), "defined") {
			return fmt.Errorf("%w (the namespace lacks tacp's newer search attributes: run starter setup)", err)
		}
		return c.mapErr(ctx, cfg.SessionID, err)
	}
	return nil
}

// startOptions are a session's start options. The static summary and details, what the
// Temporal UI shows of a session at a glance, name the session, its agent profile and
// workspace and, when first is a prompt and the client is not Confidential, how that prompt
// begins. They are the first run's
// only: a run started by continue-as-new shows the same in its Current Details.
func (c *Client) startOptions(cfg signals.SessionConfig, first any) client.StartWorkflowOptions {
	summary := fmt.Sprintf("tacp session %s · agent %s · workspace %s", cfg.SessionID, orDefault(cfg.Agent, "the worker's default"), orDefault(cfg.Workspace, "its own folder"))
	details := fmt.Sprintf("agent profile: %s\nworkspace: %s", orDefault(cfg.Agent, "worker default"), orDefault(cfg.Workspace, "worker default"))
	if p, ok := first.(signals.PromptRequest); ok && p.Text != "" && !c.Confidential {
		begin := []rune(strings.Join(strings.Fields(p.Text), " "))
		if len(begin) > 80 {
			begin = append(begin[:80], '…')
		}
		details += "\nstarted by the prompt: " + string(begin)
	}
	var memo map[string]any
	if cfg.Workspace != "" {
		memo = map[string]any{signals.MemoWorkspace: cfg.Workspace}
	}
	var attrs []temporal.SearchAttributeUpdate
	if cfg.Owner != "" {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrOwner).ValueSet(cfg.Owner))
		details += "\nowner: " + cfg.Owner
	}
	if cfg.Sharing != "" {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrSharing).ValueSet(cfg.Sharing))
	}
	if len(cfg.SharedWith) > 0 {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeywordList(signals.SearchAttrSharedWith).ValueSet(signals.SharedWithAttr(cfg.SharedWith)))
	}
	return client.StartWorkflowOptions{
		Memo:                     memo,
		TypedSearchAttributes:    temporal.NewSearchAttributes(attrs...),
		ID:                       signals.SessionWorkflowID(cfg.SessionID),
		TaskQueue:                c.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		// A closed session stays closed: its id is not reused for a new one. A session that
		// failed (the worker refused its config at the start, before anything ran) may be
		// started again with a config the worker admits.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		StaticSummary:         summary,
		StaticDetails:         details,
	}
}

// Steer steers the running turn of a session (compare-and-swap on ExpectedTurnID).
func (c *Client) Steer(ctx context.Context, sessionID string, req signals.SteerRequest) (signals.SteerResult, error) {
	return Call(ctx, c, sessionID, signals.Updates.Steer, req)
}

// Cancel cancels the running turn of a session.
func (c *Client) Cancel(ctx context.Context, sessionID string, req signals.CancelRequest) (signals.CancelResult, error) {
	return Call(ctx, c, sessionID, signals.Updates.Cancel, req)
}

// PermissionRespond answers an open permission request of a session; a later answer gets
// the existing resolution back.
func (c *Client) PermissionRespond(ctx context.Context, sessionID string, req signals.PermissionRespondRequest) (signals.PermissionRespondResult, error) {
	return Call(ctx, c, sessionID, signals.Updates.PermissionRespond, req)
}

// PermissionForget removes a remembered tool (a key of status rules).
func (c *Client) PermissionForget(ctx context.Context, sessionID string, req signals.PermissionForgetRequest) (signals.PermissionForgetResult, error) {
	return Call(ctx, c, sessionID, signals.Updates.PermissionForget, req)
}

// SetPolicy sets the session's permission level.
func (c *Client) SetPolicy(ctx context.Context, sessionID string, req signals.SetPolicyRequest) (signals.SetPolicyResult, error) {
	return Call(ctx, c, sessionID, signals.Updates.SetPolicy, req)
}

// SetMode sets the agent's mode for the session (one the agent offered).
func (c *Client) SetMode(ctx context.Context, sessionID string, req signals.SetModeRequest) (signals.SetModeResult, error) {
	return Call(ctx, c, sessionID, signals.Updates.SetMode, req)
}

// SetConfigOption sets one of the agent's config options for the session (a value it
// offered).
func (c *Client) SetConfigOption(ctx context.Context, sessionID string, req signals.SetConfigOptionRequest) (signals.SetConfigOptionResult, error) {
	return Call(ctx, c, sessionID, signals.Updates.SetConfigOption, req)
}

// SetMcpServers replaces the MCP servers the session passes its agent.
func (c *Client) SetMcpServers(ctx context.Context, sessionID string, req signals.SetMcpServersRequest) (signals.SetMcpServersResult, error) {
	return Call(ctx, c, sessionID, signals.Updates.SetMcpServers, req)
}

// Attach attaches (or renews) a viewer and returns the status snapshot.
func (c *Client) Attach(ctx context.Context, sessionID string, req signals.AttachRequest) (signals.Status, error) {
	return Call(ctx, c, sessionID, signals.Updates.Attach, req)
}

// Detach detaches a viewer.
func (c *Client) Detach(ctx context.Context, sessionID string, req signals.DetachRequest) error {
	_, err := Call(ctx, c, sessionID, signals.Updates.Detach, req)
	return err
}

// Close closes a session: its running turn is cancelled, queued prompts are dropped, and the
// workflow ends once the turn has.
func (c *Client) Close(ctx context.Context, sessionID string, req signals.CloseRequest) (signals.CloseResult, error) {
	if err := signals.ValidateBy(req.By); err != nil {
		return signals.CloseResult{}, signals.Reject(signals.RejectInvalidRequest, "%v", err)
	}
	return Call(ctx, c, sessionID, signals.Updates.Close, req)
}

// Status queries a session's status snapshot.
//
// A session the workflow does not say is closed is described too (one
// DescribeWorkflowExecution, not a billable action): a workflow an operator terminated
// answers the query with the state it had when it was stopped ("running"), so its state is
// StateTerminated and Ended says so; a running turn whose attempt no worker has taken yet is
// marked WaitingWorker, from the session's pending RunTurn activity.
func (c *Client) Status(ctx context.Context, sessionID string) (signals.Status, error) {
	var st signals.Status
	if err := c.query(ctx, sessionID, signals.QueryStatus, &st); err != nil {
		return st, err
	}
	if st.State == signals.StateClosed {
		return st, nil
	}
	d, err := c.Temporal.DescribeWorkflowExecution(ctx, signals.SessionWorkflowID(sessionID), "")
	if err != nil {
		return st, nil // the query answered: the description only adds to it
	}
	info := d.GetWorkflowExecutionInfo()
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
		enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
	default:
		st.State = endedState(info.GetStatus())
		st.Ended = c.endReason(ctx, info.GetExecution().GetWorkflowId(), info.GetExecution().GetRunId(), info.GetStatus())
		st.SteerToken, st.WaitingLimit = "", nil
		return st, nil
	}
	if st.State == signals.StateRunning && st.WaitingLimit == nil {
		st.WaitingWorker = waitingWorker(d, st.TurnID)
	}
	return st, nil
}

// endedState is the state of a session whose workflow ended with status, not closed:
// terminated, failed, timed_out, canceled.
func endedState(status enumspb.WorkflowExecutionStatus) string {
	return strings.ToLower(strings.TrimPrefix(status.String(), "WORKFLOW_EXECUTION_STATUS_"))
}

// waitingWorker is the wait of the session's RunTurn activity for a worker, when it is
// scheduled and not started (nil: it runs).
func waitingWorker(d *workflowservice.DescribeWorkflowExecutionResponse, turnID int64) *signals.WorkerWait {
	for _, a := range d.GetPendingActivities() {
		if a.GetActivityType().GetName() == signals.ActivityRunTurn && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_SCHEDULED {
			return &signals.WorkerWait{TurnID: turnID, Since: a.GetScheduledTime().AsTime()}
		}
	}
	return nil
}

// Events queries the journal after afterSeq (at most limit events; 0 means the default).
func (c *Client) Events(ctx context.Context, sessionID string, afterSeq int64, limit int) (signals.EventsResult, error) {
	var res signals.EventsResult
	return res, c.query(ctx, sessionID, signals.QueryEvents, &res, signals.EventsRequest{AfterSeq: afterSeq, Limit: limit})
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// accessOf reads a session's Access from its search attributes.
func accessOf(fields map[string]*commonpb.Payload) signals.Access {
	var shared []string
	if p := fields[signals.SearchAttrSharedWith]; p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &shared)
	}
	return signals.Access{Owner: decodeString(fields[signals.SearchAttrOwner]), Sharing: decodeString(fields[signals.SearchAttrSharing]), SharedWith: signals.SharesOf(shared)}
}

// Access returns session id's owner, sharing rule and shares, as its workflow's search
// attributes hold them (one describe call: no query, no billable action). An unknown
// session is RejectUnknownSession.
func (c *Client) Access(ctx context.Context, id string) (signals.Access, error) {
	resp, err := c.Temporal.DescribeWorkflowExecution(ctx, signals.SessionWorkflowID(id), "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return signals.Access{}, signals.Reject(signals.RejectUnknownSession, "no session %s", id)
		}
		return signals.Access{}, fmt.Errorf("describe session %s: %w", id, err)
	}
	return accessOf(resp.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()), nil
}

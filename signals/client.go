package signals

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

// Client is a typed client of tacp sessions over a Temporal client. Rejections come back as
// *Rejection (errors.As); other errors are transport or server errors.
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
		taskQueue = DefaultTaskQueue
	}
	return &Client{Temporal: c, TaskQueue: taskQueue}
}

// NewID returns a random id for client_message_id and client_msg_id.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Prompt sends a prompt to session cfg.SessionID, creating the session with cfg when it does
// not exist (Update-with-Start, conflict policy USE_EXISTING). An empty ClientMessageID is
// filled with a new id, which the returned result's turn is then known by.
func (c *Client) Prompt(ctx context.Context, cfg SessionConfig, req PromptRequest) (PromptResult, error) {
	// A config the workflow would refuse is refused here, before it starts (and so uses up)
	// a session id.
	if err := ValidateSessionConfig(cfg); err != nil {
		return PromptResult{}, Reject(RejectInvalidRequest, "%v", err)
	}
	if req.ClientMessageID == "" {
		req.ClientMessageID = NewID()
	}
	// So is a prompt the session would refuse: a new session is not started only to hold
	// the refusal.
	if rej := ValidatePrompt(req); rej != nil {
		return PromptResult{}, rej
	}
	if err := c.admitProfile(ctx, cfg); err != nil {
		return PromptResult{}, err
	}
	release, err := inFlight.acquire(ctx, cfg.SessionID)
	if err != nil {
		return PromptResult{}, err
	}
	defer release()
	var res PromptResult
	if err := c.updateWithStart(ctx, cfg, Updates.Prompt.Name, req, &res); err != nil {
		return res, err
	}
	return res, nil
}

// Start starts session cfg.SessionID with cfg unless it already runs (conflict policy
// USE_EXISTING: starting a running session changes nothing) and attaches req's viewer to
// it (none when req.ViewerID is empty), in one Update-with-Start: a session the worker refuses (an agent profile it does not
// offer, a workspace outside its roots) answers with the reason. A closed session stays
// closed.
func (c *Client) Start(ctx context.Context, cfg SessionConfig, req AttachRequest) (Status, error) {
	if err := ValidateSessionConfig(cfg); err != nil {
		return Status{}, Reject(RejectInvalidRequest, "%v", err)
	}
	if err := c.admitProfile(ctx, cfg); err != nil {
		return Status{}, err
	}
	release, err := inFlight.acquire(ctx, cfg.SessionID)
	if err != nil {
		return Status{}, err
	}
	defer release()
	var st Status
	if req.ViewerID == "" {
		// No viewer to attach: a detach of nobody is the no-op the session starts with.
		var none DetachResult
		return Status{}, c.updateWithStart(ctx, cfg, UpdateDetach, DetachRequest{}, &none)
	}
	if err := c.updateWithStart(ctx, cfg, Updates.Attach.Name, req, &st); err != nil {
		return st, err
	}
	return st, nil
}

// admitProfile refuses, before anything starts, a new session whose agent profile no worker
// offers, with the worker's own words: a refused request leaves no failed session behind.
// It asks only for a session that would start (one that runs ignores cfg), and costs one
// describe and, then, one profiles query. When no worker answers within a few seconds the
// start goes ahead and the worker decides, as it always does.
func (c *Client) admitProfile(ctx context.Context, cfg SessionConfig) error {
	if cfg.Agent == "" {
		return nil
	}
	d, err := c.Temporal.DescribeWorkflowExecution(ctx, SessionWorkflowID(cfg.SessionID), "")
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
	return Reject(RejectInvalidRequest, "unknown agent profile %q: this worker offers %s", cfg.Agent, strings.Join(names, ", "))
}

// profilesWait bounds how long admitProfile waits for a worker to say what it offers.
const profilesWait = 5 * time.Second

// Profiles asks a worker of the client's task queue which agent profiles a session may name
// (ProfilesWorkflow). A run stays open ProfilesLinger after it answers: a call meanwhile is
// one query to it, and only a call after that starts a run (one workflow start and its
// workflow task). No worker polling within ctx is an error.
func (c *Client) Profiles(ctx context.Context) ([]ProfileInfo, error) {
	id := ProfilesWorkflowID(c.TaskQueue)
	run, err := c.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                c.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowRunTimeout:       ProfilesLinger + time.Minute,
		StaticSummary:            "tacp: which agent profiles the workers offer",
	}, ProfilesWorkflowType)
	if err != nil {
		return nil, err
	}
	var out []ProfileInfo
	for pause := 50 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		v, err := c.Temporal.QueryWorkflow(ctx, id, run.GetRunID(), QueryProfiles)
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
func (c *Client) updateWithStart(ctx context.Context, cfg SessionConfig, name string, arg, res any) error {
	err := resendNotReady(ctx, func() error {
		// An operation is good for one call: each send builds its own.
		start := c.Temporal.NewWithStartWorkflowOperation(c.startOptions(cfg, arg), SessionWorkflowType, cfg)
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
			return Reject(RejectSessionClosed, "session %s is closed", cfg.SessionID)
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
func (c *Client) startOptions(cfg SessionConfig, first any) client.StartWorkflowOptions {
	summary := fmt.Sprintf("tacp session %s · agent %s · workspace %s", cfg.SessionID, orDefault(cfg.Agent, "the worker's default"), orDefault(cfg.Workspace, "its own folder"))
	details := fmt.Sprintf("agent profile: %s\nworkspace: %s", orDefault(cfg.Agent, "worker default"), orDefault(cfg.Workspace, "worker default"))
	if p, ok := first.(PromptRequest); ok && p.Text != "" && !c.Confidential {
		begin := []rune(strings.Join(strings.Fields(p.Text), " "))
		if len(begin) > 80 {
			begin = append(begin[:80], '…')
		}
		details += "\nstarted by the prompt: " + string(begin)
	}
	var memo map[string]any
	if cfg.Workspace != "" {
		memo = map[string]any{MemoWorkspace: cfg.Workspace}
	}
	var attrs []temporal.SearchAttributeUpdate
	if cfg.Owner != "" {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeyword(SearchAttrOwner).ValueSet(cfg.Owner))
		details += "\nowner: " + cfg.Owner
	}
	if cfg.Sharing != "" {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeyword(SearchAttrSharing).ValueSet(cfg.Sharing))
	}
	if len(cfg.SharedWith) > 0 {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeywordList(SearchAttrSharedWith).ValueSet(sharedWithAttr(cfg.SharedWith)))
	}
	return client.StartWorkflowOptions{
		Memo:                     memo,
		TypedSearchAttributes:    temporal.NewSearchAttributes(attrs...),
		ID:                       SessionWorkflowID(cfg.SessionID),
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
func (c *Client) Steer(ctx context.Context, sessionID string, req SteerRequest) (SteerResult, error) {
	return Call(ctx, c, sessionID, Updates.Steer, req)
}

// Cancel cancels the running turn of a session.
func (c *Client) Cancel(ctx context.Context, sessionID string, req CancelRequest) (CancelResult, error) {
	return Call(ctx, c, sessionID, Updates.Cancel, req)
}

// PermissionRespond answers an open permission request of a session; a later answer gets
// the existing resolution back.
func (c *Client) PermissionRespond(ctx context.Context, sessionID string, req PermissionRespondRequest) (PermissionRespondResult, error) {
	return Call(ctx, c, sessionID, Updates.PermissionRespond, req)
}

// PermissionForget removes a remembered tool (a key of status rules).
func (c *Client) PermissionForget(ctx context.Context, sessionID string, req PermissionForgetRequest) (PermissionForgetResult, error) {
	return Call(ctx, c, sessionID, Updates.PermissionForget, req)
}

// SetPolicy sets the session's permission level.
func (c *Client) SetPolicy(ctx context.Context, sessionID string, req SetPolicyRequest) (SetPolicyResult, error) {
	return Call(ctx, c, sessionID, Updates.SetPolicy, req)
}

// SetMode sets the agent's mode for the session (one the agent offered).
func (c *Client) SetMode(ctx context.Context, sessionID string, req SetModeRequest) (SetModeResult, error) {
	return Call(ctx, c, sessionID, Updates.SetMode, req)
}

// SetConfigOption sets one of the agent's config options for the session (a value it
// offered).
func (c *Client) SetConfigOption(ctx context.Context, sessionID string, req SetConfigOptionRequest) (SetConfigOptionResult, error) {
	return Call(ctx, c, sessionID, Updates.SetConfigOption, req)
}

// SetMcpServers replaces the MCP servers the session passes its agent.
func (c *Client) SetMcpServers(ctx context.Context, sessionID string, req SetMcpServersRequest) (SetMcpServersResult, error) {
	return Call(ctx, c, sessionID, Updates.SetMcpServers, req)
}

// Attach attaches (or renews) a viewer and returns the status snapshot.
func (c *Client) Attach(ctx context.Context, sessionID string, req AttachRequest) (Status, error) {
	return Call(ctx, c, sessionID, Updates.Attach, req)
}

// Detach detaches a viewer.
func (c *Client) Detach(ctx context.Context, sessionID string, req DetachRequest) error {
	_, err := Call(ctx, c, sessionID, Updates.Detach, req)
	return err
}

// Close closes a session: its running turn is cancelled, queued prompts are dropped, and the
// workflow ends once the turn has.
func (c *Client) Close(ctx context.Context, sessionID string, req CloseRequest) (CloseResult, error) {
	if err := ValidateBy(req.By); err != nil {
		return CloseResult{}, Reject(RejectInvalidRequest, "%v", err)
	}
	return Call(ctx, c, sessionID, Updates.Close, req)
}

// Status queries a session's status snapshot.
//
// A session the workflow does not say is closed is described too (one
// DescribeWorkflowExecution, not a billable action): a workflow an operator terminated
// answers the query with the state it had when it was stopped ("running"), so its state is
// StateTerminated and Ended says so; a running turn whose attempt no worker has taken yet is
// marked WaitingWorker, from the session's pending RunTurn activity.
func (c *Client) Status(ctx context.Context, sessionID string) (Status, error) {
	var st Status
	if err := c.query(ctx, sessionID, QueryStatus, &st); err != nil {
		return st, err
	}
	if st.State == StateClosed {
		return st, nil
	}
	d, err := c.Temporal.DescribeWorkflowExecution(ctx, SessionWorkflowID(sessionID), "")
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
	if st.State == StateRunning && st.WaitingLimit == nil {
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
func waitingWorker(d *workflowservice.DescribeWorkflowExecutionResponse, turnID int64) *WorkerWait {
	for _, a := range d.GetPendingActivities() {
		if a.GetActivityType().GetName() == ActivityRunTurn && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_SCHEDULED {
			return &WorkerWait{TurnID: turnID, Since: a.GetScheduledTime().AsTime()}
		}
	}
	return nil
}

// Events queries the journal after afterSeq (at most limit events; 0 means the default).
func (c *Client) Events(ctx context.Context, sessionID string, afterSeq int64, limit int) (EventsResult, error) {
	var res EventsResult
	return res, c.query(ctx, sessionID, QueryEvents, &res, EventsRequest{AfterSeq: afterSeq, Limit: limit})
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// accessOf reads a session's Access from its search attributes.
func accessOf(fields map[string]*commonpb.Payload) Access {
	var shared []string
	if p := fields[SearchAttrSharedWith]; p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &shared)
	}
	return Access{Owner: decodeString(fields[SearchAttrOwner]), Sharing: decodeString(fields[SearchAttrSharing]), SharedWith: sharesOf(shared)}
}

// Access returns session id's owner, sharing rule and shares, as its workflow's search
// attributes hold them (one describe call: no query, no billable action). An unknown
// session is RejectUnknownSession.
func (c *Client) Access(ctx context.Context, id string) (Access, error) {
	resp, err := c.Temporal.DescribeWorkflowExecution(ctx, SessionWorkflowID(id), "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return Access{}, Reject(RejectUnknownSession, "no session %s", id)
		}
		return Access{}, fmt.Errorf("describe session %s: %w", id, err)
	}
	return accessOf(resp.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()), nil
}

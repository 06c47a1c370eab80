package workflows

// Decisions flow back into a running turn (DESIGN §7): an accepted steer, a cancel, an
// answer to a permission request. Handlers only queue them; the main loop sends them one
// at a time, in order, as short Deliver activities on the task queue of the worker hosting
// the turn. A host that is gone shows as a schedule-to-start timeout.

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
)

const (
	// deliverScheduleToStart is how long a delivery waits for its host to pick it up: past
	// it the host is taken as lost.
	deliverScheduleToStart = 5 * time.Second
	// deliverStartToClose bounds one delivery; interrupt-and-continue waits for the agent
	// to acknowledge the cancel before prompting again.
	deliverStartToClose = 45 * time.Second
	// hostDeliveryChange guards the delivery activities: histories recorded before them have
	// no marker, replay the old way, and never schedule one.
	hostDeliveryChange = "host-delivery"
	// steerOrderChange guards holding a turn's end for the steer delivery in flight into it:
	// histories recorded before it ended such a turn at once.
	steerOrderChange = "steer-before-end"
)

// openPermission is a permission request waiting for an answer.
type openPermission struct {
	RequestID string                     `json:"request_id"`
	TurnID    int64                      `json:"turn_id"`
	Attempt   int32                      `json:"attempt"`
	ToolCall  json.RawMessage            `json:"tool_call"`
	Options   []signals.PermissionOption `json:"options"`
	Deadline  time.Time                  `json:"deadline"`
	// ToolName is the runner's name of the tool (signals.PermissionRequestedSignal).
	ToolName string `json:"tool_name,omitempty"`
}

// deliverable reports whether decisions can reach the live turn now.
func (s *session) deliverable() bool {
	return s.Turn != nil && s.Turn.HostQueue != "" && s.Turn.Finished == nil
}

// steerChannel reports whether an accepted steer could reach the live turn: steering is on
// for the session and the turn's host has not been found gone. A turn that has not yet
// reported its host takes steers: they wait for it.
func (s *session) steerChannel() bool {
	return s.cfg.SteeringOn && s.Turn != nil && s.Turn.Finished == nil && !s.Turn.HostLost
}

// queueDelivery queues d for the live turn; it is sent once the turn's host is known.
func (s *session) queueDelivery(d signals.Delivery) {
	d.SessionID, d.TurnID, d.Attempt = s.cfg.SessionID, s.Turn.TurnID, s.Turn.Attempt
	s.Deliveries = append(s.Deliveries, d)
}

// wantsDelivery reports whether the main loop has a delivery to send (or to drop, when its
// turn is gone).
func (s *session) wantsDelivery() bool {
	if len(s.Deliveries) == 0 || s.delivering {
		return false
	}
	d := s.Deliveries[0]
	waiting := s.Turn != nil && s.Turn.TurnID == d.TurnID && s.Turn.Attempt == d.Attempt && s.Turn.HostQueue == "" && s.Turn.Finished == nil
	return !waiting
}

// deliverNext sends the oldest queued delivery, or drops it when its turn is gone.
func (s *session) deliverNext(ctx workflow.Context) {
	d := s.Deliveries[0]
	s.Deliveries = s.Deliveries[1:]
	if !s.deliverable() || s.Turn.TurnID != d.TurnID || s.Turn.Attempt != d.Attempt {
		s.delivered(ctx, d, signals.DeliveryResult{}, fmt.Errorf("turn %d attempt %d is no longer running", d.TurnID, d.Attempt))
		return
	}
	if s.deliveryVersion == nil {
		v := workflow.GetVersion(ctx, hostDeliveryChange, workflow.DefaultVersion, 1)
		s.deliveryVersion = &v
	}
	if *s.deliveryVersion == workflow.DefaultVersion {
		s.delivered(ctx, d, signals.DeliveryResult{}, fmt.Errorf("this session's history predates delivery into turns"))
		return
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              s.Turn.HostQueue,
		ScheduleToStartTimeout: deliverScheduleToStart,
		StartToCloseTimeout:    deliverStartToClose,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:                deliverySummary(d),
	})
	s.delivering, s.inFlight = true, d
	f := workflow.ExecuteActivity(actx, signals.ActivityDeliver, d)
	var res signals.DeliveryResult
	s.pending++
	workflow.Go(ctx, func(ctx workflow.Context) {
		err := f.Get(ctx, &res)
		s.pending--
		s.delivering = false
		var timeout *temporal.TimeoutError
		if errors.As(err, &timeout) && timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
			if t := s.liveTurn(d.TurnID); t != nil && t.Attempt == d.Attempt {
				// The host is gone: no steer can reach this attempt; a retry on another
				// worker reports its new host with turn_started.
				t.HostQueue, t.HostLost = "", true
			}
		}
		s.delivered(ctx, d, res, err)
		s.maybeFinish(ctx) // a turn_finished may have waited for this steer's outcome
	})
}

// steerInFlight reports whether the turn's end must wait for the steer delivery in flight
// into the same attempt: the runner's early turn_finished can reach the session before the
// Deliver activity's result, and a steer delivered into a turn is reported before the turn's
// end. The delivery is bounded (deliverStartToClose), so the wait is too.
func (s *session) steerInFlight(ctx workflow.Context, fin *signals.TurnFinishedSignal) bool {
	t := s.Turn
	d := s.inFlight
	if !s.delivering || d.Kind != signals.DeliverSteer || d.TurnID != t.TurnID || d.Attempt != t.Attempt ||
		(fin.Attempt != 0 && fin.Attempt != t.Attempt) || fin.Orphaned {
		return false
	}
	if s.steerOrderVersion == nil {
		v := workflow.GetVersion(ctx, steerOrderChange, workflow.DefaultVersion, 1)
		s.steerOrderVersion = &v
	}
	return *s.steerOrderVersion != workflow.DefaultVersion
}

func deliverySummary(d signals.Delivery) string {
	switch d.Kind {
	case signals.DeliverSteer:
		return fmt.Sprintf("deliver steer %d.%d", d.TurnID, d.Offset)
	case signals.DeliverPermission:
		return fmt.Sprintf("deliver permission %s: %s", d.RequestID, d.Outcome)
	default:
		return fmt.Sprintf("deliver %s to turn %d", d.Kind, d.TurnID)
	}
}

// delivered records a delivery's outcome. Only steers journal it: a cancel has the
// heartbeat path as backstop and a permission answer is journaled when it is decided.
func (s *session) delivered(ctx workflow.Context, d signals.Delivery, res signals.DeliveryResult, err error) {
	if err != nil {
		workflow.GetLogger(ctx).Warn("delivery failed", "kind", d.Kind, "turn", d.TurnID, "error", err)
	}
	if d.Kind != signals.DeliverSteer {
		return
	}
	data := signals.SteerDeliveredData{Offset: d.Offset, How: res.How}
	if err != nil {
		data.How, data.Error = signals.HowFailed, err.Error()
	}
	s.journal(ctx, signals.EventSteerDelivered, d.TurnID, data)
}

// --- permissions ---

func (s *session) permissionRequested(ctx workflow.Context, sig signals.PermissionRequestedSignal) {
	t := s.liveTurn(sig.TurnID)
	if t == nil || sig.Attempt < t.Attempt || s.findPermission(sig.RequestID) >= 0 {
		return
	}
	if _, done := s.Resolved.Get(sig.RequestID); done {
		return
	}
	s.advanceAttempt(ctx, t, sig.Attempt)
	p := openPermission{
		RequestID: sig.RequestID, TurnID: sig.TurnID, Attempt: sig.Attempt,
		ToolCall: sig.ToolCall, Options: sig.Options, ToolName: sig.ToolName,
		Deadline: workflow.Now(ctx).Add(s.cfg.PermissionTimeout),
	}
	s.Permissions = append(s.Permissions, p)
	s.journal(ctx, signals.EventPermissionRequested, p.TurnID, signals.PermissionRequestedData{
		RequestID: p.RequestID, ToolCall: p.ToolCall, Options: p.Options, Deadline: p.Deadline, Paths: sig.Paths,
	})
	// Every request is journaled; one the policy or a rule decides resolves in the same
	// step, so nobody is asked and the session is never suspended for it.
	if res, ask := s.Policy.DecideNamed(p.RequestID, p.ToolCall, p.ToolName, p.Options, sig.Paths); !ask {
		s.resolve(ctx, len(s.Permissions)-1, res, true)
		return
	}
	s.pauseClockIfAsked(ctx)
}

func (s *session) findPermission(id string) int {
	for i, p := range s.Permissions {
		if p.RequestID == id {
			return i
		}
	}
	return -1
}

// checkRespond decides a permission answer without changing anything: the existing
// resolution for a request already resolved, a new one otherwise.
func (s *session) checkRespond(req signals.PermissionRespondRequest) (signals.PermissionResolution, bool, *signals.Rejection) {
	if req.RequestID == "" {
		return signals.PermissionResolution{}, false, signals.Reject(signals.RejectInvalidRequest, "request_id is required")
	}
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return signals.PermissionResolution{}, false, rej
	}
	if prev, ok := s.Resolved.Get(req.RequestID); ok {
		// A request withdrawn by a restart and asked again: the answer goes to the new one.
		if prev.DecidedBy != signals.DecidedByRestart {
			return prev, true, nil
		}
		again := s.reasked(req.RequestID)
		if again == "" {
			return prev, true, nil
		}
		via := req.RequestID
		req.RequestID = again
		res, dup, rej := s.checkRespond(req)
		if !dup {
			res.Via = via
		}
		return res, dup, rej
	}
	i := s.findPermission(req.RequestID)
	if i < 0 {
		return signals.PermissionResolution{}, false, signals.Reject(signals.RejectUnknownRequest, "no permission request %q is open", req.RequestID)
	}
	res := signals.PermissionResolution{RequestID: req.RequestID, DecidedBy: signals.DecidedByUser}
	switch req.Outcome {
	case signals.OutcomeCancelled:
		res.Outcome = signals.OutcomeCancelled
		return res, false, nil
	case "", signals.OutcomeSelected:
	default:
		return res, false, signals.Reject(signals.RejectInvalidRequest, "outcome %q: want selected or cancelled", req.Outcome)
	}
	for _, o := range s.Permissions[i].Options {
		if o.OptionID == req.OptionID {
			res.Outcome, res.OptionID = signals.OutcomeSelected, o.OptionID
			res.Remember = o.Kind == "allow_always"
			return res, false, nil
		}
	}
	return res, false, signals.Reject(signals.RejectInvalidOption, "request %s offers no option %q", req.RequestID, req.OptionID)
}

func (s *session) validateRespond(ctx workflow.Context, req signals.PermissionRespondRequest) error {
	if _, _, rej := s.checkRespond(req); rej != nil {
		return rej.ApplicationError()
	}
	return nil
}

func (s *session) respond(ctx workflow.Context, req signals.PermissionRespondRequest) (signals.PermissionRespondResult, error) {
	s.updates++
	res, done, rej := s.checkRespond(req)
	if rej != nil {
		return signals.PermissionRespondResult{}, rej.ApplicationError()
	}
	if !done {
		s.resolve(ctx, s.findPermission(res.RequestID), res, true)
	}
	return signals.PermissionRespondResult{RequestID: res.RequestID, Resolution: res}, nil
}

// resolve closes open request i with res, journals it, and (when the agent still waits for
// the answer) queues its delivery.
func (s *session) resolve(ctx workflow.Context, i int, res signals.PermissionResolution, deliver bool) {
	p := s.Permissions[i]
	s.Permissions = append(s.Permissions[:i:i], s.Permissions[i+1:]...)
	s.Resolved.Put(p.RequestID, res)
	if res.Remember {
		s.Policy.Remember(RuleKey(p.ToolCall, p.ToolName))
	}
	s.journal(ctx, signals.EventPermissionResolved, p.TurnID, res)
	s.timePermissionWait(ctx, p, res)
	s.pauseClockIfAsked(ctx)
	if deliver && s.Turn != nil && s.Turn.TurnID == p.TurnID {
		s.queueDelivery(signals.Delivery{Kind: signals.DeliverPermission, RequestID: p.RequestID, Outcome: res.Outcome, OptionID: res.OptionID})
	}
}

// cancelPermissions resolves every open request of turnID cancelled, decided by decidedBy
// (cancel, or restart for a lost attempt's) for reason: the runner answers the agent itself
// when its turn is cancelled or ends. A request a restart withdraws is remembered, so that
// an answer to its id reaches the request the next attempt asks in its place.
func (s *session) cancelPermissions(ctx workflow.Context, turnID int64, decidedBy, reason string) {
	for i := 0; i < len(s.Permissions); {
		p := s.Permissions[i]
		if p.TurnID != turnID {
			i++
			continue
		}
		if decidedBy == signals.DecidedByRestart {
			s.Withdrawn = append(s.Withdrawn, withdrawnRequest{RequestID: p.RequestID, TurnID: p.TurnID, Key: ToolKey(p.ToolCall)})
			if len(s.Withdrawn) > maxWithdrawn {
				s.Withdrawn = s.Withdrawn[len(s.Withdrawn)-maxWithdrawn:]
			}
		}
		s.resolve(ctx, i, signals.PermissionResolution{
			RequestID: p.RequestID, Outcome: signals.OutcomeCancelled, DecidedBy: decidedBy, Reason: reason,
		}, false)
	}
}

// withdrawnRequest is a request a restart withdrew: its id, its turn and its tool's key.
type withdrawnRequest struct {
	RequestID string `json:"request_id"`
	TurnID    int64  `json:"turn_id"`
	Key       string `json:"key"`
}

// maxWithdrawn bounds the withdrawn requests remembered.
const maxWithdrawn = 32

// replaces lists the withdrawn requests open request p asks again.
func (s *session) replaces(p openPermission) []string {
	var out []string
	for _, w := range s.Withdrawn {
		if w.Key != "" && w.TurnID == p.TurnID && s.reasked(w.RequestID) == p.RequestID {
			out = append(out, w.RequestID)
		}
	}
	return out
}

// reasked returns the open request that asks again what withdrawn request id asked: the same
// turn, the same tool (key), the newest first. "" when there is none.
func (s *session) reasked(id string) string {
	for _, w := range s.Withdrawn {
		if w.RequestID != id || w.Key == "" {
			continue
		}
		for i := len(s.Permissions) - 1; i >= 0; i-- {
			p := s.Permissions[i]
			if p.TurnID == w.TurnID && ToolKey(p.ToolCall) == w.Key {
				return p.RequestID
			}
		}
	}
	return ""
}

// pendingPermissions lists the open requests for status, without tool arguments.
func (s *session) pendingPermissions() []signals.PendingPermission {
	out := make([]signals.PendingPermission, 0, len(s.Permissions))
	for _, p := range s.Permissions {
		var tc struct {
			Title string `json:"title"`
			Kind  string `json:"kind"`
		}
		_ = json.Unmarshal(p.ToolCall, &tc)
		out = append(out, signals.PendingPermission{
			RequestID: p.RequestID, TurnID: p.TurnID, Title: tc.Title, Kind: tc.Kind, Options: p.Options, Deadline: p.Deadline,
			Replaces: s.replaces(p),
		})
	}
	return out
}

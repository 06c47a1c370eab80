package session

// The session core's two entry points, in the manner of etcd-io/raft's RawNode: Step takes
// one input, Ready says everything the shell must do. The shell (workflows/session.go) and the tests
// (core_test.go, the scenario files, the randomized test) drive the core through these two
// alone, with the same loop (sessionLoop's carry-out and the rig's): inputs are a closed set
// of types, and a command carries its data, so no caller reaches into the core's state.

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// Input is one input of the session core: one of the types below, and nothing else.
type Input interface{ isInput() }

// UpdateInput is a client's update, its request decoded (the update table, core_updates.go,
// names each one's request type). Its validator ran before it (Validate).
type UpdateInput struct {
	Name string
	Req  any
}

// SignalInput is one signal as it arrived: a turn runner's report, an update's signal twin,
// or wake. Refused is the worker's answer to a twin that asks it (set_mcp_servers'
// MCP policy), recorded by the shell: a twin the worker refuses changes nothing.
type SignalInput struct {
	Name    string
	Raw     json.RawMessage
	Refused string
}

// DeliveryAnswered is the result of a Deliver command's activity. HostGone: the host never
// picked it up (a schedule-to-start timeout).
type DeliveryAnswered struct {
	Delivery signals.Delivery
	Result   signals.DeliveryResult
	Err      error
	HostGone bool
}

// DriveStarted is the result of a StartTurn or ResumeTurn command: the shell drives the
// turn's RunTurn in this run.
type DriveStarted struct {
	TurnID int64
}

// DriveEnded says the shell's drive of a turn ended: completed or cancelled (Failure ""),
// or failed (Failure says how).
type DriveEnded struct {
	TurnID  int64
	Failure string
}

// RequestDone is the result of a RequestCancel or a RetryNow command: its request is
// recorded, whatever became of it (a cancel has the heartbeat path as backstop).
type RequestDone struct{}

// AlarmRang says the timer the last Alarm asked for fired.
type AlarmRang struct{}

// OperatorCancelled says an operator requested the cancellation of the session's workflow
// (the Temporal UI's "Request Cancellation", `temporal workflow cancel`). The session closes
// as for a close (its turn cancelled, its agent stopped, session.closed journaled with
// signals.CloseReasonOperatorCancel); the shell carries on in a context the cancellation
// does not reach, so the timer it armed before is gone and the alarm is armed again.
type OperatorCancelled struct{}

func (UpdateInput) isInput()        {}
func (SignalInput) isInput()        {}
func (DeliveryAnswered) isInput()   {}
func (DriveStarted) isInput()       {}
func (DriveEnded) isInput()         {}
func (RequestDone) isInput()        {}
func (AlarmRang) isInput()          {}
func (OperatorCancelled) isInput()  {}
func (SessionDataDeleted) isInput() {}

// Step takes one input at now. An update's result is its answer to the client; every other
// input answers nil. An update's refusal is a *signals.Rejection.
func (s *Core) Step(now time.Time, in Input) (any, error) {
	switch in := in.(type) {
	case UpdateInput:
		u, ok := UpdateByName[in.Name]
		if !ok {
			return nil, fmt.Errorf("unknown update %q", in.Name)
		}
		s.updates++
		return u.apply(s, now, in.Req)
	case SignalInput:
		s.signal(now, in)
	case DeliveryAnswered:
		s.pending--
		s.deliveryDone(now, in.Delivery, in.Result, in.Err, in.HostGone)
	case DriveStarted:
		s.pending--
		s.driveStarted(in.TurnID)
	case DriveEnded:
		if in.Failure == "" {
			s.driveEnded(now, in.TurnID)
		} else {
			s.driveFailed(now, in.TurnID, in.Failure)
		}
	case RequestDone:
		s.pending--
	case AlarmRang:
		s.alarmAt = time.Time{}
		s.fireAlarms(now)
	case OperatorCancelled:
		s.alarmAt = time.Time{}
		_, _ = s.close(now, signals.CloseRequest{Reason: signals.CloseReasonOperatorCancel})
	case SessionDataDeleted:
		s.journal(now, signals.EventSessionDeleted, 0, signals.SessionDeletedData{Host: in.Host, Removed: in.Result.Removed, Kept: in.Result.Kept, Error: in.Err})
	default:
		return nil, fmt.Errorf("unknown input %T", in)
	}
	return nil, nil
}

// Validate is an update's validator: it decides without changing anything, and reads
// nothing but the core's state. An update that also needs the worker's word (admission, the
// MCP policy) names it in Ask, for the shell to put to its worker.
func (s *Core) Validate(name string, req any) (Ask, error) {
	u, ok := UpdateByName[name]
	if !ok {
		return Ask{}, fmt.Errorf("unknown update %q", name)
	}
	return u.validate(s, req)
}

// Ask is what the worker is asked about an update the core admits: a session config to
// admit (the prompt's validator), MCP servers to check against the worker's policy
// (set_mcp_servers). The zero Ask asks nothing.
type Ask struct {
	Config     *signals.SessionConfig
	McpServers json.RawMessage
}

// --- Ready ---

// Ready is everything the shell must do after the inputs so far, in this order: carry out
// Cmd, upsert SearchAttrs (nil: unchanged), set Details, set the timer for Alarm (nil: the
// armed timer stands), record Metrics.
type Ready struct {
	Cmd         Cmd
	SearchAttrs *SearchAttrs
	Details     string
	Alarm       *Alarm
	Metrics     []Metric
}

// Cmd is a command for the shell: one of the types below.
type Cmd interface{ isCmd() }

// StartTurn starts the shell's drive of the turn's RunTurn (workflows/turn_session.go). Its
// start comes back as DriveStarted, its end as DriveEnded.
type StartTurn struct {
	Input signals.TurnInput
}

// ResumeTurn goes on, in a run that continued as new, with the turn an earlier run drove:
// it adopts the attempt running on HostQueue (RunTurnInput.Adopt), or, Limited, waits out
// the limit of that attempt (at once when RetryNow). DriveStarted and DriveEnded follow as
// for StartTurn.
type ResumeTurn struct {
	Input      signals.TurnInput
	Attempt    int32
	HostQueue  string
	LimitWaits int32
	// Resume is what the session knows of the attempt's progress, for a new attempt when
	// the host no longer holds it.
	Resume   *signals.TurnProgress
	Limited  *signals.TurnLimitedSignal
	RetryNow bool
}

// Deliver runs the Deliver activity on the task queue of the worker hosting the turn; its
// result comes back as DeliveryAnswered.
type Deliver struct {
	HostQueue string
	Summary   string
	Delivery  signals.Delivery
}

// RequestCancel cancels the shell's drive of turn TurnID. RequestDone follows.
type RequestCancel struct {
	TurnID int64
}

// RetryNow ends the limit's wait of the shell's drive of turn TurnID. RequestDone follows.
type RetryNow struct {
	TurnID int64
}

// ContinueAsNew hands the carried state to a new run. AutoUpgrade: the new run starts on
// the deployment's target version (workflows/doc.go).
type ContinueAsNew struct {
	Input       RunInput
	AutoUpgrade bool
}

// Close ends the run of a closed session once every handler has finished; AgentHost, when
// set, is asked to stop the session's agent first.
type Close struct {
	SessionID string
	AgentHost string
	// Delete asks the shell to remove the session's data on AgentHost (DeleteSessionData),
	// its workspace too when Delete.Workspace, and to report it (SessionDataDeleted).
	Delete *signals.DeleteSessionDataRequest
}

// SessionDataDeleted is what a deleting close's DeleteSessionData did on host ("": no
// worker held the session's data).
type SessionDataDeleted struct {
	Host   string
	Result signals.DeleteSessionDataResult
	Err    string
}

func (StartTurn) isCmd()     {}
func (ResumeTurn) isCmd()    {}
func (Deliver) isCmd()       {}
func (RequestCancel) isCmd() {}
func (RetryNow) isCmd()      {}
func (ContinueAsNew) isCmd() {}
func (Close) isCmd()         {}

// SearchAttrs are the session's search attributes as the shell upserts them.
type SearchAttrs struct {
	State    string
	Turn     int64
	Agent    string
	Awaiting bool
	// LastActivity is set by the runs that upsert TacpLastActivity and TacpLastOutcome
	// (searchAttrsChange); LastOutcome is "" until a turn ended.
	LastActivity *time.Time
	LastOutcome  string
	// WaitingUntil is set while a limited turn waits; UnsetWaitingUntil unsets it once after.
	WaitingUntil      *time.Time
	UnsetWaitingUntil bool
}

// Alarm is the one timer the shell keeps: set it for At (a timer already armed is
// cancelled), with Summary for the Temporal UI.
type Alarm struct {
	At      time.Time
	Summary string
}

// Metric is one metric record (metrics.go names them): a counter's increment, or a
// timer's duration when Duration is set.
type Metric struct {
	Name     string
	Tags     map[string]string
	Duration time.Duration
	Timer    bool
}

// HasReady reports whether Ready has something to do: a command, or an alarm that moved.
// It changes nothing; the shell's main loop waits on it.
func (s *Core) HasReady(info RunInfo) bool {
	return !s.readied || s.alarmNeedsArming() || s.next(info) != cmdNone
}

// Ready says what the shell must do now and counts it done: the command's state change
// (the turn begun, the delivery taken off the lane) is made here, in the same step. The
// first Ready of a run holds no command: a run publishes its state (search attributes, the
// alarm) before it does anything, as every recorded run did.
func (s *Core) Ready(now time.Time, info RunInfo) Ready {
	var rd Ready
	if s.readied {
		rd.Cmd = s.take(now, info)
	}
	s.readied = true
	switch rd.Cmd.(type) {
	case ContinueAsNew:
		// the run ends: nothing more to show
	case Close:
		rd.SearchAttrs, rd.Details = s.searchAttrs(now), s.details()
	default:
		rd.SearchAttrs, rd.Details = s.searchAttrs(now), s.details()
		if at, summary, ok := s.setAlarm(); ok {
			rd.Alarm = &Alarm{At: at, Summary: summary}
		}
	}
	rd.Metrics, s.metrics = s.metrics, nil
	return rd
}

// take carries out next in the core and returns the command for the shell (nil when the
// step needs none: a delivery dropped).
func (s *Core) take(now time.Time, info RunInfo) Cmd {
	switch s.next(info) {
	case cmdClose:
		s.closeSession(now)
		c := Close{SessionID: s.cfg.SessionID, AgentHost: s.AgentHost}
		if s.Delete {
			c.Delete = &signals.DeleteSessionDataRequest{SessionID: s.cfg.SessionID, Workspace: s.DeleteWorkspace, WorkspaceName: s.cfg.Workspace}
		}
		return c
	case cmdContinueAsNew:
		return s.carry(info)
	case cmdRequestCancel:
		s.Turn.Cancel = cancelSent
		s.pending++
		return RequestCancel{TurnID: s.Turn.TurnID}
	case cmdRetryNow:
		s.Turn.Limited.RetryNowSent = true
		s.pending++
		return RetryNow{TurnID: s.Turn.TurnID}
	case cmdResumeTurn:
		s.pending++
		return s.resumeTurn()
	case cmdDeliver:
		d, send := s.takeDelivery(now)
		if !send {
			return nil
		}
		s.pending++
		return Deliver{HostQueue: s.Turn.HostQueue, Summary: deliverySummary(d), Delivery: d}
	case cmdStartTurn:
		in := s.beginTurn(now)
		s.pending++
		return StartTurn{Input: in}
	}
	return nil
}

// carry is the continue-as-new of this run: the state the next run takes. It changes
// nothing here (the shell may wait for a handler and come back for a newer one). Moving to
// the new target version is decided on that state: busy, the session stays pinned and
// moves at the next run's first idle safe point.
func (s *Core) carry(info RunInfo) Cmd {
	st := s.sessionState
	upgrade := s.upgradeDue(info)
	st.UpgradeWanted = !upgrade && (st.UpgradeWanted || info.TargetChanged)
	if upgrade {
		// The new run starts on the target version; it may find the agent's host gone with
		// the old build, so its first turn goes to the session queue (affinity resumes there).
		st.AgentHost = ""
	}
	if t := st.Turn; t != nil && t.Cancel == cancelSent {
		// The cancel went to this run's drive of the turn, which ends with the run: the next
		// run's drive (ResumeTurn) is asked again.
		turn := *t
		turn.Cancel = cancelWanted
		st.Turn = &turn
	}
	carried, err := json.Marshal(st)
	if err != nil {
		panic(fmt.Sprintf("encode carried state: %v", err)) // plain data: cannot fail
	}
	return ContinueAsNew{Input: RunInput{SessionConfig: s.cfg.SessionConfig, Carried: carried}, AutoUpgrade: upgrade}
}

// searchAttrs is what to upsert, nil when nothing changed since the last upsert.
func (s *Core) searchAttrs(now time.Time) *SearchAttrs {
	state, turn, awaiting := s.searchAttributes()
	outcome := s.LastOutcome
	if s.RunnerReported && state == signals.StateRunning && s.shownState == signals.StateIdle &&
		now.Before(s.Turn.StartedAt.Add(signals.RunningShownAfter)) {
		// A short turn shows only its end: its runner beats one that runs on, and the
		// workflow task of that beat (or of any batch by then) shows it running.
		return nil
	}
	waiting := s.waitingUntil()
	key := fmt.Sprintf("%s/%d/%t/%s", state, turn, awaiting, outcome)
	if waiting != nil || s.waitedUntil {
		key += "/" + fmt.Sprint(waiting) // only a session that waited for a limit upserts TacpWaitingUntil
	}
	if key == s.lastSA {
		return nil
	}
	s.lastSA, s.shownState = key, state
	sa := &SearchAttrs{State: state, Turn: turn, Agent: agentName(s.cfg.Agent), Awaiting: awaiting, LastOutcome: outcome, LastActivity: &now}
	switch {
	case waiting != nil:
		s.waitedUntil = true
		sa.WaitingUntil = waiting
	case s.waitedUntil:
		s.waitedUntil = false
		sa.UnsetWaitingUntil = true
	}
	return sa
}

// --- the dispatch ---

// Executor carries out the core's commands: the workflow runtime (workflows/session.go) or a test's
// rig (core_test.go). Each result comes back to the core as an input.
type Executor interface {
	StartTurn(StartTurn)
	ResumeTurn(ResumeTurn)
	Deliver(Deliver)
	RequestCancel(RequestCancel)
	RetryNow(RetryNow)
	// Close and continueAsNew end the run (end); continueAsNew may instead wait for a
	// handler still running and say to ask Ready again (end false).
	Close(Close) (end bool, err error)
	ContinueAsNew(ContinueAsNew) (end bool, err error)
	Show(sa *SearchAttrs, details string)
	Arm(*Alarm)
	Record([]Metric)
}

// Wake is one turn of the main loop once the inputs that woke it are in: the alarm, if it
// rang, then Ready, carried out (CarryOut). The shell's loop and the tests' rig both turn
// it, so there is one dispatch.
func Wake(s *Core, x Executor, now time.Time, info RunInfo, rang bool) (end bool, err error) {
	if rang {
		_, _ = s.Step(now, AlarmRang{})
	}
	return CarryOut(x, s.Ready(now, info))
}

// CarryOut does what rd says, in its order: the metrics, the command, the search attributes
// and the details, the alarm. A closing run shows its last state before it stops its agent;
// a run that continues as new shows nothing more.
func CarryOut(x Executor, rd Ready) (end bool, err error) {
	x.Record(rd.Metrics)
	switch c := rd.Cmd.(type) {
	case Close:
		x.Show(rd.SearchAttrs, rd.Details)
		return x.Close(c)
	case ContinueAsNew:
		return x.ContinueAsNew(c)
	case RequestCancel:
		x.RequestCancel(c)
	case RetryNow:
		x.RetryNow(c)
	case Deliver:
		x.Deliver(c)
	case StartTurn:
		x.StartTurn(c)
	case ResumeTurn:
		x.ResumeTurn(c)
	}
	x.Show(rd.SearchAttrs, rd.Details)
	x.Arm(rd.Alarm)
	return false, nil
}

// --- queries (they change nothing) ---

// Events is the Events query's answer.
func (s *Core) Events(req signals.EventsRequest) signals.EventsResult {
	return s.Journal.Since(req.AfterSeq, req.Limit)
}

// Transcript is the Transcript query's answer.
func (s *Core) Transcript(req signals.TranscriptRequest) signals.TranscriptResult {
	return BuildTranscriptUnder(s.Journal.Events, req.BeforeTurn, req.MaxBytes, req.Header)
}

// metric records one counter increment for the next Ready.
func (s *Core) metric(name string, tags map[string]string) {
	s.metrics = append(s.metrics, Metric{Name: name, Tags: tags})
}

// RunInput is SessionWorkflow's argument: a client's signals.SessionConfig, and, in a
// run started by continue-as-new, the state the previous run carried. The config is
// embedded, so the JSON is the config's own plus "carried": a client's {"session_id": "s1"}
// decodes, and so do the inputs recorded before Carried left signals.SessionConfig.
type RunInput struct {
	signals.SessionConfig
	// Carried is the sessionState a run hands to the next; clients never set it.
	Carried json.RawMessage `json:"carried,omitempty"`
}

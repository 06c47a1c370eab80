package session

// The session core: every rule of a session (contract §6) as a state machine in plain Go, in
// the manner of etcd-io/raft's raft.go. Its inputs are the updates, the signals, the alarm
// and the results of what it asked for, each with the time `now` handed in by the shell
// (Step, core_step.go); Ready says what the shell does next (start a turn, request a cancel,
// deliver a decision, continue as new, close) with the command's data, the search
// attributes, the alarm and the metrics. It reads no clock, draws no random number and
// imports no workflow package, so tests drive it synchronously (core_test.go, the scenario
// files in testdata/scenarios). What only the workflow runtime can answer — a log
// line — it asks of its Env, which the shell (workflows/session.go) implements and tests
// fake.
//
// This file holds the core's state: Core, what a run carries to the next across
// continue-as-new (sessionState), what the core asks of its runtime (Env) and the
// journal helper. The rest, one concept a file: the turn's life (core_turn.go), the
// client's prompts, steers, cancels and close (core_prompts.go), the permission requests
// and the policy's updates (core_permissions.go), the delivery lane (core_delivery.go), the
// belts and the alarm (core_belts.go), usage (core_usage.go), what the session shows
// (core_status.go) and what it does next, with the continue-as-new policy (core_next.go).

import (
	"encoding/json"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// Env is what the core asks of the workflow runtime that a pure function cannot answer: a
// log line, which writes no history. Metrics are data: Ready hands them out.
type Env interface {
	Warn(msg string, keyvals ...any)
}

// Core is the state machine of one run of a session: the state carried across
// continue-as-new and the run's own bookkeeping.
type Core struct {
	sessionState
	cfg   Config
	env   Env
	build Build

	// per-run counters and bookkeeping (not carried)
	updates, signalsSeen int
	// pending counts the shell's commands whose results have not come back: continue-as-new
	// and close wait for them.
	pending    int
	delivering bool
	inFlight   signals.Delivery // the delivery being sent, while delivering

	// alarmAt is when the shell's timer is armed for (the last Ready's Alarm).
	alarmAt time.Time

	// readied: the run's first Ready is out (it holds no command).
	readied bool
	// metrics are the records for the next Ready.
	metrics []Metric
	// lastSA is the search attributes last upserted (searchAttrs); waitedUntil: this run
	// set TacpWaitingUntil (a limit's wait), to unset when it ends.
	lastSA      string
	waitedUntil bool
	// shownState is the TacpSessionState of the last upsert ("" before the run's first).
	shownState string

	// inFlightReported: the delivery_outcome of the steer in flight overtook its result.
	inFlightReported bool

	// driving is the turn whose RunTurn this run's shell drives (after its StartTurn or
	// ResumeTurn): a turn carried from an earlier run has none until the ResumeTurn it
	// needs (next).
	driving int64
}

// sessionState is everything a run carries to the next across continue-as-new.
type sessionState struct {
	Run            int       `json:"run"`
	Queue          *Queue    `json:"queue"`
	Steer          *Steer    `json:"steer"`
	Journal        *Journal  `json:"journal"`
	Turn           *LiveTurn `json:"turn,omitempty"`
	AgentSessionID string    `json:"agent_session_id,omitempty"`
	// AgentHost is the host queue of the worker that ran the last attempt, which holds the
	// live agent: the next turn goes there first (affinity, contract §10).
	AgentHost string `json:"agent_host,omitempty"`
	// Sandbox is the kernel sandbox of the last attempt's agent, as its worker said.
	Sandbox string `json:"sandbox,omitempty"`
	// ContextLost is the last agent.context_lost, for status.
	ContextLost *signals.ContextLostView `json:"context_lost,omitempty"`
	Closing     bool                     `json:"closing,omitempty"`
	CloseReason string                   `json:"close_reason,omitempty"`
	CloseBy     string                   `json:"close_by,omitempty"`
	// Delete is the closing close's request to remove the session's data (and workspace).
	Delete          bool `json:"delete,omitempty"`
	DeleteWorkspace bool `json:"delete_workspace,omitempty"`
	// Deliveries wait to be sent into the live turn, oldest first.
	Deliveries []signals.Delivery `json:"deliveries,omitempty"`
	// Awaiting are the steers the live turn took (Async) whose delivery_outcome has not
	// come yet; DeliverySeq numbers the deliveries sent with Async (their DeliveryID).
	Awaiting    []signals.Delivery                       `json:"awaiting,omitempty"`
	DeliverySeq int64                                    `json:"delivery_seq,omitempty"`
	Permissions []openPermission                         `json:"permissions,omitempty"`
	Resolved    DedupIndex[signals.PermissionResolution] `json:"resolved"`
	// Elicitations are the open questions of the agent; ElicitationsDone their resolutions
	// (nil in a session older than elicitation: request_elicitation.go).
	Elicitations     []openElicitation                          `json:"elicitations,omitempty"`
	ElicitationsDone *DedupIndex[signals.ElicitationResolution] `json:"elicitations_done,omitempty"`
	// Between holds the batch watermark of each agent process that spoke between turns.
	Between []hostBatch `json:"between,omitempty"`
	// Usage totals the token usage the agent reported, by field.
	Usage map[string]int64 `json:"usage,omitempty"`
	// UsageLatest holds the usage fields that are gauges, not counters (objects: the agent's
	// context window, its cumulative cost): the latest value, never summed.
	UsageLatest map[string]json.RawMessage `json:"usage_latest,omitempty"`
	// Policy is the permission level and the remembered tools.
	Policy     *Policy    `json:"policy,omitempty"`
	Viewers    []viewer   `json:"viewers,omitempty"`
	GraceUntil *time.Time `json:"grace_until,omitempty"`
	// LastOutcome is how the last turn ended: its stop reason or OutcomeFailed.
	LastOutcome string `json:"last_outcome,omitempty"`
	// Withdrawn are requests a restart withdrew, newest last (cancelPermissions).
	Withdrawn []withdrawnRequest `json:"withdrawn,omitempty"`
	// Settings is the agent's offer and the clients' choices (settings.go).
	Settings *Settings `json:"settings,omitempty"`
	// Title is the session's title (set_title, core_title.go).
	Title string `json:"title,omitempty"`
	// RunnerReported: a runner has reported a turn_started in this session. From then on a
	// turn shows "running" in the search attributes only once it is
	// signals.RunningShownAfter old (searchAttrs), as its runner beats at
	// signals.TurnBeatAfter; the session's first turn, which also starts its agent, shows
	// it at once. The JSON name is the one earlier runs carry across continue-as-new.
	RunnerReported bool `json:"runner_beats,omitempty"`
	// UpgradeWanted: a run saw its deployment's target version change and continued as new
	// pinned (busy, or for its history's size); the next run moves at its first idle safe
	// point without being told again (workflows/doc.go).
	UpgradeWanted bool `json:"upgrade_wanted,omitempty"`
}

// journal appends an event at now.
func (s *Core) journal(now time.Time, kind string, turnID int64, data any) {
	s.Journal.Append(kind, turnID, now, data)
}

// busy reports whether a turn holds the session (queued prompts wait behind it).
func (s *Core) busy() bool { return s.Turn != nil }

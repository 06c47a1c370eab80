package signals

// Limits (contract §11 "Limits"): a turn the model provider limits waits on a durable timer
// and runs the same prompt again as that turn's next attempt.
//
// The agent says it was limited with a typed failure, never in prose: tacp advertises the
// `sessionFailure` capability of the `_meta.jetbrains.air` extension in its initialize, and
// claude-agent-acp 0.101.0 and codex-acp 2.6.0 then end a limited turn with `end_turn` and
// `_meta.jetbrains.air.sessionFailure {category, actions, title, …}` on the session/prompt
// answer (category `limit` or `service`, actions `retry`). The runner turns that into a
// LimitInfo; the turn's drive reports it with turn_limited, waits on its timer (or a
// retry_now, or the turn's cancel) and runs the turn's next attempt.

import "time"

// Event, state, update and signal names of limits.
const (
	// EventTurnLimited journals a turn that waits for the provider's limit (TurnLimitedData).
	EventTurnLimited = "turn.limited"
	// EventTurnRetryNow journals a person's retry_now of a limited turn (RetryNowData).
	EventTurnRetryNow = "turn.retry_now"
	// StateWaitingLimit is the state of a session whose turn waits for a limit to reset.
	StateWaitingLimit = "waiting_limit"
	// SearchAttrWaitingUntil is when the session's limited turn runs again (Datetime),
	// unset when none waits.
	SearchAttrWaitingUntil = "TacpWaitingUntil"
	// UpdateRetryNow ends a limit's wait: the turn runs again now (with a signal twin).
	UpdateRetryNow = "retry_now"
	// SignalTurnLimited is the turn drive's report that its attempt was limited and the
	// turn waits (TurnLimitedSignal).
	SignalTurnLimited = "turn_limited"
)

// Limit reasons: the agent's failure kind as far as its typed failure tells it.
const (
	// LimitRateLimited: category limit, action retry (a 429, rate_limited).
	LimitRateLimited = "rate_limited"
	// LimitService: category service, action retry (overloaded, a provider error).
	LimitService = "service"
	// LimitUsage: category limit without a retry action (a quota, a subscription's usage
	// limit) whose message gives the time it resets: waited out until then.
	LimitUsage = "usage_limit"
)

// LimitInfo is how an attempt was limited, as the runner read the agent's typed failure.
type LimitInfo struct {
	// Reason is LimitRateLimited, LimitService or LimitUsage.
	Reason string `json:"reason"`
	// Message is the agent's title of the failure, for a person (the runner reads a reset
	// time from it where the typed failure has none).
	Message string `json:"message,omitempty"`
	// RetryAt is when the turn runs again: the reset time the agent gave, else the
	// runner's backoff (Backoff set).
	RetryAt time.Time `json:"retry_at"`
	// Backoff is set when the agent gave no reset time and RetryAt is tacp's backoff.
	Backoff bool `json:"backoff,omitempty"`
}

// TurnLimitedSignal is turn_limited: attempt Attempt of turn TurnID was limited after it
// sent Batches batches, and the turn waits until Limit.RetryAt.
type TurnLimitedSignal struct {
	TurnID         int64     `json:"turn_id"`
	Attempt        int32     `json:"attempt"`
	Batches        int64     `json:"batches,omitempty"`
	AgentSessionID string    `json:"agent_session_id,omitempty"`
	HostQueue      string    `json:"host_queue,omitempty"`
	Limit          LimitInfo `json:"limit"`
}

// TurnLimitedData is the data of turn.limited.
type TurnLimitedData struct {
	Attempt int32     `json:"attempt"`
	Reason  string    `json:"reason"`
	Message string    `json:"message,omitempty"`
	RetryAt time.Time `json:"retry_at"`
	Backoff bool      `json:"backoff,omitempty"`
}

// RetryNowRequest is retry_now's request: end the wait of turn TurnID (0: the live turn).
type RetryNowRequest struct {
	TurnID   int64  `json:"turn_id,omitempty"`
	ViewerID string `json:"viewer_id,omitempty"`
	// AnsweredBy names who asked.
	AnsweredBy string `json:"answered_by,omitempty"`
}

// RetryNowResult answers retry_now.
type RetryNowResult struct {
	TurnID int64 `json:"turn_id"`
}

// RetryNowData is the data of turn.retry_now.
type RetryNowData struct {
	AnsweredBy string `json:"answered_by,omitempty"`
}

// LimitWait is status's account of a limited turn's wait.
type LimitWait struct {
	TurnID  int64     `json:"turn_id"`
	Attempt int32     `json:"attempt"`
	Reason  string    `json:"reason"`
	Message string    `json:"message,omitempty"`
	RetryAt time.Time `json:"retry_at"`
	Backoff bool      `json:"backoff,omitempty"`
	// RetryNow is set once a person asked to retry now.
	RetryNow bool `json:"retry_now,omitempty"`
}

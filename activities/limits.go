package activities

// A turn the model provider limits (contract §11 "Limits"): the runner reads the agent's
// typed failure and, within the worker's policy (-limits.max-wait), answers the attempt
// Limited instead of failed, so that the session waits on a durable timer and runs the
// prompt again as the turn's next attempt.
//
// The failure is typed, never prose: the runner advertises the `sessionFailure` capability
// of the `_meta.jetbrains.air` extension, and claude-agent-acp 0.101.0 and codex-acp 2.6.0
// then end such a turn with `end_turn` and `_meta.jetbrains.air.sessionFailure {category,
// actions, title}` on the session/prompt answer. category `limit` with action `retry` is a
// rate limit (a 429), `service` with `retry` an overloaded or failing provider; the others
// (a budget, a login) fail the turn as before, and so does a quota (`limit` without
// `retry`) unless its title says when it resets. Neither agent gives a reset time in its
// typed failure (a 429's retry-after is the agent's own retry's business; Claude Code's is
// switched off by CLAUDE_CODE_MAX_RETRIES=0, Codex's by the provider's request_max_retries),
// but the title carries the provider's words ("retry after 20s", "try again in 5 minutes",
// "resets 3:04pm (UTC)"): the runner reads a reset time from them (resetTime), and only
// where they give none is the wait tacp's backoff, LimitBackoff doubled for each wait the
// turn already had, at most LimitMaxBackoff. The category always comes from the type, never
// from the prose.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tacp-dev/tacp/activities/turn"
	"github.com/tacp-dev/tacp/signals"
)

// Limit defaults.
const (
	// DefaultLimitBackoff is the first wait of a limited turn whose agent gave no reset time.
	DefaultLimitBackoff = 30 * time.Second
	// DefaultLimitMaxBackoff bounds the doubled backoff.
	DefaultLimitMaxBackoff = 15 * time.Minute
	// MaxLimitWaits bounds the waits of one turn: past it the turn fails.
	MaxLimitWaits = 20
)

// airCapabilities is the _meta of tacp's ClientCapabilities: the AIR extension's version
// and the one capability tacp reads (sessionFailure).
func airCapabilities() map[string]any {
	return map[string]any{"jetbrains": map[string]any{"air": map[string]any{
		"version": 1, "capabilities": []string{"sessionFailure"},
	}}}
}

// agentFailure is the AIR sessionFailure of a session/prompt answer.
type agentFailure struct {
	Category string   `json:"category"`
	Severity string   `json:"severity"`
	Title    string   `json:"title"`
	Actions  []string `json:"actions"`
}

// promptFailure reads the typed failure of a session/prompt answer's _meta (nil: none).
func promptFailure(meta map[string]any) *agentFailure {
	if meta == nil {
		return nil
	}
	raw, err := json.Marshal(meta)
	if err != nil {
		return nil
	}
	var m struct {
		JetBrains struct {
			Air struct {
				Failure *agentFailure `json:"sessionFailure"`
			} `json:"air"`
		} `json:"jetbrains"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m.JetBrains.Air.Failure
}

// limitReason is the signals.Limit… reason of a failure the turn may wait out, "" for one
// it may not.
func limitReason(f *agentFailure) string {
	if f == nil || f.Severity == "warning" || !slices.Contains(f.Actions, "retry") {
		return ""
	}
	switch f.Category {
	case "limit":
		return signals.LimitRateLimited
	case "service":
		return signals.LimitService
	}
	return ""
}

// limitPolicy is the worker's policy for limited turns.
type limitPolicy struct {
	maxWait, backoff, maxBackoff time.Duration
}

// decide says how an attempt the agent answered with failure f ends: limited (wait until
// the LimitInfo's RetryAt), failed (err: f names a failure that is not waited out, or the
// policy does not wait that long), or neither (nil, nil: no typed failure). waits is how
// many times the turn already waited.
func (p limitPolicy) decide(now time.Time, f *agentFailure, waits int32) (*signals.LimitInfo, error) {
	if f == nil || f.Severity == "warning" {
		return nil, nil
	}
	reason := limitReason(f)
	at, known := resetTime(now, f.Title)
	if reason == "" && known && f.Category == "limit" {
		reason = signals.LimitUsage
	}
	if reason == "" {
		return nil, fmt.Errorf("the agent reported a %s failure: %s", f.Category, f.Title)
	}
	if known {
		switch wait := at.Sub(now); {
		case p.maxWait <= 0:
			return nil, fmt.Errorf("limited (%s): %s; not waiting: -limits.max-wait is off", reason, f.Title)
		case waits >= MaxLimitWaits:
			return nil, fmt.Errorf("limited (%s): %s; gave up after %d waits", reason, f.Title, waits)
		case wait > p.maxWait:
			return nil, fmt.Errorf("limited (%s): %s; not waiting until %s: over -limits.max-wait (%s)", reason, f.Title, at.UTC().Format(time.RFC3339), p.maxWait)
		}
		return &signals.LimitInfo{Reason: reason, Message: f.Title, RetryAt: at.UTC()}, nil
	}
	backoff := p.backoff
	for i := int32(0); i < waits && backoff < p.maxBackoff; i++ {
		backoff *= 2
	}
	backoff = min(backoff, p.maxBackoff)
	switch {
	case p.maxWait <= 0:
		return nil, fmt.Errorf("limited (%s): %s; not waiting: -limits.max-wait is off", reason, f.Title)
	case waits >= MaxLimitWaits:
		return nil, fmt.Errorf("limited (%s): %s; gave up after %d waits", reason, f.Title, waits)
	case backoff > p.maxWait:
		return nil, fmt.Errorf("limited (%s): %s; not waiting %s: over -limits.max-wait (%s)", reason, f.Title, backoff, p.maxWait)
	}
	return &signals.LimitInfo{Reason: reason, Message: f.Title, RetryAt: now.Add(backoff).UTC(), Backoff: true}, nil
}

// limitPolicy is r's policy, with the defaults.
func (r *Runner) limitPolicy() limitPolicy {
	p := limitPolicy{maxWait: r.LimitMaxWait, backoff: r.LimitBackoff, maxBackoff: DefaultLimitMaxBackoff}
	if p.backoff <= 0 {
		p.backoff = DefaultLimitBackoff
	}
	p.maxBackoff = max(p.maxBackoff, p.backoff)
	return p
}

// limited decides the end of an attempt whose agent answered with a stop reason: done
// reports that the attempt ends here (res or err), limited or failed by its typed failure.
func (t *turnRun) limited(end turn.End) (res signals.RunTurnResult, err error, done bool) {
	f := t.watch.promptFailure()
	if f == nil || end.StopReason == turn.StopCancelled {
		return signals.RunTurnResult{}, nil, false
	}
	lim, ferr := t.r.limitPolicy().decide(time.Now(), f, t.in.LimitWaits)
	switch {
	case ferr != nil:
		res, err = t.finish(t.fail(fmt.Errorf("agent: %w", ferr)))
		return res, err, true
	case lim != nil:
		t.log.Info("turn limited: the turn waits", "reason", lim.Reason, "retry_at", lim.RetryAt)
		t.res.Limited = lim
		res, err = t.finish(nil)
		return res, err, true
	}
	return signals.RunTurnResult{}, nil, false
}

// notePromptMeta keeps the typed failure of a session/prompt answer, if it has one.
func (o *turnObserver) notePromptMeta(meta map[string]any) {
	o.failure.Store(promptFailure(meta)) // a later answer without one clears it
}

// promptFailure is the typed failure of the turn's last session/prompt answer that had one.
func (o *turnObserver) promptFailure() *agentFailure { return o.failure.Load() }

// Reset times as providers and agents word them.
var (
	// "retry after 20s", "try again in 5 minutes", "Please try again in 1.5s".
	resetIn = regexp.MustCompile(`(?i)\b(?:retry|try again)\s+(?:after|in)\s+(\d+(?:\.\d+)?)\s*(seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h)\b`)
	// "resets 3pm", "resets at 14:00", "try again at 3:45 PM", "resets 3:04pm (UTC)".
	resetAt = regexp.MustCompile(`(?i)\b(?:resets?(?:\s+at)?|try again at)\s+(\d{1,2})(?::(\d{2}))?\s*(am|pm)?(?:\s*\(([A-Za-z_]+(?:/[A-Za-z_]+)*)\))?`)
	// Claude Code's older "Claude AI usage limit reached|1735689600".
	resetEpoch = regexp.MustCompile(`\|(\d{10})\b`)
)

// resetTime reads when a limit resets from its title (false: it does not say). A time of day
// is in the zone the title names (UTC when it names none or one this system does not know)
// and the next one at or after now.
func resetTime(now time.Time, title string) (time.Time, bool) {
	if m := resetIn.FindStringSubmatch(title); m != nil {
		n, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return time.Time{}, false
		}
		unit := time.Second
		switch strings.ToLower(m[2])[0] {
		case 'm':
			unit = time.Minute
		case 'h':
			unit = time.Hour
		}
		return now.Add(time.Duration(n * float64(unit))).Truncate(time.Second), true
	}
	if m := resetAt.FindStringSubmatch(title); m != nil {
		h, _ := strconv.Atoi(m[1])
		mins := 0
		if m[2] != "" {
			mins, _ = strconv.Atoi(m[2])
		}
		switch strings.ToLower(m[3]) {
		case "am":
			if h == 12 {
				h = 0
			}
		case "pm":
			if h < 12 {
				h += 12
			}
		}
		if h > 23 || mins > 59 || (m[3] == "" && m[2] == "") {
			return time.Time{}, false // "resets 3" says no time
		}
		loc := time.UTC
		if m[4] != "" {
			if l, err := time.LoadLocation(m[4]); err == nil {
				loc = l
			}
		}
		local := now.In(loc)
		at := time.Date(local.Year(), local.Month(), local.Day(), h, mins, 0, 0, loc)
		if at.Before(now) {
			at = at.AddDate(0, 0, 1)
		}
		return at, true
	}
	if m := resetEpoch.FindStringSubmatch(title); m != nil {
		sec, _ := strconv.ParseInt(m[1], 10, 64)
		if at := time.Unix(sec, 0); at.After(now) {
			return at, true
		}
	}
	return time.Time{}, false
}

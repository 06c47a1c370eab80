package activities

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// The typed failure as claude-agent-acp 0.101.0 sends it on a limited turn's answer
// (session-failure-extension.js, rate_limited).
const claudeRateLimited = `{"jetbrains":{"air":{"version":1,"sessionFailure":{"id":"t1:error","revision":1,
"category":"limit","severity":"error","title":"Claude is temporarily rate limited.","actions":["retry"]}}}}`

func meta(t *testing.T, s string) map[string]any {
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m))
	return m
}

func TestPromptFailureReadsTheAIRSessionFailure(t *testing.T) {
	f := promptFailure(meta(t, claudeRateLimited))
	require.NotNil(t, f)
	require.Equal(t, "limit", f.Category)
	require.Equal(t, signals.LimitRateLimited, limitReason(f))
	require.Nil(t, promptFailure(nil))
	require.Nil(t, promptFailure(meta(t, `{"steering":{"supported":true}}`)))
	// overloaded: service, retry; quota_exhausted: limit, no action; a warning: a retry in progress.
	require.Equal(t, signals.LimitService, limitReason(&agentFailure{Category: "service", Actions: []string{"retry"}}))
	require.Empty(t, limitReason(&agentFailure{Category: "limit"}))
	require.Empty(t, limitReason(&agentFailure{Category: "limit", Severity: "warning", Actions: []string{"retry"}}))
	require.Empty(t, limitReason(&agentFailure{Category: "access", Actions: []string{"login"}}))
}

func TestLimitPolicyBacksOffWithinMaxWaitAndFailsPastIt(t *testing.T) {
	now := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	f := &agentFailure{Category: "limit", Actions: []string{"retry"}, Title: "rate limited"}
	p := limitPolicy{maxWait: 10 * time.Minute, backoff: time.Minute, maxBackoff: 15 * time.Minute}
	lim, err := p.decide(now, f, 0)
	require.NoError(t, err)
	require.Equal(t, now.Add(time.Minute), lim.RetryAt)
	require.True(t, lim.Backoff)
	lim, err = p.decide(now, f, 3)
	require.NoError(t, err)
	require.Equal(t, now.Add(8*time.Minute), lim.RetryAt, "doubled per wait the turn had")
	_, err = p.decide(now, f, 4)
	require.ErrorContains(t, err, "over -limits.max-wait", "16m > 10m: the turn fails")
	_, err = (limitPolicy{backoff: time.Minute}).decide(now, f, 0)
	require.ErrorContains(t, err, "-limits.max-wait is off")
	_, err = p.decide(now, &agentFailure{Category: "limit", Title: "no quota"}, 0)
	require.ErrorContains(t, err, "limit failure: no quota")
	lim, err = p.decide(now, nil, 0)
	require.NoError(t, err)
	require.Nil(t, lim)
}

// The provider's words give the reset time the typed failure lacks; the category stays the
// type's.
func TestResetTimeIsReadFromTheFailuresTitle(t *testing.T) {
	now := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		title string
		want  time.Time // zero: no reset time
	}{
		{"API Error: Request rejected (429) · fakemodel: rate limit reached; retry after 3s", now.Add(3 * time.Second)},
		{"Rate limit reached for gpt-5 in organization org-x. Please try again in 1.5s.", now.Add(1500 * time.Millisecond).Truncate(time.Second)},
		{"Try again in 5 minutes", now.Add(5 * time.Minute)},
		{"retry after 2 hours", now.Add(2 * time.Hour)},
		{"You've hit your usage limit · resets 3:04pm (UTC)", time.Date(2026, 12, 1, 15, 4, 0, 0, time.UTC)},
		{"You've hit your limit · resets 1pm", time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)}, // 1pm is past: the next one
		{"Usage limit reached, resets at 13:30", time.Date(2026, 12, 2, 13, 30, 0, 0, time.UTC)},
		{"You've hit your usage limit. Upgrade to Pro, or try again at 4:45 PM.", time.Date(2026, 12, 1, 16, 45, 0, 0, time.UTC)},
		{"resets 12am", time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)},
		{"Claude AI usage limit reached|1796140800", time.Unix(1796140800, 0)},
		{"Claude AI usage limit reached|1000000000", time.Time{}}, // in the past
		{"resets 3", time.Time{}},
		{"resets 25:00", time.Time{}},
		{"The Claude account has no available quota.", time.Time{}},
		{"", time.Time{}},
	} {
		at, ok := resetTime(now, c.title)
		if c.want.IsZero() {
			require.False(t, ok, "%q: %v", c.title, at)
			continue
		}
		require.True(t, ok, c.title)
		require.True(t, c.want.Equal(at), "%q: want %v, got %v", c.title, c.want, at)
	}
}

func TestLimitPolicyWaitsForTheResetTimeTheTitleGives(t *testing.T) {
	now := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	p := limitPolicy{maxWait: 30 * time.Minute, backoff: time.Minute, maxBackoff: 15 * time.Minute}
	lim, err := p.decide(now, &agentFailure{Category: "limit", Actions: []string{"retry"}, Title: "retry after 20s"}, 5)
	require.NoError(t, err)
	require.Equal(t, signals.LimitRateLimited, lim.Reason)
	require.Equal(t, now.Add(20*time.Second), lim.RetryAt, "the provider's time, not the doubled backoff")
	require.False(t, lim.Backoff)
	// A quota with no retry action is waited out only when it says when it resets.
	lim, err = p.decide(now, &agentFailure{Category: "limit", Title: "You've hit your usage limit · resets 2:10pm (UTC)"}, 0)
	require.NoError(t, err)
	require.Equal(t, signals.LimitUsage, lim.Reason)
	require.Equal(t, now.Add(10*time.Minute), lim.RetryAt)
	_, err = p.decide(now, &agentFailure{Category: "limit", Title: "You've hit your usage limit · resets 5pm (UTC)"}, 0)
	require.ErrorContains(t, err, "over -limits.max-wait")
	// The prose never makes a failure of another category a limit.
	_, err = p.decide(now, &agentFailure{Category: "access", Actions: []string{"login"}, Title: "try again in 5 minutes"}, 0)
	require.ErrorContains(t, err, "access failure")
}

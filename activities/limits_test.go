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

package fakemodel

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// limited: N answers the first main request of its line 429 with retry-after, then as the
// script says; a request that offers no tools (a side request) is never limited.
func TestLimitedAnswers429OnceWithRetryAfter(t *testing.T) {
	for _, p := range []Provider{Anthropic, OpenAI} {
		t.Run(string(p), func(t *testing.T) {
			s := New(p)
			defer s.Close()
			path, body := "/v1/messages", map[string]any{"model": "m", "stream": true, "max_tokens": 10,
				"messages": []any{map[string]any{"role": "user", "content": "reply: ok\nlimited: 3 x"}},
				"tools":    []any{map[string]any{"name": "Read", "input_schema": map[string]any{}}}}
			side := map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "reply: ok\nlimited: 3 x"}}}
			if p == OpenAI {
				path, body = "/v1/responses", map[string]any{"model": "m", "stream": true, "input": "reply: ok\nlimited: 3 x",
					"tools": []any{map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{}}}}
				side = map[string]any{"model": "m", "stream": true, "input": "reply: ok\nlimited: 3 x"}
			}
			r := post(t, s.URL+path, side)
			require.Equal(t, http.StatusOK, r.StatusCode, "a side request is not limited")
			r = post(t, s.URL+path, body)
			require.Equal(t, http.StatusTooManyRequests, r.StatusCode)
			require.Equal(t, "3", r.Header.Get("retry-after"))
			r = post(t, s.URL+path, body)
			require.Equal(t, http.StatusOK, r.StatusCode, "the second try succeeds")
			require.Equal(t, 1, s.Limited())
		})
	}
}

func TestAskAgainAfterTacpResumesTheTurn(t *testing.T) {
	q, ok := askAgain(resumeMarker+" …]", []string{"tool: ask Which? | a | b", resumeMarker + " …]"})
	require.True(t, ok)
	require.Equal(t, "tool: ask Which? | a | b", q)
	_, ok = askAgain(resumeMarker+" …]", []string{"slow: 60 tick", resumeMarker + " …]"})
	require.False(t, ok, "only a question is asked again")
	_, ok = askAgain("reply: x", []string{"tool: ask Which? | a | b", "reply: x"})
	require.False(t, ok)
	d := ParseDirective("tool: ask Which? | a | b")
	require.Equal(t, []string{"a", "b"}, d.Options)
}

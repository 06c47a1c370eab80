package fakemodel

// Limits: the provider refusing a request, as a test scripts it. A line of the last user
// message
//
//	limited: N [TAG]             answer the first main request (one that offers tools)
//	                             that carries this line with 429 Too Many Requests and
//	                             retry-after: N (seconds), every later one as the rest of
//	                             the script says
//	usage-limited: N [TAG]       the same, as a usage limit: its message says "resets
//	                             3:04pm (UTC)", the first minute at least N seconds ahead
//
// The line itself is what is limited once (a TAG tells two tests' lines apart): an agent
// that tries the prompt again may send it merged with the first try's text.
// lets a test drive an agent into a rate limit once and out of it: the second try of the
// same prompt succeeds. The error body is the provider's own (Anthropic's rate_limit_error,
// OpenAI's rate_limit_exceeded). Server.Limited counts the requests answered 429.

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// limitLine is the message's "limited: N [TAG]" or "usage-limited: N [TAG]" line and its N
// (0: none).
func limitLine(text string) (string, int) {
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		verb, rest, ok := strings.Cut(l, ":")
		if !ok || (verb != "limited" && verb != "usage-limited") {
			continue
		}
		nStr, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
		if n, err := strconv.Atoi(nStr); err == nil && n > 0 {
			return l, n
		}
	}
	return "", 0
}

// Limited is how many requests the server answered 429.
func (s *Server) Limited() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.limited)
}

// limit answers request idx 429 when its last user message asks for it and it was not
// limited before; it reports whether it did.
func (s *Server) limit(w http.ResponseWriter, idx int, lastUser string) bool {
	line, n := limitLine(lastUser)
	if n == 0 || !s.Requests()[idx].IsMain() {
		return false
	}
	s.mu.Lock()
	if s.limited == nil {
		s.limited = map[string]bool{}
	}
	done := s.limited[line]
	s.limited[line] = true
	s.mu.Unlock()
	if done {
		return false
	}
	msg := "fakemodel: rate limit reached; retry after " + strconv.Itoa(n) + "s"
	w.Header().Set("retry-after", strconv.Itoa(n))
	if strings.HasPrefix(line, "usage-limited") {
		// A subscription's usage limit, in the words Claude Code uses: a reset time of day
		// (the next minute at or after N seconds from now, UTC), no retry-after.
		at := time.Now().UTC().Add(time.Duration(n) * time.Second).Truncate(time.Minute).Add(time.Minute)
		msg = "You've hit your usage limit · resets " + at.Format("3:04pm") + " (UTC)"
		w.Header().Del("retry-after")
	}
	s.answered(idx, Reply{Text: "429 " + msg}, Usage{})
	switch s.Provider {
	case Anthropic:
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"type": "error", "error": map[string]any{"type": "rate_limit_error", "message": msg}})
	default:
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{"type": "rate_limit_exceeded", "code": "rate_limit_exceeded", "message": msg}})
	}
	return true
}

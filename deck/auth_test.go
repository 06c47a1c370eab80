package deck

// Who a request is (identity, whoami with the tokens file's groups), and the
// failed-credential limit as a client meets it: wrong tokens from one source run into 429
// with Retry-After, after which even the right token from there is refused while another
// source signs in; a request with no token is never counted; /acp is limited as the API is.
// The limit's memory stays bounded under a flood of addresses.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

// serve sends one request to s from remote ("" leaves httptest's address) and returns the
// answer. token goes in the Authorization header, or in a login body for POST /api/login.
func serve(s *Server, method, path, token, remote string) *httptest.ResponseRecorder {
	var r *http.Request
	if path == "/api/login" {
		body, _ := json.Marshal(loginRequest{Token: token})
		r = httptest.NewRequest(method, path, strings.NewReader(string(body)))
		r.Header.Set("Content-Type", "application/json")
	} else {
		r = httptest.NewRequest(method, path, nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
	}
	if remote != "" {
		r.RemoteAddr = remote
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// writeTokensFile writes content to a tokens file in a test's directory and returns its path.
func writeTokensFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// line is the tokens file's line for secret.
func line(t *testing.T, name, role, secret string, groups ...string) string {
	t.Helper()
	l, err := TokenLine(name, role, groups, secret)
	require.NoError(t, err)
	return l + "\n"
}

func TestIdentityIsTheTokensPersonRoleAndGroups(t *testing.T) {
	path := writeTokensFile(t, line(t, "alice", "controller", "alice-secret-0123456789", "team", "reviewers"))
	s, err := New(Options{Client: &tacpclient.Client{}, ObserverTokens: []string{"bob=bob-secret-0123456789"}, TokensFile: path})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	for tok, want := range map[string]identity{
		"alice-secret-0123456789": {Name: "alice", Role: signals.RoleController, Groups: []string{"team", "reviewers"}, By: "deck:alice"},
		"bob-secret-0123456789":   {Name: "bob", Role: signals.RoleObserver, By: "deck:bob"},
	} {
		r := httptest.NewRequest("GET", "/api/whoami", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		id, ok := s.identity(r)
		require.True(t, ok, tok)
		require.Equal(t, want, id, tok)
		require.Equal(t, want.By, s.who(r), "who stays the journal's name")
	}
	r := httptest.NewRequest("GET", "/api/whoami", nil)
	r.Header.Set("Authorization", "Bearer nobody-0123456789")
	_, ok := s.identity(r)
	require.False(t, ok, "a token of no one is no identity")

	w := serve(s, "GET", "/api/whoami", "alice-secret-0123456789", "")
	require.Equal(t, http.StatusOK, w.Code)
	require.JSONEq(t, `{"role":"controller","name":"alice","groups":["team","reviewers"],"by":"deck:alice"}`, w.Body.String())
}

// Past its burst, a source's every credential is refused 429 without a comparison: of
// 2,000 wrong logins at most the burst and one a second of the run are answered 401.
// Then its right token is refused too, while another source signs in; a request with no
// token at all is a signed-out page, answered 401 and not counted.
func TestWrongTokensFromOneSourceRunIntoTheLimit(t *testing.T) {
	const burst = 10
	s, err := New(Options{Client: &tacpclient.Client{}, ControllerTokens: []string{"alice=right-token-0123456789"}, LoginBurst: burst, LoginRate: 1})
	require.NoError(t, err)
	const guesser, other = "203.0.113.7:40000", "198.51.100.9:40000"

	start := time.Now()
	codes := map[int]int{}
	for i := range 2000 {
		w := serve(s, "POST", "/api/login", fmt.Sprintf("guess-%04d-0123456789", i), guesser)
		codes[w.Code]++
		if w.Code == http.StatusTooManyRequests {
			require.Equal(t, "application/json", w.Header().Get("Content-Type"))
			require.JSONEq(t, `"too_many_requests"`, mustField(t, w.Body.Bytes(), "type"))
			secs, err := strconv.Atoi(w.Header().Get("Retry-After"))
			require.NoError(t, err, "Retry-After is whole seconds")
			require.GreaterOrEqual(t, secs, 1)
		}
	}
	elapsed := time.Since(start)
	require.Equal(t, 2000, codes[http.StatusUnauthorized]+codes[http.StatusTooManyRequests], "every answer is 401 or 429: %v", codes)
	require.GreaterOrEqual(t, codes[http.StatusUnauthorized], burst, "the burst is answered")
	require.LessOrEqual(t, codes[http.StatusUnauthorized], burst+int(elapsed.Seconds())+1, "beyond the burst, one a second (%v)", elapsed)

	w := serve(s, "POST", "/api/login", "right-token-0123456789", guesser)
	require.Equal(t, http.StatusTooManyRequests, w.Code, "a limited source's right token is refused too")
	require.Empty(t, w.Result().Cookies(), "and signs nobody in")
	require.Equal(t, http.StatusTooManyRequests, serve(s, "GET", "/api/whoami", "right-token-0123456789", guesser).Code, "on every route")
	require.Equal(t, http.StatusUnauthorized, serve(s, "GET", "/api/whoami", "", guesser).Code, "no token: a signed-out page, not a guess")

	w = serve(s, "POST", "/api/login", "right-token-0123456789", other)
	require.Equal(t, http.StatusOK, w.Code, "another source signs in")
	require.NotEmpty(t, w.Result().Cookies())
}

// Requests that present no token never count: a signed-out page polling does not lock its
// address out.
func TestNoTokenIsNoFailedCredential(t *testing.T) {
	s, err := New(Options{Client: &tacpclient.Client{}, ControllerTokens: []string{"right-token-0123456789"}, LoginBurst: 2})
	require.NoError(t, err)
	for range 50 {
		require.Equal(t, http.StatusUnauthorized, serve(s, "GET", "/api/whoami", "", "").Code)
		require.Equal(t, http.StatusUnauthorized, serve(s, "POST", "/api/login", "", "").Code)
	}
	require.Equal(t, 0, s.limits.len())
	require.Equal(t, http.StatusOK, serve(s, "GET", "/api/whoami", "right-token-0123456789", "").Code)
}

// /acp checks its token before the upgrade: a wrong one counts, and a limited source is
// refused 429 before any WebSocket handshake, its right token included.
func TestACPUpgradeIsLimitedLikeTheAPI(t *testing.T) {
	s, err := New(Options{Client: &tacpclient.Client{}, ControllerTokens: []string{"right-token-0123456789"}, LoginBurst: 3, LoginRate: 0.001})
	require.NoError(t, err)
	const src = "203.0.113.8:1"
	for range 3 {
		require.Equal(t, http.StatusUnauthorized, serve(s, "GET", "/acp", "wrong-token-0123456789", src).Code)
	}
	require.Equal(t, http.StatusTooManyRequests, serve(s, "GET", "/acp", "right-token-0123456789", src).Code)
	require.Equal(t, http.StatusTooManyRequests, serve(s, "POST", "/api/sessions/s1/cancel", "right-token-0123456789", src).Code, "a write is limited too")
	require.Equal(t, http.StatusUpgradeRequired, serve(s, "GET", "/acp", "right-token-0123456789", "").Code, "another source reaches the upgrade")
}

// A flood of addresses, each with one wrong token, leaves the limit remembering at most
// maxSources of them; sources unseen for long are dropped.
func TestTheLimitsMemoryIsBounded(t *testing.T) {
	s, err := New(Options{Client: &tacpclient.Client{}, ControllerTokens: []string{"right-token-0123456789"}})
	require.NoError(t, err)
	for i := range 20_000 {
		remote := fmt.Sprintf("10.%d.%d.%d:1", i>>16&0xff, i>>8&0xff, i&0xff)
		require.Equal(t, http.StatusUnauthorized, serve(s, "GET", "/api/whoami", "wrong-token-0123456789", remote).Code)
	}
	require.LessOrEqual(t, s.limits.len(), maxSources)
	require.Positive(t, s.limits.len())

	l := newLimiter(10, 1)
	now := time.Now()
	for i := range 100 {
		l.fail(fmt.Sprint("192.0.2.", i), now)
	}
	l.fail("198.51.100.1", now.Add(sourceIdle+time.Second))
	require.Equal(t, 1, l.len(), "the sources unseen for longer than sourceIdle are dropped")
}

// A source's limit is forgiven by dropping it only once its limiter is full again: a slow
// refill keeps a source longer than sourceIdle.
func TestASlowlyRefillingSourceIsKeptUntilFull(t *testing.T) {
	l := newLimiter(10, 0.001) // full again 10,000 s after its last failure
	now := time.Now()
	for range 10 {
		l.fail("192.0.2.1", now)
	}
	later := now.Add(sourceIdle + time.Minute)
	l.fail("192.0.2.2", later)
	require.Equal(t, 2, l.len(), "kept past sourceIdle")
	_, _, over := l.over("192.0.2.1", later)
	require.True(t, over, "and still over its limit")
	l.fail("192.0.2.3", later.Add(10_001*time.Second))
	require.Equal(t, 1, l.len(), "dropped once it would be full")
}

func mustField(t *testing.T, body []byte, field string) string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m), string(body))
	return string(m[field])
}

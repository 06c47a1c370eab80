package deck

// What the deck decides without a session: tokens and roles, the status of each rejection
// type, and request decoding. The API against real sessions is tested in e2e/deck_test.go.

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

func TestTokensGiveTheirRole(t *testing.T) {
	ts, err := newTokens([]string{"op1", "", "op2"}, []string{"obs"})
	require.NoError(t, err)
	for tok, want := range map[string]string{"op1": signals.RoleController, "op2": signals.RoleController, "obs": signals.RoleObserver, "": "", "op": "", "op1 ": ""} {
		require.Equal(t, want, ts.role(tok), "token %q", tok)
	}
	_, err = newTokens(nil, []string{"obs"})
	require.Error(t, err, "a controller token is required")
	_, err = newTokens([]string{"a"}, []string{"a"})
	require.Error(t, err, "a token has one role")
}

// The deck's roles are signals' viewer roles; OperatorTokens, the old name of
// ControllerTokens, still grants the controller role.
func TestDeprecatedOperatorTokensAreControllers(t *testing.T) {
	s, err := New(Options{Client: &tacpclient.Client{}, ControllerTokens: []string{"c"}, OperatorTokens: []string{"old"}})
	require.NoError(t, err)
	require.Equal(t, signals.RoleController, s.tokens.role("c"))
	require.Equal(t, signals.RoleController, s.tokens.role("old"))
	_, err = New(Options{Client: &tacpclient.Client{}, OperatorTokens: []string{"old"}})
	require.NoError(t, err, "the old field alone is enough")
}

func TestRejectionStatus(t *testing.T) {
	for typ, want := range map[string]int{
		signals.RejectUnknownSession: 404, signals.RejectUnknownRequest: 404,
		signals.RejectQueueFull: 409, signals.RejectStaleTurn: 409, signals.RejectNoLiveTurn: 409,
		signals.RejectClientMsgIDReuse: 409, signals.RejectNoSteerChannel: 409, signals.RejectSessionClosed: 409,
		signals.RejectForbidden: 403, signals.RejectInvalidRequest: 400, signals.RejectInvalidOption: 400,
	} {
		require.Equal(t, want, RejectionStatus(typ), typ)
	}
}

func TestDecodeRefusesWhatIsNotOneJSONObjectOfKnownFields(t *testing.T) {
	for _, c := range []struct {
		body, ctype string
		code        int
	}{
		{`{"text":"hi","expected_turn_id":"1"}`, "application/json", 0},
		{`{"text":"hi","expected_turn_id":"1"}`, "application/json; charset=utf-8", 0},
		{`{"text":"hi"`, "application/json", 400},
		{`{"text":"hi","extra":1}`, "application/json", 400},
		{`{"text":"hi"} {}`, "application/json", 400},
		{``, "application/json", 400},
		{`{"text":"hi"}`, "text/plain", 415},
		{`{"text":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, "application/json", 413},
	} {
		r := httptest.NewRequest("POST", "/", strings.NewReader(c.body))
		r.Header.Set("Content-Type", c.ctype)
		w := httptest.NewRecorder()
		var v steerRequest
		ok := decode(w, r, &v)
		if c.code == 0 {
			require.True(t, ok, w.Body.String())
			require.Equal(t, steerRequest{Text: "hi", ExpectedTurnID: "1"}, v)
			continue
		}
		require.False(t, ok)
		require.Equal(t, c.code, w.Code, c.body[:min(len(c.body), 40)])
	}
}

func TestNewServesThePageAndGuardsTheAPI(t *testing.T) {
	s, err := New(Options{Client: &tacpclient.Client{}, ControllerTokens: []string{"op"}, ObserverTokens: []string{"obs"}})
	require.NoError(t, err)
	for _, c := range []struct {
		method, path, token string
		code                int
	}{
		{"GET", "/", "", 200},
		{"GET", "/app.js", "", 200},
		{"GET", "/style.css", "", 200},
		{"POST", "/", "", 405},
		{"GET", "/api/whoami", "", 401},
		{"GET", "/api/whoami", "obs", 200},
		{"GET", "/api/nope", "op", 404},
		{"POST", "/api/sessions/s1/cancel", "obs", 403},
		{"POST", "/api/sessions/s1/cancel", "", 401},
		{"GET", "/acp", "", 401},
		{"GET", "/acp", "wrong", 401},
		{"GET", "/acp", "op", 426}, // a good token, but no WebSocket upgrade
		{"POST", "/acp", "op", 405},
	} {
		r := httptest.NewRequest(c.method, c.path, nil)
		if c.token != "" {
			r.Header.Set("Authorization", "Bearer "+c.token)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		require.Equal(t, c.code, w.Code, "%s %s", c.method, c.path)
		if strings.HasPrefix(c.path, "/api/") {
			require.Equal(t, "application/json", w.Header().Get("Content-Type"))
		}
		require.NotEmpty(t, w.Header().Get("Content-Security-Policy"))
	}
	r := httptest.NewRequest("POST", "/api/login", strings.NewReader(`{"token":"op"}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Origin", "http://elsewhere.invalid")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	require.Equal(t, http.StatusForbidden, w.Code, "no login from another origin")
	for origin, code := range map[string]int{"http://elsewhere.invalid": http.StatusForbidden, "": http.StatusOK} {
		r = httptest.NewRequest("POST", "/api/logout", strings.NewReader("x"))
		r.Header.Set("Content-Type", "text/plain")
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		w = httptest.NewRecorder()
		s.ServeHTTP(w, r)
		require.Equal(t, code, w.Code, "logout from origin %q", origin)
	}
}

// A token may name its person (--token alice=SECRET); a base64 token's padding is no name.
func TestTokenNames(t *testing.T) {
	for _, tt := range []struct{ in, name, secret string }{
		{"alice=s3cret", "alice", "s3cret"},
		{"abcd==", "", "abcd=="},
		{"plain", "", "plain"},
		{"not a name=x", "", "not a name=x"},
	} {
		name, secret := TokenName(tt.in)
		require.Equal(t, tt.name, name, tt.in)
		require.Equal(t, tt.secret, secret, tt.in)
	}
	ts, err := newTokens([]string{"alice=s3cret"}, nil)
	require.NoError(t, err)
	require.Equal(t, "controller", ts.role("s3cret"), "the secret is the token")
	require.Empty(t, ts.role("alice=s3cret"))
}

// A named token is a person: whoami names them and their answers are recorded under the
// name; an unnamed token is recorded under its role.
func TestWhoamiNamesThePerson(t *testing.T) {
	s, err := New(Options{Client: &tacpclient.Client{}, ControllerTokens: []string{"alice=s3cret", "anon"}, ObserverTokens: []string{"bob=look"}})
	require.NoError(t, err)
	for tok, want := range map[string]string{
		"s3cret": `{"role":"controller","name":"alice","by":"deck:alice"}`,
		"anon":   `{"role":"controller","by":"deck:controller token"}`,
		"look":   `{"role":"observer","name":"bob","by":"deck:bob"}`,
	} {
		req := httptest.NewRequest("GET", "/api/whoami", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code)
		require.JSONEq(t, want, rec.Body.String(), tok)
	}
}

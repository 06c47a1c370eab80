package deck

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func bearer(t string) *http.Request {
	r := httptest.NewRequest("GET", "/api/sessions/s/stream", nil)
	r.Header.Set("Authorization", "Bearer "+t)
	return r
}

func TestATokenHoldsAtMostItsCapAndAnEndedConnectionFreesItsSlot(t *testing.T) {
	p := newPerToken(2, DefaultMaxStreamsPerToken, "streams")
	first, ok := p.take(bearer("alice-token"))
	require.True(t, ok)
	_, ok = p.take(bearer("alice-token"))
	require.True(t, ok)
	_, ok = p.take(bearer("alice-token"))
	require.False(t, ok, "the cap's next one is refused")

	cookie := httptest.NewRequest("GET", "/api/sessions/s/stream", nil)
	cookie.AddCookie(&http.Cookie{Name: CookieName, Value: "alice-token"})
	_, ok = p.take(cookie)
	require.False(t, ok, "the same token in the cookie counts the same")

	_, ok = p.take(bearer("bob-token"))
	require.True(t, ok, "another token has its own cap")

	first()
	first() // a release runs once
	_, ok = p.take(bearer("alice-token"))
	require.True(t, ok, "an ended connection frees its slot")
	_, ok = p.take(bearer("alice-token"))
	require.False(t, ok, "one release frees one slot")
}

func TestCapDefaults(t *testing.T) {
	require.Equal(t, DefaultMaxStreamsPerToken, newPerToken(0, DefaultMaxStreamsPerToken, "streams").max)
	require.Equal(t, DefaultMaxACPPerToken, newPerToken(-1, DefaultMaxACPPerToken, "ACP sockets").max)
	require.Equal(t, 500, newPerToken(500, DefaultMaxStreamsPerToken, "streams").max)
}

func TestOverTheCapIs429WithRetryAfter(t *testing.T) {
	w := httptest.NewRecorder()
	newPerToken(1, 1, "streams").refuse(w)
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.NotEmpty(t, w.Header().Get("Retry-After"))
	var body apiError
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	require.Equal(t, "too_many_requests", body.Type)
	require.NotEmpty(t, body.Message)
}

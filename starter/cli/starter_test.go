package cli

// What the starter binary is: a client that carries no Temporal server (editors launch it
// as their ACP agent), whose old demo command says where the demo went.

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStarterLinksNoTemporalServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", "..").Output()
	require.NoError(t, err)
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"go.temporal.io/server", "github.com/tacp-dev/tacp/devserver", "github.com/tacp-dev/tacp/workflows", "github.com/tacp-dev/tacp/activities"} {
			require.False(t, pkg == banned || strings.HasPrefix(pkg, banned+"/"), "starter links %s: it must stay a client (the demo is ./demo)", pkg)
		}
	}
}

func TestDemoSaysWhereItWent(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"demo", "--exit"}, &stdout, &stderr)
	require.Equal(t, exitRejected, code)
	require.Contains(t, stderr.String(), "go run ./demo")
	require.Empty(t, stdout.String())
}

// A tokenless codec server answers only requests named to a loopback host: a foreign name
// that resolves to 127.0.0.1 (DNS rebinding) is refused before the keys are reached. A page
// of an origin not in its --origins is refused too; a program (no Origin) is answered.
func TestTokenlessCodecServerAnswersLoopbackNamesOnly(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	h := tokenlessGuard([]string{"http://localhost:8233", " http://127.0.0.1:8233"}, ok)
	for origin, want := range map[string]int{
		"": http.StatusOK, "http://localhost:8233": http.StatusOK, "http://127.0.0.1:8233": http.StatusOK,
		"http://evil.example": http.StatusForbidden, "http://localhost:9999": http.StatusForbidden, "null": http.StatusForbidden,
	} {
		r := httptest.NewRequest("POST", "/decode", nil)
		r.Host = "127.0.0.1:8081"
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != want {
			t.Errorf("Origin %q: %d, want %d", origin, rec.Code, want)
		}
	}
	for host, want := range map[string]int{
		"127.0.0.1:8081": http.StatusOK, "localhost:8081": http.StatusOK, "[::1]:8081": http.StatusOK, "localhost": http.StatusOK,
		"evil.example:8081": http.StatusMisdirectedRequest, "evil.example": http.StatusMisdirectedRequest, "10.0.0.5:8081": http.StatusMisdirectedRequest,
	} {
		r := httptest.NewRequest("POST", "/decode", nil)
		r.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != want {
			t.Errorf("Host %s: %d, want %d", host, rec.Code, want)
		}
	}
}

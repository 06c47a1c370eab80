package cli

// `starter token` makes a line of the deck's tokens file: the line it prints parses, and the
// secret it shows once signs its person in through a deck that reads the file. With
// --secret-stdin the person's own secret is hashed, and a short one refused.

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/deck"
	"github.com/tacp-dev/tacp/tacpclient"
)

// whoamiThroughFile writes lines to a tokens file, serves a deck over it and returns what
// /api/whoami answers secret.
func whoamiThroughFile(t *testing.T, lines, secret string) (int, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(path, []byte(lines), 0o600))
	d, err := deck.New(deck.Options{Client: &tacpclient.Client{}, ControllerTokens: []string{"ops=flag-secret-0123456789"}, TokensFile: path})
	require.NoError(t, err)
	defer func() { _ = d.Close() }()
	r := httptest.NewRequest("GET", "/api/whoami", nil)
	r.Header.Set("Authorization", "Bearer "+secret)
	w := httptest.NewRecorder()
	d.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

func TestTokenPrintsALineWhoseSecretSignsIn(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run([]string{"token", "--name", "alice", "--role", "controller", "--groups", "team,reviewers"}, &stdout, &stderr), stderr.String())
	line := stdout.String()
	require.Equal(t, 1, strings.Count(line, "\n"), "one line on stdout")
	require.Regexp(t, `^alice controller sha256:[0-9a-f]{64} team,reviewers\n$`, line)
	shown := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	secret := shown[len(shown)-1]
	require.GreaterOrEqual(t, len(secret), minSecret)
	require.NotContains(t, line, secret, "the line holds only the hash")

	code, body := whoamiThroughFile(t, line, secret)
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"role":"controller","name":"alice","groups":["team","reviewers"],"by":"deck:alice"}`, body)

	var again bytes.Buffer
	require.Equal(t, exitOK, run([]string{"token", "--name", "alice", "--role", "controller"}, &again, &stderr))
	require.NotEqual(t, strings.Fields(line)[2], strings.Fields(again.String())[2], "each run makes a new secret")
}

func TestTokenHashesTheSecretOnStdin(t *testing.T) {
	stdin := func(s string) {
		f, err := os.CreateTemp(t.TempDir(), "stdin")
		require.NoError(t, err)
		_, err = f.WriteString(s)
		require.NoError(t, err)
		_, err = f.Seek(0, 0)
		require.NoError(t, err)
		old := os.Stdin
		os.Stdin = f
		t.Cleanup(func() { os.Stdin = old; _ = f.Close() })
	}
	var stdout, stderr bytes.Buffer
	stdin("bobs-own-secret-0123456789\n")
	require.Equal(t, exitOK, run([]string{"token", "--name", "bob", "--role", "observer", "--secret-stdin"}, &stdout, &stderr), stderr.String())
	require.Empty(t, stderr.String(), "a secret the person gave is not shown back")
	code, body := whoamiThroughFile(t, stdout.String(), "bobs-own-secret-0123456789")
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"role":"observer","name":"bob","by":"deck:bob"}`, body)

	stdout.Reset()
	stdin("too-short\n")
	require.Equal(t, exitError, run([]string{"token", "--name", "bob", "--role", "observer", "--secret-stdin"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "want at least 16")
	require.Empty(t, stdout.String())
}

func TestTokenRefusesWhatTheFileWould(t *testing.T) {
	for _, args := range [][]string{
		{"--role", "controller"},
		{"--name", "alice"},
		{"--name", "alice", "--role", "admin"},
		{"--name", "al/ice", "--role", "controller"},
		{"--name", "alice", "--role", "controller", "--groups", "te am"},
		{"--name", "alice", "--role", "controller", "extra"},
	} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, exitError, run(append([]string{"token"}, args...), &stdout, &stderr), "%v", args)
		require.Empty(t, stdout.String(), "%v", args)
		require.NotContains(t, stderr.String(), "shown only now", "no secret is shown for a line not made: %v", args)
	}
}

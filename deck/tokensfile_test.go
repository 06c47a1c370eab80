package deck

// The tokens file: what a line may say and how each malformed line is refused by its
// number; a change of the file takes effect within a poll, a removed token fails from then
// on, and a broken or controller-less rewrite keeps the tokens the deck had, on the watch as
// on Reload (SIGHUP). Nothing the deck logs about the file quotes a secret or a hash.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

func hashOf(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestTokensFileLines(t *testing.T) {
	a, b := hashOf("alice-secret-0123456789"), hashOf("bob-secret-0123456789")
	good := "# the deck's people\n\n" +
		"alice controller " + a + " team,reviewers   # a comment after a line\n" +
		"  \t\n" +
		"bob\tobserver\t" + b + "\n"
	ts, err := parseTokensFile("tokens", []byte(good), nil)
	require.NoError(t, err)
	require.Len(t, ts, 2)
	require.Equal(t, "alice", ts[0].name)
	require.Equal(t, signals.RoleController, ts[0].role)
	require.Equal(t, []string{"team", "reviewers"}, ts[0].groups)
	require.Equal(t, signals.RoleObserver, ts[1].role)
	require.Empty(t, ts[1].groups)
	k, ok := ts.find("alice-secret-0123456789")
	require.True(t, ok, "the line's hash is the secret's")
	require.Equal(t, "alice", k.name)
	_, ok = ts.find(a)
	require.False(t, ok, "the hash itself signs no one in")

	fixed, err := flagTokens([]string{"carol=carol-secret-0123456789"}, nil)
	require.NoError(t, err)
	for _, c := range []struct {
		name, content string
		line          int
		reason        string
	}{
		{"too few fields", "alice controller\n", 1, "found 2 fields"},
		{"too many fields", "# ok\nalice controller " + a + " team extra\n", 2, "found 5 fields"},
		{"bad name", "al/ice controller " + a + "\n", 1, "name:"},
		{"unknown role", "alice admin " + a + "\n", 1, `role "admin"`},
		{"old role name", "alice operator " + a + "\n", 1, `role "operator"`},
		{"no prefix", "alice controller " + a[len("sha256:"):] + "\n", 1, "the hash"},
		{"other algorithm", "alice controller md5:" + a[len("sha256:"):] + "\n", 1, "the hash"},
		{"upper-case hex", "alice controller " + strings.ToUpper(a[:9]) + a[9:] + "\n", 1, "lowercase"},
		{"short hash", "alice controller " + a[:40] + "\n", 1, "the hash"},
		{"empty group", "alice controller " + a + " team,,x\n", 1, "group:"},
		{"bad group", "alice controller " + a + " te@m\n", 1, "group:"},
		{"group twice", "alice controller " + a + " team,team\n", 1, `group "team" is listed twice`},
		{"name twice", "alice controller " + a + "\n\nalice observer " + b + "\n", 3, "alice is named twice (also line 1)"},
		{"hash twice", "alice controller " + a + "\nbob observer " + a + "\n", 2, "the same token as line 1"},
		{"a flag's name", "carol observer " + b + "\n", 1, "carol is named twice (also a token given as a flag)"},
		{"a flag's secret", "dave observer " + hashOf("carol-secret-0123456789") + "\n", 1, "the same token as a token given as a flag"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseTokensFile("/etc/tacp/tokens", []byte(c.content), fixed)
			var fe *TokensFileError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, "/etc/tacp/tokens", fe.Path)
			require.Equal(t, c.line, fe.Line)
			require.Contains(t, fe.Reason, c.reason)
			require.Contains(t, err.Error(), "/etc/tacp/tokens:"+strconv.Itoa(c.line)+":", "the error names the file and line")
			require.NotContains(t, err.Error(), a[len("sha256:"):len("sha256:")+16], "no hash quoted")
		})
	}
}

func TestTokenLineRefusesWhatTheFileRefuses(t *testing.T) {
	l, err := TokenLine("alice", "controller", []string{"team", "reviewers"}, "alice-secret-0123456789")
	require.NoError(t, err)
	require.Equal(t, "alice controller "+hashOf("alice-secret-0123456789")+" team,reviewers", l)
	for _, c := range []struct{ name, role, group, secret string }{
		{"al ice", "controller", "", "s"}, {"alice", "admin", "", "s"}, {"alice", "observer", "t m", "s"}, {"alice", "observer", "", ""},
	} {
		var groups []string
		if c.group != "" {
			groups = []string{c.group}
		}
		_, err := TokenLine(c.name, c.role, groups, c.secret)
		require.Error(t, err, "%+v", c)
	}
}

// syncBuffer is a log destination the watch may write while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const (
	aliceSecret = "alice-secret-0123456789"
	bobSecret   = "bob-secret-0123456789"
	flagSecret  = "flag-secret-0123456789"
)

// watched is a deck over the tokens file at path, polled every 20ms, whose log is logs.
func watched(t *testing.T, path string, flags ...string) (*Server, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	s, err := New(Options{
		Client: &tacpclient.Client{}, ControllerTokens: flags, TokensFile: path, TokensPoll: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil)), LoginBurst: 1000,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, logs
}

func whoamiCode(s *Server, token string) int { return serve(s, "GET", "/api/whoami", token, "").Code }

// replace puts content in place of the file at path at once, as a ConfigMap's update does.
func replace(t *testing.T, path, content string) {
	t.Helper()
	next := path + ".next"
	require.NoError(t, os.WriteFile(next, []byte(content), 0o600))
	require.NoError(t, os.Rename(next, path))
}

func TestAChangedTokensFileTakesEffectWithinAPoll(t *testing.T) {
	path := writeTokensFile(t, line(t, "alice", "controller", aliceSecret)+line(t, "bob", "observer", bobSecret, "team"))
	s, logs := watched(t, path, "ops="+flagSecret)
	require.Equal(t, http.StatusOK, whoamiCode(s, bobSecret))

	// bob leaves the file: his token fails from the next poll on; the flag's token stays.
	replace(t, path, line(t, "alice", "controller", aliceSecret))
	require.Eventually(t, func() bool { return whoamiCode(s, bobSecret) == http.StatusUnauthorized }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, http.StatusOK, whoamiCode(s, aliceSecret))
	require.Equal(t, http.StatusOK, whoamiCode(s, flagSecret), "a flag's token stays across readings")
	require.Contains(t, logs.String(), "deck tokens reloaded")

	// A broken rewrite is refused and logged once: the deck keeps alice.
	replace(t, path, line(t, "bob", "observer", bobSecret)+"carol admin "+hashOf("c")+"\n")
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "deck tokens file refused") }, 5*time.Second, 10*time.Millisecond)
	require.Contains(t, logs.String(), "tokens:2: role")
	require.Equal(t, http.StatusOK, whoamiCode(s, aliceSecret), "the previous tokens stay")
	require.Equal(t, http.StatusUnauthorized, whoamiCode(s, bobSecret), "nothing of the broken file is taken")

	// Fixed, the file is read again.
	replace(t, path, line(t, "bob", "observer", bobSecret))
	require.Eventually(t, func() bool { return whoamiCode(s, bobSecret) == http.StatusOK }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, http.StatusUnauthorized, whoamiCode(s, aliceSecret))
	require.Equal(t, 1, strings.Count(logs.String(), "deck tokens file refused"), "a refusal is logged once, not every poll")
	for _, secret := range []string{aliceSecret, bobSecret, flagSecret, hashOf(aliceSecret)[7:], hashOf(bobSecret)[7:]} {
		require.NotContains(t, logs.String(), secret, "the log quotes no secret and no hash")
	}
}

// Reload (starter web's SIGHUP) reads the file at once; a file that cannot be read, does
// not parse or leaves no controller changes nothing and says why.
func TestReloadKeepsTheTokensWhenTheFileIsRefused(t *testing.T) {
	path := writeTokensFile(t, line(t, "alice", "controller", aliceSecret))
	logs := &syncBuffer{}
	s, err := New(Options{Client: &tacpclient.Client{}, TokensFile: path, TokensPoll: time.Hour, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err, "the file's controller is enough")
	t.Cleanup(func() { _ = s.Close() })

	require.NoError(t, os.WriteFile(path, []byte(line(t, "alice", "controller", aliceSecret)+line(t, "bob", "observer", bobSecret)), 0o600))
	require.NoError(t, s.Reload())
	require.Equal(t, http.StatusOK, whoamiCode(s, bobSecret), "Reload needs no poll")

	var fe *TokensFileError
	require.NoError(t, os.WriteFile(path, []byte(line(t, "bob", "observer", bobSecret)), 0o600))
	require.ErrorAs(t, s.Reload(), &fe, "no controller would be left")
	require.Contains(t, fe.Reason, "no controller token")
	require.NoError(t, os.WriteFile(path, []byte("alice controller\n"), 0o600))
	require.ErrorAs(t, s.Reload(), &fe)
	require.Equal(t, 1, fe.Line)
	require.NoError(t, os.Remove(path))
	err = s.Reload()
	require.ErrorIs(t, err, os.ErrNotExist)
	require.False(t, errors.As(err, &fe), "a file that is not there is not a file that is wrong")
	require.Equal(t, http.StatusOK, whoamiCode(s, aliceSecret), "after three refusals the deck still has alice")
	require.Equal(t, http.StatusOK, whoamiCode(s, bobSecret), "and bob")
	require.Equal(t, 3, strings.Count(logs.String(), "deck tokens file refused"), "each Reload says why")
}

func TestNewRefusesAFileThatLeavesNoController(t *testing.T) {
	path := writeTokensFile(t, line(t, "bob", "observer", bobSecret))
	_, err := New(Options{Client: &tacpclient.Client{}, TokensFile: path})
	var fe *TokensFileError
	require.ErrorAs(t, err, &fe)
	_, err = New(Options{Client: &tacpclient.Client{}})
	require.Error(t, err, "no file and no flag: no controller")
	s, err := New(Options{Client: &tacpclient.Client{}, ControllerTokens: []string{flagSecret}, TokensFile: path})
	require.NoError(t, err, "a flag's controller is enough")
	require.NoError(t, s.Close())
	_, err = New(Options{Client: &tacpclient.Client{}, ControllerTokens: []string{"bob=" + flagSecret}, TokensFile: path})
	require.ErrorAs(t, err, &fe, "bob is named by a flag and by the file")
	_, err = New(Options{Client: &tacpclient.Client{}, ControllerTokens: []string{flagSecret}, TokensFile: path + ".missing"})
	require.ErrorIs(t, err, os.ErrNotExist)
}

// The watch takes new content only once two of its readings agree: a file caught while an
// editor rewrites it (truncated, part written) is not taken for one that lists fewer people.
func TestTheWatchTakesContentThatHolds(t *testing.T) {
	path := writeTokensFile(t, line(t, "alice", "controller", aliceSecret)+line(t, "bob", "observer", bobSecret))
	s, err := New(Options{Client: &tacpclient.Client{}, TokensFile: path, TokensPoll: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	log := slog.New(slog.DiscardHandler)

	require.NoError(t, os.WriteFile(path, []byte(line(t, "alice", "controller", aliceSecret)), 0o600)) // bob's line not yet written
	require.NoError(t, s.tokens.reload(log, false))
	require.Equal(t, http.StatusOK, whoamiCode(s, bobSecret), "one reading of new content is not enough")
	require.NoError(t, os.WriteFile(path, []byte(line(t, "alice", "controller", aliceSecret)+line(t, "bob", "observer", bobSecret, "team")), 0o600))
	require.NoError(t, s.tokens.reload(log, false))
	require.NoError(t, s.tokens.reload(log, false))
	require.JSONEq(t, `{"role":"observer","name":"bob","groups":["team"],"by":"deck:bob"}`, serve(s, "GET", "/api/whoami", bobSecret, "").Body.String(), "two that agree are")
}

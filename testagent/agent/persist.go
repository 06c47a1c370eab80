package agent

// Persistence: every session has a transcript, <transcripts>/<sessionId>.jsonl, created by
// session/new and reopened by session/load, to which every session/update the agent sends
// and each user prompt is appended as one line; session/load replays it.

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/coder/acp-go-sdk"
)

// TranscriptsEnv names the transcripts directory when -transcripts is not given: a worker's
// sandbox (internal/sandbox) gives each session's agent a directory of its own in it.
const TranscriptsEnv = "TESTAGENT_TRANSCRIPTS"

// DefaultTranscriptDir is where transcripts go unless configured otherwise: $TESTAGENT_TRANSCRIPTS,
// else tacp-testagent in the temp directory.
func DefaultTranscriptDir() string {
	if dir := os.Getenv(TranscriptsEnv); dir != "" {
		return dir
	}
	return filepath.Join(os.TempDir(), "tacp-testagent")
}

var validID = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

func (a *testAgent) transcriptPath(id acp.SessionId) string {
	return filepath.Join(a.opts.TranscriptDir, string(id)+".jsonl")
}

// register returns the session id, opening its transcript (created if create is
// set, otherwise it must exist) when the session is not yet known.
func (a *testAgent) register(id acp.SessionId, create bool) (*session, error) {
	if !validID.MatchString(string(id)) {
		return nil, acp.NewInvalidParams(map[string]any{"error": "invalid session id", "sessionId": id})
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, acp.NewInternalError(map[string]any{"error": "agent is shutting down"})
	}
	if s, ok := a.sessions[id]; ok {
		return s, nil
	}
	flags := os.O_WRONLY | os.O_APPEND
	if create {
		flags |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(a.transcriptPath(id), flags, 0o644)
	if errors.Is(err, os.ErrNotExist) {
		return nil, acp.NewInvalidParams(map[string]any{"error": "unknown session", "sessionId": id})
	} else if err != nil {
		return nil, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	s := &session{id: id, file: f}
	a.sessions[id] = s
	return s, nil
}

// recordLocked appends params as one transcript line; s.mu must be held.
// Failures are logged, not fatal: the live turn matters more than its record.
func (a *testAgent) recordLocked(s *session, params any) {
	if s.file == nil {
		return
	}
	b, err := json.Marshal(params)
	if err == nil {
		_, err = s.file.Write(append(b, '\n'))
	}
	if err != nil {
		a.log.Error("transcript append failed", "session", s.id, "err", err)
	}
}

// lastBlock is the directive of a recorded prompt: the whole text, unless a client put
// tacp's earlier context before it (then the directive cannot be told apart: "").
func lastBlock(text string) string {
	if strings.HasPrefix(text, "[tacp: earlier context]") {
		return ""
	}
	return text
}

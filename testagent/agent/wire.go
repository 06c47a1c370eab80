package agent

// What the agent writes on its connection: the lockedWriter every JSON-RPC line goes
// through (whole lines, and lines queued to follow an answer), and the session/update
// notifications a session sends, each recorded in its transcript as it goes out.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"sync"

	"github.com/coder/acp-go-sdk"
)

// lockedWriter serialises whole-line writes. The SDK writes each JSON-RPC
// message with a single Write call, so sharing this writer lets the agent emit
// raw lines (unknown update kinds, transcript replay) without interleaving.
type lockedWriter struct {
	mu    sync.Mutex
	w     io.Writer
	after []afterAnswer
}

// afterAnswer is a line to write right after the answer (a JSON-RPC result) whose line
// contains match.
type afterAnswer struct {
	match, line []byte
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.w.Write(p)
	if err != nil || len(l.after) == 0 || !isAnswer(p) {
		return n, err
	}
	for i, a := range l.after {
		if bytes.Contains(p, a.match) {
			l.after = slices.Delete(l.after, i, i+1)
			_, err = l.w.Write(a.line)
			break
		}
	}
	return n, err
}

// afterAnswer writes line right after the next answer whose line contains match.
func (l *lockedWriter) afterAnswer(match, line []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.after = append(l.after, afterAnswer{match, line})
}

// isAnswer reports whether a JSON-RPC line is a result (not a request or notification).
func isAnswer(line []byte) bool {
	var m struct {
		Method *string         `json:"method"`
		Result json.RawMessage `json:"result"`
	}
	return json.Unmarshal(line, &m) == nil && m.Method == nil && len(m.Result) > 0
}

// say sends an agent_message_chunk with text.
func (a *testAgent) say(s *session, text string) error {
	return a.emit(s, acp.UpdateAgentMessageText(text))
}

func (a *testAgent) emit(s *session, u acp.SessionUpdate) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return a.emitLocked(s, u)
}

// emitLocked records and sends an update; s.mu must be held. It does not use
// the turn context: updates may still be sent after the turn is cancelled.
func (a *testAgent) emitLocked(s *session, u acp.SessionUpdate) error {
	n := acp.SessionNotification{SessionId: s.id, Update: u}
	a.recordLocked(s, n)
	return a.connection().SessionUpdate(context.Background(), n)
}

// notifyRaw writes a session/update notification with pre-encoded params.
func (a *testAgent) notifyRaw(params json.RawMessage) error {
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}{"2.0", acp.ClientMethodSessionUpdate, params})
	if err != nil {
		return err
	}
	_, err = a.out.Write(append(b, '\n'))
	return err
}

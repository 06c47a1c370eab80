// Package agent implements tacp-testagent, a real Agent Client Protocol (ACP)
// agent whose behaviour is scripted by the prompt text. Tests, demos and
// benchmarks use it to drive every part of the protocol deterministically,
// without a model behind it.
//
// The first line of the first text block of a session/prompt may hold a
// directive, alone on that line; the rest of the text is the body:
//
//	(none)               echo the whole prompt text in up to 5 agent_message_chunk pieces
//	/echo                echo the body the same way
//	/chunks N [every D] [stamp]
//	                     send N chunks "chunk i\n" (i from 1), one every D (default 10ms);
//	                     with stamp, "chunk i @<unix nanoseconds>\n", stamped as it is sent
//	                     (benchmarks time the event path from it)
//	/sleep D             send "." every 100ms for D; session/cancel stops it within one tick
//	/pwd                 say the agent process's working directory
//	/permission KIND [TARGET]
//	                     tool_call call_<n> of kind KIND titled "KIND TARGET" (TARGET
//	                     defaults to "something", its rawInput path to README.md) naming its tool in
//	                     _meta.claudeCode.toolName (Edit for edit, Bash for execute, …),
//	                     then session/request_permission (allow, allow_always, reject)
//	                     without that name, as claude-agent-acp asks, then a
//	                     tool_call_update (completed if allowed, else failed) and the
//	                     text "permission: selected <id>" or "permission: cancelled"
//	/fail                answer with the JSON-RPC error "testagent: scripted failure"
//	/usage [D]           send "usage" and a usage_update (used 30, size 200000, cost 0.0125
//	                     USD), then, with D, "." every 100ms for D as /sleep; answer (also
//	                     when cancelled) with PromptResponse.usage {inputTokens 10,
//	                     outputTokens 20, totalTokens 38, cachedReadTokens 5, thoughtTokens 3}
//	/unknown             send a session/update of kind "tacp_custom_kind" that no SDK knows
//	/pids                say "pids <agent pid> <child pid>" (0: no -spawn-child)
//	/received            say "received N bytes:" and every text block of this prompt (a client's seeded context)
//	/read PATH           read PATH (relative to the session's cwd) with the client's
//	                     fs/read_text_file and say "read: <content>"; "read refused: …"
//	                     when the client refuses, "read: the client offers no
//	                     fs/read_text_file" when initialize did not offer it
//	/write PATH          write the body to PATH with fs/write_text_file and say
//	                     "wrote PATH" (or why not, as /read)
//	/elicit-form Q       ask the client Q in a form of one string field "answer"
//	                     (elicitation/create, form mode), and say "form elicitation:
//	                     ACTION" (": <answer>" after an accept)
//	/elicit-url URL      ask the client to open URL (elicitation/create, url mode); on
//	                     accept send elicitation/complete, and say "url elicitation:
//	                     ACTION" (", completed" after a complete)
//	/sh COMMAND          run COMMAND (the rest of the line) with /bin/sh -c in the
//	                     session's cwd, as a coding agent's own shell tool does, and say
//	                     "sh: exit N: <output>" (stdout and stderr, one line)
//
// Any other first line starting with "/" is answered with invalid params. Turns
// end with stopReason end_turn, or cancelled once session/cancel arrived. Turns
// of one session never overlap: a new prompt cancels the running turn first.
//
// Every session/update sent, and each user prompt as a user_message_chunk, is
// appended to <transcripts>/<sessionId>.jsonl, so session/load replays a session
// even in another process. With Options.Steering, initialize advertises
// _meta.steering.supported and the _session/steering extension request
// {sessionId, prompt: [content blocks], _meta?: {steering: {idleBehavior}}} is
// honoured as claude-agent-acp honours it: while a prompt runs in that session the
// agent sends "steered: <text>" in the running turn and answers
// {"outcome":"injected"}; with none running, {"outcome":"promptRequired",
// "reason":"noRunningTurn"} when idleBehavior is "promptRequired", else it sends
// "steered: <text>" outside any turn and answers {"outcome":"startedNewTurn"}. A
// prompt that is not a non-empty array is refused with -32602.
//
// With Options.Commands (-commands) the agent sends an available_commands_update
// right after answering session/new and session/load, outside any prompt, as
// claude-agent-acp does.
package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/acp-go-sdk"
)

const (
	// Version is reported as agentInfo.version.
	Version = "0.1.0"
	// DefaultName is the default agentInfo.name.
	DefaultName = "tacp-testagent"

	unknownKind  = "tacp_custom_kind"
	sleepTick    = 100 * time.Millisecond
	defaultEvery = 10 * time.Millisecond
)

// Options configures an agent served by Serve.
type Options struct {
	// TranscriptDir holds one <sessionId>.jsonl per session; empty means
	// DefaultTranscriptDir().
	TranscriptDir string
	// Steering advertises and honours the _session/steering extension.
	Steering bool
	// Name is reported as agentInfo.name; empty means DefaultName.
	Name string
	// Commands sends an available_commands_update right after answering session/new and
	// session/load, as claude-agent-acp does: outside any prompt, on the heels of the answer.
	Commands bool
	// IgnoreCancel ignores session/cancel: an agent that never stops (the client's kill
	// backstop is what ends its turn).
	IgnoreCancel bool
	// Settings offers modes and config options as claude-agent-acp does (settings.go).
	Settings bool
	// InitialMode is the mode every session starts in (empty: default), as Claude Code
	// starts in "auto"; IgnoreSetMode refuses every session/set_mode and mode config change,
	// as an agent pinned to its mode by settings of its own does.
	InitialMode   string
	IgnoreSetMode bool
	// ChildPID is the pid of the helper process -spawn-child started (0: none), which /pids
	// reports.
	ChildPID int
}

// Serve runs the agent over one ACP connection reading requests from in and
// writing to out; diagnostics go to slog.Default (stderr unless redirected).
// It returns nil when the peer closes in, or ctx.Err() when ctx ends first; in
// and out stay owned by the caller.
func Serve(ctx context.Context, opts Options, in io.Reader, out io.Writer) error {
	if opts.TranscriptDir == "" {
		opts.TranscriptDir = DefaultTranscriptDir()
	}
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if err := os.MkdirAll(opts.TranscriptDir, 0o755); err != nil {
		return fmt.Errorf("transcript dir: %w", err)
	}
	a := &testAgent{
		opts:     opts,
		out:      &lockedWriter{w: out},
		log:      slog.Default(),
		sessions: make(map[acp.SessionId]*session),
		ready:    make(chan struct{}),
	}
	// No SetLogger: the SDK reads its logger unsynchronised from goroutines
	// that NewAgentSideConnection has already started; it uses slog.Default.
	a.conn = acp.NewAgentSideConnection(a, a.out, in)
	close(a.ready)

	var err error
	select {
	case <-a.conn.Done():
	case <-ctx.Done():
		err = ctx.Err()
	}
	a.shutdown()
	return err
}

// session is one ACP session. Its mutex orders transcript appends with the
// wire, and guards the running turn so cancel and steering see it consistently.
type session struct {
	id     acp.SessionId
	mu     sync.Mutex
	file   *os.File           // transcript; nil after shutdown
	turn   context.Context    // running prompt turn; nil when idle
	cancel context.CancelFunc // cancels turn
	done   chan struct{}      // closed when turn has finished
	cwd    string             // the cwd of session/new or session/load: /read and /write resolve against it
	mode   string             // -settings: the current mode and model
	model  string
	mcp    []string // the MCP servers session/new or session/load got, as transport:name
	// received is every text block of the running prompt, joined: /received reports it.
	received string
	// lastDirective is the directive of the last prompt that was not a request to resume:
	// tacp's resume message (resumePrefix) runs it again, as a real agent picks its work
	// up where the lost worker left it (restored by session/load from the transcript).
	lastDirective string
}

// resumePrefix begins the message tacp sends instead of the prompt when the agent session
// already holds it (activities.ResumeText).
const resumePrefix = "[tacp: the worker running this turn was lost"

// testAgent implements acp.Agent, acp.AgentLoader and acp.ExtensionMethodHandler.
type testAgent struct {
	opts  Options
	out   *lockedWriter
	log   *slog.Logger
	conn  *acp.AgentSideConnection
	ready chan struct{} // closed once conn is set
	calls atomic.Int64  // tool call counter

	mu       sync.Mutex
	sessions map[acp.SessionId]*session
	closed   bool
	client   acp.ClientCapabilities // what initialize offered
}

var (
	_ acp.Agent                  = (*testAgent)(nil)
	_ acp.AgentLoader            = (*testAgent)(nil)
	_ acp.ExtensionMethodHandler = (*testAgent)(nil)
)

// connection waits until Serve has stored the connection: handlers may start
// before NewAgentSideConnection returns.
func (a *testAgent) connection() *acp.AgentSideConnection {
	<-a.ready
	return a.conn
}

func (a *testAgent) Initialize(_ context.Context, req acp.InitializeRequest) (acp.InitializeResponse, error) {
	a.mu.Lock()
	a.client = req.ClientCapabilities
	a.mu.Unlock()
	resp := acp.InitializeResponse{
		ProtocolVersion:   acp.ProtocolVersionNumber,
		AgentCapabilities: acp.AgentCapabilities{LoadSession: true},
		AgentInfo:         &acp.Implementation{Name: a.opts.Name, Version: Version},
		AuthMethods:       []acp.AuthMethod{},
	}
	if a.opts.Steering {
		resp.Meta = map[string]any{"steering": map[string]any{"supported": true}}
	}
	if a.opts.Settings {
		resp.AgentCapabilities.PromptCapabilities = acp.PromptCapabilities{Image: true, EmbeddedContext: true}
		resp.AgentCapabilities.McpCapabilities = acp.McpCapabilities{Http: true, Sse: true}
	}
	return resp, nil
}

func (a *testAgent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (a *testAgent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

func (a *testAgent) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}

func (a *testAgent) CloseSession(context.Context, acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionClose)
}

func (a *testAgent) NewSession(_ context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24
	id := acp.SessionId("ts_" + hex.EncodeToString(b[:]))
	s, err := a.register(id, true)
	if err != nil {
		return acp.NewSessionResponse{}, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	s.mu.Lock()
	s.cwd = p.Cwd
	modes, options := a.offerSettings(s, p.McpServers)
	s.mu.Unlock()
	a.commandsAfter([]byte(strconv.Quote(string(id))), id)
	return acp.NewSessionResponse{SessionId: id, Modes: modes, ConfigOptions: options}, nil
}

// commands are what -commands advertises: the directives.
var commands = []acp.AvailableCommand{
	{Name: "echo", Description: "echo the text"},
	{Name: "chunks", Description: "send N numbered chunks"},
	{Name: "sleep", Description: "stream dots for a while"},
	{Name: "permission", Description: "walk a tool call through a permission request"},
}

// commandsAfter queues an available_commands_update of session id right after the answer
// whose line contains match (with -commands).
func (a *testAgent) commandsAfter(match []byte, id acp.SessionId) {
	if !a.opts.Commands {
		return
	}
	line, err := json.Marshal(struct {
		JSONRPC string                  `json:"jsonrpc"`
		Method  string                  `json:"method"`
		Params  acp.SessionNotification `json:"params"`
	}{"2.0", acp.ClientMethodSessionUpdate, acp.SessionNotification{SessionId: id, Update: acp.SessionUpdate{
		AvailableCommandsUpdate: &acp.SessionAvailableCommandsUpdate{AvailableCommands: commands},
	}}})
	if err == nil {
		a.out.afterAnswer(match, append(line, '\n'))
	}
}

// LoadSession replays the session's transcript line by line, exactly as the
// updates were sent, and then makes the session available for prompts.
func (a *testAgent) LoadSession(_ context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	s, err := a.register(p.SessionId, false)
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turn != nil {
		return acp.LoadSessionResponse{}, acp.NewInvalidRequest(map[string]any{"error": "a prompt is running in this session"})
	}
	s.cwd = p.Cwd
	modes, options := a.offerSettings(s, p.McpServers)
	data, err := os.ReadFile(a.transcriptPath(p.SessionId))
	if err != nil {
		return acp.LoadSessionResponse{}, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	for line := range bytes.Lines(data) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if !json.Valid(line) { // e.g. torn by a crash mid-append
			a.log.Warn("skipping corrupt transcript line", "session", p.SessionId)
			continue
		}
		if err := a.notifyRaw(line); err != nil {
			return acp.LoadSessionResponse{}, err
		}
		var rec struct {
			Update struct {
				SessionUpdate string `json:"sessionUpdate"`
				Content       struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Update.SessionUpdate == "user_message_chunk" && !strings.HasPrefix(rec.Update.Content.Text, resumePrefix) {
			s.lastDirective = lastBlock(rec.Update.Content.Text)
		}
	}
	// The load's answer is the next result this agent writes: nothing else is asked of a
	// session while it loads.
	a.commandsAfter([]byte(`"result"`), p.SessionId)
	return acp.LoadSessionResponse{Modes: modes, ConfigOptions: options}, nil
}

// Cancel ends the running turn of the session, if any; the prompt then
// answers stopReason cancelled. The SDK cancels the prompt's context too, but
// loses track of it after a pre-emption, so the agent keeps its own handle.
func (a *testAgent) Cancel(_ context.Context, p acp.CancelNotification) error {
	if a.opts.IgnoreCancel {
		return nil
	}
	if s, err := a.lookup(p.SessionId); err == nil {
		s.mu.Lock()
		if s.cancel != nil {
			s.cancel()
		}
		s.mu.Unlock()
	}
	return nil
}

// Prompt runs one scripted turn. Turns in a session never overlap: a new
// prompt cancels the running turn, which answers cancelled, and starts once it
// has finished. (The SDK cancels the older prompt's context itself, so
// rejecting the newcomer instead would leave the session with no turn.)
func (a *testAgent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	s, err := a.lookup(p.SessionId)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	var texts []string
	for _, b := range p.Prompt {
		if b.Text != nil {
			texts = append(texts, b.Text.Text)
		}
	}
	text := strings.Join(texts, "\n")
	// The directive is on the first line of the last text block: a client may put context
	// (tacp's transcript of earlier turns) in blocks before it.
	directive := text
	if len(texts) > 1 {
		directive = texts[len(texts)-1]
	}

	s.mu.Lock()
	for s.turn != nil {
		cancelPrev, prevDone := s.cancel, s.done
		s.mu.Unlock()
		cancelPrev()
		select {
		case <-prevDone:
		case <-ctx.Done(): // pre-empted in turn by a newer prompt
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		}
		s.mu.Lock()
	}
	// The turn ends on session/cancel (Cancel) or a newer prompt (above), not when the SDK
	// cancels the request's context: the SDK may apply a session/cancel that it read late to
	// whichever prompt is current, which would cancel the turn after the one meant.
	turn, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	s.turn, s.cancel, s.done = turn, cancel, make(chan struct{})
	if strings.HasPrefix(directive, resumePrefix) {
		directive = s.lastDirective // go on with the prompt the lost worker was answering
	} else {
		s.lastDirective = directive
	}
	s.received = text
	a.recordLocked(s, acp.SessionNotification{SessionId: s.id, Update: acp.UpdateUserMessageText(text)})
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		close(s.done)
		s.turn, s.cancel, s.done = nil, nil, nil
		s.mu.Unlock()
	}()
	return a.run(turn, s, directive)
}

// lookup returns a session created or loaded on this connection.
func (a *testAgent) lookup(id acp.SessionId) (*session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := a.sessions[id]; ok {
		return s, nil
	}
	return nil, acp.NewInvalidParams(map[string]any{"error": "unknown session", "sessionId": id})
}

// shutdown cancels running turns and closes transcripts once the peer is gone.
func (a *testAgent) shutdown() {
	a.mu.Lock()
	a.closed = true
	sessions := slices.Collect(maps.Values(a.sessions))
	a.mu.Unlock()
	for _, s := range sessions {
		s.mu.Lock()
		if s.cancel != nil {
			s.cancel()
		}
		if s.file != nil {
			_ = s.file.Close()
			s.file = nil
		}
		s.mu.Unlock()
	}
}

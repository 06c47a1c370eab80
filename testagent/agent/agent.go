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
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
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

// StartsDirEnv names a directory where the agent leaves one file per process start.
const StartsDirEnv = "TESTAGENT_STARTS_DIR"

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

// Main runs the agent on stdin/stdout with command-line args (without the
// program name) and returns the process exit code. Diagnostics go to stderr.
func Main(args []string) int {
	var opts Options
	fset := flag.NewFlagSet(DefaultName, flag.ContinueOnError)
	fset.StringVar(&opts.TranscriptDir, "transcripts", DefaultTranscriptDir(), "directory of session transcripts (<sessionId>.jsonl)")
	fset.BoolVar(&opts.Steering, "steering", false, "advertise and honour the _session/steering extension")
	fset.StringVar(&opts.Name, "name", DefaultName, "agentInfo name reported by initialize")
	spawnChild := fset.Bool("spawn-child", false, "start a helper process in the agent's process group that outlives the agent and ignores SIGTERM, as claude-agent-acp's node children do (/pids names it)")
	hold := fset.Bool("hold", false, "be that helper: ignore SIGINT, SIGTERM and SIGHUP and wait to be killed")
	fset.BoolVar(&opts.IgnoreCancel, "ignore-cancel", false, "ignore session/cancel (a stuck agent, for tests of the client's kill backstop)")
	fset.BoolVar(&opts.Commands, "commands", false, "send available_commands_update right after answering session/new and session/load")
	startDelay := fset.Duration("start-delay", 0, "wait this long before reading the first request, as an agent slow to start does (a cold node, a loaded machine)")
	fset.BoolVar(&opts.Settings, "settings", false, "offer modes (default, acceptEdits, plan) and config options (mode, model) as claude-agent-acp does, and honour set_mode and set_config_option")
	fset.StringVar(&opts.InitialMode, "initial-mode", "", "with -settings: the mode sessions start in (default: default)")
	fset.BoolVar(&opts.IgnoreSetMode, "ignore-set-mode", false, "with -settings: refuse every change of mode, as an agent pinned to its mode by its own settings does")
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fset.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "%s: unexpected arguments %q\n", DefaultName, fset.Args())
		return 2
	}
	if *hold {
		signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		time.Sleep(24 * time.Hour) // until killed
		return 0
	}
	if *spawnChild {
		exe, err := os.Executable()
		if err == nil {
			child := exec.Command(exe, "-hold") // no stdio: the end of ours does not end it
			if err = child.Start(); err == nil {
				opts.ChildPID = child.Process.Pid
				go func() { _ = child.Wait() }()
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: spawn child: %v\n", DefaultName, err)
			return 1
		}
	}
	if dir := os.Getenv(StartsDirEnv); dir != "" {
		// One file per process start: tests count agent starts across worker processes.
		if err := os.MkdirAll(dir, 0o755); err == nil {
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("start-%d-%d", os.Getpid(), time.Now().UnixNano())), nil, 0o644)
		}
	}
	if *startDelay > 0 {
		fmt.Fprintf(os.Stderr, "%s: starting slowly (%s)\n", DefaultName, *startDelay)
		time.Sleep(*startDelay)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	in, out := checkedWire(os.Stdin, os.Stdout)
	if err := Serve(ctx, opts, in, out); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", DefaultName, err)
		return 1
	}
	return 0
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

// run interprets the directive on the first line of text.
func (a *testAgent) run(ctx context.Context, s *session, text string) (acp.PromptResponse, error) {
	first, body, _ := strings.Cut(text, "\n")
	fields := strings.Fields(first)
	if len(fields) == 0 || !strings.HasPrefix(fields[0], "/") {
		fields = []string{""}
		body = text
	}
	dir, args := fields[0], fields[1:]
	usageErr := func(usage string) error {
		return acp.NewInvalidParams(map[string]any{"directive": dir, "error": "usage: " + usage})
	}

	var (
		err   error
		usage *acp.Usage
	)
	switch dir {
	case "", "/echo":
		if len(args) > 0 {
			return acp.PromptResponse{}, usageErr("/echo")
		}
		err = a.echo(ctx, s, body)
	case "/chunks":
		n, every, stamp, perr := parseChunks(args)
		if perr != nil {
			return acp.PromptResponse{}, usageErr("/chunks N [every DURATION] [stamp]")
		}
		err = a.chunks(ctx, s, n, every, stamp)
	case "/sleep":
		d, perr := parseDuration(args)
		if perr != nil {
			return acp.PromptResponse{}, usageErr("/sleep DURATION")
		}
		err = a.sleep(ctx, s, d)
	case "/permission":
		if len(args) < 1 || len(args) > 2 || !slices.Contains(toolKinds, acp.ToolKind(args[0])) {
			return acp.PromptResponse{}, usageErr(fmt.Sprintf("/permission KIND [TARGET] (KIND one of %v)", toolKinds))
		}
		target, path := "something", "README.md"
		if len(args) == 2 {
			target, path = args[1], args[1]
		}
		err = a.permission(ctx, s, acp.ToolKind(args[0]), target, path)
	case "/elicit-form":
		err = a.elicitForm(ctx, s, strings.Join(args, " "))
	case "/elicit-url":
		if len(args) != 1 {
			return acp.PromptResponse{}, usageErr("/elicit-url URL")
		}
		err = a.elicitURL(ctx, s, args[0])
	case "/pwd":
		dir, werr := os.Getwd()
		if werr != nil {
			return acp.PromptResponse{}, werr
		}
		err = a.say(s, "pwd: "+dir)
	case "/fail":
		return acp.PromptResponse{}, &acp.RequestError{Code: -32603, Message: "testagent: scripted failure"}
	case "/usage":
		var d time.Duration
		if len(args) > 0 {
			if d, err = parseDuration(args); err != nil {
				return acp.PromptResponse{}, usageErr("/usage [DURATION]")
			}
		}
		if err = a.say(s, "usage"); err == nil {
			err = a.emit(s, acp.SessionUpdate{UsageUpdate: &acp.SessionUsageUpdate{
				Used: 30, Size: 200000, Cost: &acp.Cost{Amount: 0.0125, Currency: "USD"},
			}})
		}
		if err == nil && d > 0 {
			err = a.sleep(ctx, s, d)
		}
		// The tokens were spent whether the turn ran to its end or was cancelled.
		usage = &acp.Usage{InputTokens: 10, OutputTokens: 20, TotalTokens: 38, CachedReadTokens: acp.Ptr(5), ThoughtTokens: acp.Ptr(3)}
	case "/unknown":
		err = a.unknown(s)
	case "/settings":
		err = a.say(s, s.settingsLine())
	case "/mcp":
		err = a.say(s, s.mcpLine())
	case "/received":
		// What this prompt carried, all its text blocks: the test of a client that seeds a
		// new session with earlier context reads it back.
		s.mu.Lock()
		got := s.received
		s.mu.Unlock()
		err = a.say(s, fmt.Sprintf("received %d bytes:\n%s", len(got), got))
	case "/pids":
		err = a.say(s, fmt.Sprintf("pids %d %d", os.Getpid(), a.opts.ChildPID))
	case "/sh":
		if len(args) == 0 {
			return acp.PromptResponse{}, usageErr("/sh COMMAND")
		}
		err = a.say(s, shell(ctx, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(first), dir))))
	case "/read":
		if len(args) != 1 {
			return acp.PromptResponse{}, usageErr("/read PATH")
		}
		err = a.readFile(ctx, s, args[0])
	case "/write":
		if len(args) != 1 {
			return acp.PromptResponse{}, usageErr("/write PATH (the body is the content)")
		}
		err = a.writeFile(ctx, s, args[0], body)
	default:
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{"directive": dir, "error": "unknown directive " + dir})
	}
	if err != nil {
		return acp.PromptResponse{}, err
	}
	resp := acp.PromptResponse{StopReason: acp.StopReasonEndTurn, Usage: usage}
	if ctx.Err() != nil {
		resp.StopReason = acp.StopReasonCancelled
	}
	return resp, nil
}

// shell runs command as /sh does and describes how it went on one line.
func shell(ctx context.Context, command string) string {
	out, err := exec.CommandContext(ctx, "/bin/sh", "-c", command).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		return "sh: " + err.Error()
	}
	return fmt.Sprintf("sh: exit %d: %s", code, strings.Join(strings.Fields(string(out)), " "))
}

// toolKinds are the kinds /permission accepts.
var toolKinds = []acp.ToolKind{
	acp.ToolKindRead, acp.ToolKindEdit, acp.ToolKindDelete, acp.ToolKindMove, acp.ToolKindSearch,
	acp.ToolKindExecute, acp.ToolKindThink, acp.ToolKindFetch, acp.ToolKindOther,
}

func parseChunks(args []string) (n int, every time.Duration, stamp bool, err error) {
	if len(args) > 1 && args[len(args)-1] == "stamp" {
		stamp, args = true, args[:len(args)-1]
	}
	if len(args) != 1 && (len(args) != 3 || args[1] != "every") {
		return 0, 0, false, errors.New("bad arguments")
	}
	n, err = strconv.Atoi(args[0])
	if err != nil || n < 0 {
		return 0, 0, false, errors.New("bad count")
	}
	every = defaultEvery
	if len(args) == 3 {
		if every, err = parseDuration(args[2:]); err != nil {
			return 0, 0, false, err
		}
	}
	return n, every, stamp, nil
}

func parseDuration(args []string) (time.Duration, error) {
	if len(args) != 1 {
		return 0, errors.New("want one duration")
	}
	d, err := time.ParseDuration(args[0])
	if err == nil && d < 0 {
		err = errors.New("negative duration")
	}
	return d, err
}

// echo sends text back in up to 5 chunks of roughly equal rune counts.
func (a *testAgent) echo(ctx context.Context, s *session, text string) error {
	r := []rune(text)
	n := min(5, len(r))
	for i := range n {
		if ctx.Err() != nil {
			return nil
		}
		if err := a.say(s, string(r[i*len(r)/n:(i+1)*len(r)/n])); err != nil {
			return err
		}
	}
	return nil
}

// chunks sends n numbered chunks on a fixed schedule (no drift), every apart. With stamp,
// each chunk carries the wall-clock time it is sent, so a reader on the same machine can
// tell how long it took to reach it.
func (a *testAgent) chunks(ctx context.Context, s *session, n int, every time.Duration, stamp bool) error {
	start := time.Now()
	for i := 1; i <= n; i++ {
		if !wait(ctx, time.Until(start.Add(time.Duration(i-1)*every))) {
			return nil
		}
		text := fmt.Sprintf("chunk %d\n", i)
		if stamp {
			text = fmt.Sprintf("chunk %d @%d\n", i, time.Now().UnixNano())
		}
		if err := a.say(s, text); err != nil {
			return err
		}
	}
	return nil
}

// sleep streams "." every sleepTick until d has passed or the turn is cancelled.
func (a *testAgent) sleep(ctx context.Context, s *session, d time.Duration) error {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(sleepTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-deadline.C:
			return nil
		case <-tick.C:
			if err := a.say(s, "."); err != nil {
				return err
			}
		}
	}
}

// toolNames are the names claude-agent-acp gives its tools, by ACP kind: /permission's tool
// calls carry them as it does.
var toolNames = map[acp.ToolKind]string{
	acp.ToolKindRead: "Read", acp.ToolKindEdit: "Edit", acp.ToolKindDelete: "Delete", acp.ToolKindMove: "Move",
	acp.ToolKindSearch: "Grep", acp.ToolKindExecute: "Bash", acp.ToolKindThink: "Task", acp.ToolKindFetch: "WebFetch",
	acp.ToolKindOther: "Other",
}

// permission walks a tool call through session/request_permission, on claude-agent-acp's
// wire: the tool_call names the tool in _meta.claudeCode.toolName, the permission request
// that follows does not (its title names the target: the file, the command).
// elicitForm asks the client question in a form of one string field, as an agent that asks
// the person a question in the middle of a turn does.
func (a *testAgent) elicitForm(ctx context.Context, s *session, question string) error {
	resp, err := a.connection().UnstableCreateElicitation(ctx, acp.UnstableCreateElicitationRequest{
		Form: &acp.UnstableCreateElicitationForm{Mode: "form", Message: question, RequestedSchema: acp.UnstableElicitationSchema{
			Type: "object", Properties: map[string]any{"answer": map[string]any{"type": "string", "title": "Answer"}}, Required: []string{"answer"},
		}},
	})
	switch {
	case err != nil:
		return a.say(s, "form elicitation failed: "+err.Error())
	case resp.Accept != nil:
		return a.say(s, fmt.Sprintf("form elicitation: accept: %v", resp.Accept.Content["answer"]))
	case resp.Decline != nil:
		return a.say(s, "form elicitation: decline")
	}
	return a.say(s, "form elicitation: cancel")
}

// elicitURL asks the client to open url, as an agent whose sign-in happens in a browser
// does, and completes the elicitation when the person accepted.
func (a *testAgent) elicitURL(ctx context.Context, s *session, url string) error {
	id := acp.UnstableElicitationId("url-" + strconv.FormatInt(time.Now().UnixNano(), 36))
	resp, err := a.connection().UnstableCreateElicitation(ctx, acp.UnstableCreateElicitationRequest{
		Url: &acp.UnstableCreateElicitationUrl{Mode: "url", Message: "Sign in to continue", Url: url, ElicitationId: id},
	})
	if err != nil {
		return a.say(s, "url elicitation failed: "+err.Error())
	}
	if resp.Accept == nil {
		action := "cancel"
		if resp.Decline != nil {
			action = "decline"
		}
		return a.say(s, "url elicitation: "+action)
	}
	if err := a.connection().UnstableCompleteElicitation(ctx, acp.UnstableCompleteElicitationNotification{ElicitationId: id}); err != nil {
		return a.say(s, "url elicitation: accept, complete failed: "+err.Error())
	}
	return a.say(s, "url elicitation: accept, completed")
}

func (a *testAgent) permission(ctx context.Context, s *session, kind acp.ToolKind, target, path string) error {
	id := acp.ToolCallId(fmt.Sprintf("call_%d", a.calls.Add(1)))
	title := string(kind) + " " + target
	input := map[string]any{"path": path}
	start := acp.StartToolCall(id, title, acp.WithStartKind(kind),
		acp.WithStartStatus(acp.ToolCallStatusPending), acp.WithStartRawInput(input))
	start.ToolCall.Meta = map[string]any{"claudeCode": map[string]any{"toolName": toolNames[kind]}}
	if err := a.emit(s, start); err != nil {
		return err
	}
	resp, err := a.connection().RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: s.id,
		ToolCall: acp.ToolCallUpdate{
			ToolCallId: id, Title: &title, Kind: &kind,
			Status: acp.Ptr(acp.ToolCallStatusPending), RawInput: input,
		},
		Options: []acp.PermissionOption{
			{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow once", OptionId: "allow"},
			{Kind: acp.PermissionOptionKindAllowAlways, Name: "Always allow", OptionId: "allow_always"},
			{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "reject"},
		},
	})
	status, text := acp.ToolCallStatusFailed, "permission: cancelled"
	switch {
	case err != nil && ctx.Err() == nil: // the client failed the request
		_ = a.emit(s, acp.UpdateToolCall(id, acp.WithUpdateStatus(acp.ToolCallStatusFailed)))
		return err
	case err == nil && resp.Outcome.Selected != nil:
		opt := resp.Outcome.Selected.OptionId
		text = "permission: selected " + string(opt)
		if opt == "allow" || opt == "allow_always" {
			status = acp.ToolCallStatusCompleted
		}
	}
	if err := a.emit(s, acp.UpdateToolCall(id, acp.WithUpdateStatus(status))); err != nil {
		return err
	}
	return a.say(s, text)
}

// clientPath resolves a path of /read or /write against the session's cwd: ACP's fs
// methods take absolute paths.
func (s *session) clientPath(path string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if filepath.IsAbs(path) || s.cwd == "" {
		return path
	}
	return filepath.Join(s.cwd, path)
}

// readFile reads a file through the client's fs/read_text_file, when the client offered it,
// and says what it read (or why it could not).
func (a *testAgent) readFile(ctx context.Context, s *session, path string) error {
	a.mu.Lock()
	offered := a.client.Fs.ReadTextFile
	a.mu.Unlock()
	if !offered {
		return a.say(s, "read: the client offers no fs/read_text_file")
	}
	resp, err := a.connection().ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: s.id, Path: s.clientPath(path)})
	if err != nil {
		return a.say(s, "read refused: "+err.Error())
	}
	return a.say(s, "read: "+resp.Content)
}

// writeFile writes content through the client's fs/write_text_file, when the client offered
// it, and says how that went.
func (a *testAgent) writeFile(ctx context.Context, s *session, path, content string) error {
	a.mu.Lock()
	offered := a.client.Fs.WriteTextFile
	a.mu.Unlock()
	if !offered {
		return a.say(s, "write: the client offers no fs/write_text_file")
	}
	if _, err := a.connection().WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: s.id, Path: s.clientPath(path), Content: content}); err != nil {
		return a.say(s, "write refused: "+err.Error())
	}
	return a.say(s, "wrote "+path)
}

// unknown sends an update kind the SDK cannot express, bypassing its types.
func (a *testAgent) unknown(s *session) error {
	params, err := json.Marshal(map[string]any{
		"sessionId": s.id,
		"update":    map[string]any{"sessionUpdate": unknownKind, "payload": map[string]any{"x": 1}},
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a.recordLocked(s, json.RawMessage(params))
	return a.notifyRaw(params)
}

// HandleExtensionMethod serves _session/steering when steering is enabled, with the params
// and answers of claude-agent-acp: prompt is a non-empty array of content blocks (a string is
// refused with -32602, as that agent refuses it); while a prompt runs the text is injected
// into it ("injected"); with no turn running, "promptRequired" when the request's
// _meta.steering.idleBehavior asks for it, else the text starts a turn of its own
// ("startedNewTurn": here one "steered: <text>" update outside any prompt).
func (a *testAgent) HandleExtensionMethod(_ context.Context, method string, params json.RawMessage) (any, error) {
	if !a.opts.Steering || method != signals.SteeringMethod {
		return nil, acp.NewMethodNotFound(method)
	}
	req, err := parseSteer(params)
	if err != nil {
		return nil, err
	}
	s, err := a.lookup(req.SessionID)
	if err != nil {
		return nil, err
	}
	injected, err := a.steer(s, req.text, req.idle != signals.SteeringIdlePromptRequired)
	switch {
	case err != nil:
		return nil, err
	case injected:
		return map[string]string{"outcome": signals.SteerInjected}, nil
	case req.idle == signals.SteeringIdlePromptRequired:
		return map[string]string{"outcome": signals.SteerPromptRequired, "reason": "noRunningTurn"}, nil
	default:
		return map[string]string{"outcome": signals.SteerStartedNewTurn}, nil
	}
}

type steerRequest struct {
	SessionID acp.SessionId
	text      string
	idle      string
}

// invalidSteer is claude-agent-acp's refusal of bad steering params.
func invalidSteer(why string) error {
	return &acp.RequestError{Code: -32602, Message: "Invalid params: " + why}
}

// parseSteer validates _session/steering params the way claude-agent-acp does.
func parseSteer(params json.RawMessage) (steerRequest, error) {
	var p struct {
		SessionID json.RawMessage `json:"sessionId"`
		Prompt    json.RawMessage `json:"prompt"`
		Meta      struct {
			Steering struct {
				IdleBehavior *string `json:"idleBehavior"`
			} `json:"steering"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return steerRequest{}, invalidSteer("steer params must be an object")
	}
	var req steerRequest
	if json.Unmarshal(p.SessionID, &req.SessionID) != nil || req.SessionID == "" {
		return steerRequest{}, invalidSteer("steer params require a non-empty sessionId")
	}
	var raw []json.RawMessage
	if json.Unmarshal(p.Prompt, &raw) != nil || len(raw) == 0 {
		return steerRequest{}, invalidSteer("steer params require a non-empty prompt array")
	}
	var blocks []acp.ContentBlock
	if err := json.Unmarshal(p.Prompt, &blocks); err != nil {
		return steerRequest{}, invalidSteer("steer prompt: " + err.Error())
	}
	if b := p.Meta.Steering.IdleBehavior; b != nil {
		if *b != signals.SteeringIdlePromptRequired {
			return steerRequest{}, invalidSteer("unsupported steering idleBehavior")
		}
		req.idle = *b
	}
	var texts []string
	for _, b := range blocks {
		if b.Text != nil {
			texts = append(texts, b.Text.Text)
		}
	}
	req.text = strings.Join(texts, "\n")
	return req, nil
}

// steer injects text into the running turn of s, reporting whether one ran; with none
// running, startIdle answers the text outside any turn. Holding s.mu keeps the turn from
// answering before the injected chunk is out.
func (a *testAgent) steer(s *session, text string, startIdle bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	running := s.turn != nil && s.turn.Err() == nil
	if !running && !startIdle {
		return false, nil
	}
	return running, a.emitLocked(s, acp.UpdateAgentMessageText("steered: "+text))
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

// wait sleeps for d unless ctx ends first; it reports whether ctx is still live.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
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

// Package fakemodel runs stand-ins for the model APIs that real coding agents call, so that
// tests and benchmarks can drive Claude Code (claude-agent-acp), Codex (codex-acp), Gemini
// CLI and OpenCode on a machine that reaches no model provider. Each Server is an
// httptest.Server that speaks one provider's streaming API well enough for those agents:
//
//   - Anthropic: the Messages API (POST /v1/messages, SSE when "stream" is true, plain JSON
//     otherwise; structured output for a json_schema output format), token counting
//     (/v1/messages/count_tokens), the model list (/v1/models) and Claude Code's
//     connectivity probe (HEAD /api/hello).
//   - OpenAI: the Responses API (POST /v1/responses, SSE), and the model list.
//   - Gemini: generateContent and streamGenerateContent (SSE with alt=sse, a JSON array
//     otherwise) and countTokens under /v1beta/models/MODEL:METHOD.
//
// Every request is recorded (Requests), so a test can assert the model name, what the
// conversation history held, or that a steer's text reached the model.
//
// # The script
//
// What the model answers is decided by the text of the last user message (of the
// conversation's last user turn: tool results do not count as user text). The first line of
// that text, searched from the end, that starts with one of these directives decides:
//
//	reply: TEXT                  stream TEXT back in several chunks (at word boundaries)
//	slow: N [TEXT]               stream N chunks ("TEXT 1 ", "TEXT 2 ", …; TEXT defaults
//	                             to "chunk"), Server.ChunkDelay apart: long enough for a
//	                             test to cancel or steer mid-stream
//	tool: write PATH CONTENT     call the agent's own file-writing tool (the rest of the
//	                             line is the content)
//	tool: read PATH              call its file-reading tool
//	tool: bash COMMAND           call its shell tool with COMMAND (the rest of the line)
//	tool: mcp-ask Q | OPT...     call an MCP server's ask tool (testagent/mcpask: mcp__NAME__ask)
//	tool: ask Q | OPT | OPT...   call its question tool (Claude Code's AskUserQuestion) with
//	                             question Q and its options (ask.go)
//	limited: N [TAG]             answer the first main request carrying this line 429 with
//	                             retry-after: N, then as the rest says (limits.go)
//
// Any other text is answered "echo: " and its last non-empty line. The tool is picked from
// the tools the request offers, by name (Claude Code's Write/Read/Bash, OpenCode's
// write/read/bash, Gemini CLI's write_file/read_file/run_shell_command, Codex's
// apply_patch/exec_command), and its arguments are named after the properties of that
// tool's schema (file_path, filePath, absolute_path, path; content; command, cmd). Give
// absolute paths: most agents refuse relative ones. Where the shell tool can ask to run
// outside the agent's sandbox (Codex's sandbox_permissions), every command asks to, so that
// the agent asks its client's permission for it. A request that offers no matching tool
// (an agent's side request such as a session title) gets a text reply instead; one whose
// output format is a JSON schema gets a JSON object that fits it.
//
// Once the agent sends the tool's result back (the conversation ends with a tool result,
// and no directive came with it: an agent that did not send a refused call's result to
// the model sends it with the next prompt), the model answers with the final text "tool result: " and the result on one line (runs
// of white space made one space), cut at 300 bytes, so a test can tell an approved call
// from a refused one.
//
// Usage is reported on every response: input tokens are the request body's length / 4,
// output tokens the reply's length / 4 + 1 (both recorded in Request.Usage).
package fakemodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Provider names the API a Server speaks.
type Provider string

// The providers.
const (
	Anthropic Provider = "anthropic"
	OpenAI    Provider = "openai"
	Gemini    Provider = "gemini"
)

// DefaultChunkDelay is the pause between the chunks of a slow: reply.
const DefaultChunkDelay = 100 * time.Millisecond

// APIKey is the key every Server expects (and ignores): agents refuse to start without one.
const APIKey = "sk-fakemodel-0000"

// Server is a fake model API on a loopback address.
type Server struct {
	// URL is the server's root, e.g. http://127.0.0.1:41234 (no trailing slash).
	URL      string
	Provider Provider
	// ChunkDelay is the pause between the chunks of a slow: reply (DefaultChunkDelay).
	// Plain replies are streamed without pauses.
	ChunkDelay time.Duration

	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []Request
	waiters []chan struct{}
	seq     int
	// limited holds the "limited:" lines whose first main request was answered 429 (limits.go).
	limited map[string]bool
}

// Request is one request the server received, with what it made of it.
type Request struct {
	Seq    int
	At     time.Time
	Method string
	// Path is the URL path, without the query.
	Path   string
	Query  string
	Header http.Header
	Body   []byte
	// Model is the model the request named (the JSON "model", or Gemini's path segment).
	Model  string
	Stream bool
	// Tools are the names of the tools the request offered the model.
	Tools []string
	// Messages is the conversation the request carried, in order, provider-neutral.
	Messages []Message
	// Reply is what the server answered (a text, or the tool call it made).
	Reply Reply
	Usage Usage
}

// Message is one entry of a request's conversation.
type Message struct {
	// Role is user, assistant, system (developer and system prompts) or tool (a tool result).
	Role string
	Text string
	// ToolCall names the tool an assistant entry called.
	ToolCall string
}

// Reply is what the server answered a request.
type Reply struct {
	Text string
	// ToolCall is the tool name when the reply called a tool; Args its arguments.
	ToolCall string
	Args     map[string]any
	// Chunks is how many pieces the text was streamed in.
	Chunks int
}

// Usage is the token usage the server reported for a request.
type Usage struct {
	Input, Output int
}

// IsMain reports whether r is a request of the agent's main loop: one that offered tools.
// Agents make side requests (a session title, a summary) that offer none.
func (r Request) IsMain() bool { return len(r.Tools) > 0 }

// Contains reports whether any message of r with role (any role when empty) contains text.
func (r Request) Contains(role, text string) bool {
	for _, m := range r.Messages {
		if (role == "" || m.Role == role) && strings.Contains(m.Text, text) {
			return true
		}
	}
	return false
}

// New starts a fake model server speaking p's API on a loopback port. Close it when done.
func New(p Provider) *Server {
	s, err := Listen(p, "")
	if err != nil {
		panic("fakemodel: " + err.Error())
	}
	return s
}

// Listen is New on addr (host:port; empty: a free loopback port).
func Listen(p Provider, addr string) (*Server, error) {
	s := &Server{Provider: p, ChunkDelay: DefaultChunkDelay}
	var h http.Handler
	switch p {
	case Anthropic:
		h = http.HandlerFunc(s.anthropic)
	case OpenAI:
		h = http.HandlerFunc(s.openai)
	case Gemini:
		h = http.HandlerFunc(s.gemini)
	default:
		return nil, fmt.Errorf("unknown provider %q", p)
	}
	s.srv = httptest.NewUnstartedServer(h)
	if addr != "" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		_ = s.srv.Listener.Close()
		s.srv.Listener = l
	}
	s.srv.Start()
	s.URL = s.srv.URL
	return s, nil
}

// Close stops the server, cutting open streams.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Requests returns a copy of every request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// MainRequests returns the requests of the agent's main loop (see Request.IsMain).
func (s *Server) MainRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.IsMain() {
			out = append(out, r)
		}
	}
	return out
}

// Changed returns a channel closed at the next request the server records: a test waits on
// it instead of sleeping.
func (s *Server) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := make(chan struct{})
	s.waiters = append(s.waiters, c)
	return c
}

// record stores r (Seq and At set) and returns its index.
func (s *Server) record(r Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	r.Seq = s.seq
	r.At = time.Now()
	s.reqs = append(s.reqs, r)
	for _, c := range s.waiters {
		close(c)
	}
	s.waiters = nil
	return len(s.reqs) - 1
}

// answered fills in the reply and usage of the request at index i.
func (s *Server) answered(i int, rep Reply, u Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs[i].Reply = rep
	s.reqs[i].Usage = u
}

// readRequest reads r's body and the fields common to every provider.
func readRequest(r *http.Request) (Request, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		return Request{}, err
	}
	return Request{
		Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body,
	}, nil
}

// Env returns the conventional environment variables of s's provider (its base URL and
// key), as KEY=VALUE: what Claude Code and Gemini CLI read. Agents configured by a file
// (Codex's config.toml, OpenCode's opencode.json) get theirs from Agent.Setup; Codex 0.166
// does not take OPENAI_BASE_URL for its built-in provider.
func (s *Server) Env() []string {
	switch s.Provider {
	case Anthropic:
		return []string{"ANTHROPIC_BASE_URL=" + s.URL, "ANTHROPIC_API_KEY=" + APIKey}
	case OpenAI:
		return []string{"OPENAI_BASE_URL=" + s.URL + "/v1", "OPENAI_API_KEY=" + APIKey}
	case Gemini:
		return []string{"GOOGLE_GEMINI_BASE_URL=" + s.URL, "GEMINI_API_KEY=" + APIKey}
	}
	return nil
}

// The script.

// Directive is what the script asks of one reply.
type Directive struct {
	// Kind is "reply", "slow", "tool" or "echo".
	Kind string
	// Text is the reply's text (reply, echo) or the slow chunks' stem.
	Text string
	// N is the number of chunks of a slow reply.
	N int
	// Tool is "write", "read" or "bash"; Path, Content and Command its arguments.
	Tool    string
	Path    string
	Content string
	Command string
	// Options are the choices of an ask (Text is its question).
	Options []string
}

// ParseDirective reads the script of a user message's text (see the package doc).
func ParseDirective(text string) Directive {
	lines := strings.Split(text, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if d, ok := parseLine(strings.TrimSpace(lines[i])); ok {
			return d
		}
	}
	last := ""
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			last = l
			break
		}
	}
	return Directive{Kind: "echo", Text: "echo: " + last}
}

func parseLine(l string) (Directive, bool) {
	verb, rest, ok := strings.Cut(l, ":")
	if !ok {
		return Directive{}, false
	}
	rest = strings.TrimSpace(rest)
	switch verb {
	case "reply":
		return Directive{Kind: "reply", Text: rest}, rest != ""
	case "slow":
		nStr, stem, _ := strings.Cut(rest, " ")
		n, err := strconv.Atoi(nStr)
		if err != nil || n <= 0 {
			return Directive{}, false
		}
		if stem = strings.TrimSpace(stem); stem == "" {
			stem = "chunk"
		}
		return Directive{Kind: "slow", N: n, Text: stem}, true
	case "tool":
		tool, args, _ := strings.Cut(rest, " ")
		args = strings.TrimSpace(args)
		switch tool {
		case "write":
			path, content, _ := strings.Cut(args, " ")
			return Directive{Kind: "tool", Tool: "write", Path: path, Content: content}, path != ""
		case "read":
			return Directive{Kind: "tool", Tool: "read", Path: args}, args != ""
		case "bash":
			return Directive{Kind: "tool", Tool: "bash", Command: args}, args != ""
		case "ask":
			return parseAsk(args)
		case "mcp-ask":
			d, ok := parseAsk(args)
			d.Tool = "mcp-ask"
			return d, ok
		}
	}
	return Directive{}, false
}

// toolResultReply is the final text after a tool result came back.
func toolResultReply(result string) string {
	one := strings.Join(strings.Fields(result), " ")
	if len(one) > 300 {
		one = one[:300]
	}
	return "tool result: " + one
}

// chunksOf splits text into about n pieces at word boundaries (at least one).
func chunksOf(text string, n int) []string {
	words := strings.SplitAfter(text, " ")
	if len(words) <= n {
		return words
	}
	per := (len(words) + n - 1) / n
	var out []string
	for i := 0; i < len(words); i += per {
		end := min(i+per, len(words))
		out = append(out, strings.Join(words[i:end], ""))
	}
	return out
}

// plan is what the server will send for one request.
type plan struct {
	chunks []string // text chunks (empty when a tool is called)
	delay  time.Duration
	tool   *toolCall
}

func (p plan) text() string { return strings.Join(p.chunks, "") }

// toolCall is a call of one of the agent's tools.
type toolCall struct {
	Name string
	Args map[string]any
	// Freeform is the raw input of a freeform (custom) tool such as Codex's apply_patch;
	// Args is nil then.
	Freeform string
}

// tool is one tool a request offers: its name and the properties of its parameters.
type tool struct {
	Name   string
	Props  map[string]any
	Custom bool // a freeform tool (OpenAI custom tool): takes raw text
}

// decide turns the conversation's last user text (or tool result) into a plan.
func (s *Server) decide(lastUser string, toolResult *string, tools []tool, schema json.RawMessage) plan {
	d := ParseDirective(lastUser)
	if toolResult != nil && d.Kind == "echo" {
		return plan{chunks: chunksOf(toolResultReply(*toolResult), 3)}
	}
	if len(schema) > 0 {
		return plan{chunks: []string{jsonForSchema(schema, d)}}
	}
	switch d.Kind {
	case "slow":
		p := plan{delay: s.ChunkDelay}
		for i := 1; i <= d.N; i++ {
			p.chunks = append(p.chunks, fmt.Sprintf("%s %d ", d.Text, i))
		}
		return p
	case "tool":
		if tc := pickTool(d, tools); tc != nil {
			return plan{tool: tc}
		}
		return plan{chunks: chunksOf("no tool offered for "+d.Tool, 3)}
	default:
		return plan{chunks: chunksOf(d.Text, 4)}
	}
}

// Tool names each agent gives its tools, by directive.
var toolNames = map[string][]string{
	"write": {"Write", "write", "write_file", "apply_patch"},
	"read":  {"Read", "read", "read_file"},
	"bash":  {"Bash", "bash", "run_shell_command", "exec_command", "shell", "shell_command"},
}

// pickTool builds the call of d's tool from the tools offered, nil when none fits. A shell
// tool stands in for a missing write or read tool.
func pickTool(d Directive, tools []tool) *toolCall {
	switch d.Tool {
	case "ask":
		return pickAsk(d, tools)
	case "mcp-ask":
		return pickMCPAsk(d, tools)
	}
	find := func(kind string) *tool {
		for _, name := range toolNames[kind] {
			for i := range tools {
				if tools[i].Name == name {
					return &tools[i]
				}
			}
		}
		return nil
	}
	if t := find(d.Tool); t != nil && !isShell(t.Name) {
		if t.Name == "apply_patch" {
			patch := "*** Begin Patch\n*** Add File: " + d.Path + "\n+" + d.Content + "\n*** End Patch\n"
			if t.Custom {
				return &toolCall{Name: t.Name, Freeform: patch}
			}
			return &toolCall{Name: t.Name, Args: map[string]any{"input": patch}}
		}
		args := map[string]any{}
		setArg(args, t, d.Path, "file_path", "filePath", "absolute_path", "path")
		if d.Tool == "write" {
			setArg(args, t, d.Content, "content", "text")
		}
		return &toolCall{Name: t.Name, Args: args}
	}
	t := find("bash")
	if t == nil {
		return nil
	}
	cmd := d.Command
	switch d.Tool {
	case "write":
		cmd = fmt.Sprintf("printf '%%s' %s > %s", shellQuote(d.Content), shellQuote(d.Path))
	case "read":
		cmd = "cat " + shellQuote(d.Path)
	}
	args := map[string]any{}
	setArg(args, t, cmd, "command", "cmd")
	setArg(args, t, "a command the fake model runs", "description")
	if _, ok := t.Props["sandbox_permissions"]; ok {
		// Codex runs commands in its sandbox unasked and asks only for the ones the model
		// wants run outside it: so does this model, for every command it runs.
		args["sandbox_permissions"] = "require_escalated"
		args["justification"] = "the fake model's script asks to run this"
	}
	return &toolCall{Name: t.Name, Args: args}
}

// setArg sets value under the first of names that t's schema has.
func setArg(args map[string]any, t *tool, value string, names ...string) {
	for _, n := range names {
		if _, ok := t.Props[n]; ok {
			args[n] = value
			return
		}
	}
}

func isShell(name string) bool {
	for _, n := range toolNames["bash"] {
		if n == name {
			return true
		}
	}
	return false
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// jsonForSchema answers a structured-output request with an object that fits schema: the
// directive's text for string properties, zero values for the rest.
func jsonForSchema(schema json.RawMessage, d Directive) string {
	var sc struct {
		Properties map[string]struct {
			Type any   `json:"type"`
			Enum []any `json:"enum"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(schema, &sc)
	text := d.Text
	if text == "" {
		text = "fake"
	}
	obj := map[string]any{}
	for name, p := range sc.Properties {
		typ, _ := p.Type.(string) // Gemini's schemas spell types in capitals
		switch {
		case len(p.Enum) > 0:
			obj[name] = p.Enum[0]
		case strings.EqualFold(typ, "boolean"):
			obj[name] = false
		case strings.EqualFold(typ, "number"), strings.EqualFold(typ, "integer"):
			obj[name] = 0
		case strings.EqualFold(typ, "array"):
			obj[name] = []any{}
		case strings.EqualFold(typ, "object"):
			obj[name] = map[string]any{}
		default:
			obj[name] = text
		}
	}
	b, _ := json.Marshal(obj)
	return string(b)
}

// usageFor is the usage reported for a request body and the reply's text.
func usageFor(body []byte, reply string) Usage {
	return Usage{Input: len(body) / 4, Output: len(reply)/4 + 1}
}

// sse writes server-sent events, flushing each.
type sse struct {
	w  http.ResponseWriter
	fl http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	return &sse{w: w, fl: fl}
}

// event writes one event; name may be empty (data only). It reports whether the client is
// still there.
func (e *sse) event(name string, data any) bool {
	var b bytes.Buffer
	if name != "" {
		fmt.Fprintf(&b, "event: %s\n", name)
	}
	js, _ := json.Marshal(data)
	fmt.Fprintf(&b, "data: %s\n\n", js)
	if _, err := e.w.Write(b.Bytes()); err != nil {
		return false
	}
	if e.fl != nil {
		e.fl.Flush()
	}
	return true
}

// pause waits d, or reports false when the client went away first.
func pause(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return r.Context().Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func newID(prefix string, n int) string { return fmt.Sprintf("%s_fake%06d", prefix, n) }

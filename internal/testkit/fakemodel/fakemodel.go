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
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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

// usageFor is the usage reported for a request body and the reply's text.
func usageFor(body []byte, reply string) Usage {
	return Usage{Input: len(body) / 4, Output: len(reply)/4 + 1}
}

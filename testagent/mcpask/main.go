// Command mcpask is an MCP server (stdio, newline-delimited JSON-RPC) for tests: one tool,
// ask {question, options}, that asks its client's user with MCP's elicitation/create (a form
// with one single-select field, choice) and answers with what the person chose. It shows
// that a question an agent's MCP server asks reaches a person through tacp as any other.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type server struct {
	mu      sync.Mutex
	out     *json.Encoder
	next    int
	pending map[string]chan message // by our request's id
}

func (s *server) send(m message) {
	m.JSONRPC = "2.0"
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.out.Encode(m)
}

func (s *server) reply(id json.RawMessage, result any) {
	b, _ := json.Marshal(result)
	s.send(message{ID: id, Result: b})
}

// ask sends the client a request and waits for its answer.
func (s *server) ask(method string, params any) message {
	s.mu.Lock()
	s.next++
	id := fmt.Sprintf(`"mcpask-%d"`, s.next)
	ch := make(chan message, 1)
	s.pending[id] = ch
	s.mu.Unlock()
	b, _ := json.Marshal(params)
	s.send(message{ID: json.RawMessage(id), Method: method, Params: b})
	return <-ch
}

func (s *server) handle(m message) {
	switch m.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(m.Params, &p)
		s.reply(m.ID, map[string]any{
			"protocolVersion": p.ProtocolVersion,
			"capabilities":    map[string]any{"tools": map[string]any{}},
			"serverInfo":      map[string]any{"name": "mcpask", "version": "1"},
		})
	case "tools/list":
		s.reply(m.ID, map[string]any{"tools": []any{map[string]any{
			"name":        "ask",
			"description": "Ask the user to choose one of the options; returns the choice.",
			"inputSchema": map[string]any{"type": "object", "required": []string{"question", "options"}, "properties": map[string]any{
				"question": map[string]any{"type": "string"},
				"options":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			}},
		}}})
	case "tools/call":
		go s.call(m)
	case "ping":
		s.reply(m.ID, map[string]any{})
	default:
		if len(m.ID) > 0 {
			s.send(message{ID: m.ID, Error: &rpcError{Code: -32601, Message: "method not found: " + m.Method}})
		}
	}
}

func (s *server) call(m message) {
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			Question string   `json:"question"`
			Options  []string `json:"options"`
		} `json:"arguments"`
	}
	_ = json.Unmarshal(m.Params, &p)
	text := func(t string, isErr bool) {
		s.reply(m.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": t}}, "isError": isErr})
	}
	if p.Name != "ask" || len(p.Arguments.Options) == 0 {
		text("ask needs a question and options", true)
		return
	}
	ans := s.ask("elicitation/create", map[string]any{
		"message": p.Arguments.Question,
		"requestedSchema": map[string]any{"type": "object", "required": []string{"choice"}, "properties": map[string]any{
			"choice": map[string]any{"type": "string", "title": "Choice", "enum": p.Arguments.Options},
		}},
	})
	if ans.Error != nil {
		text("the question failed: "+ans.Error.Message, true)
		return
	}
	var r struct {
		Action  string `json:"action"`
		Content struct {
			Choice string `json:"choice"`
		} `json:"content"`
	}
	_ = json.Unmarshal(ans.Result, &r)
	if r.Action != "accept" {
		text("the person did not answer ("+r.Action+")", false)
		return
	}
	text("the person chose "+r.Content.Choice, false)
}

func main() {
	s := &server{out: json.NewEncoder(os.Stdout), pending: map[string]chan message{}}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	for in.Scan() {
		var m message
		if json.Unmarshal(in.Bytes(), &m) != nil {
			continue
		}
		if m.Method == "" && len(m.ID) > 0 { // an answer to our request
			s.mu.Lock()
			ch := s.pending[string(m.ID)]
			delete(s.pending, string(m.ID))
			s.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		s.handle(m)
	}
}

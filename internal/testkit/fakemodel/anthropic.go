package fakemodel

// The Anthropic Messages API as Claude Code (through claude-agent-acp and the Claude Agent
// SDK) and OpenCode's anthropic provider call it.

import (
	"encoding/json"
	"net/http"
	"strings"
)

type anthropicRequest struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string `json:"name"`
		InputSchema struct {
			Properties map[string]any `json:"properties"`
		} `json:"input_schema"`
	} `json:"tools"`
	OutputConfig struct {
		Format struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Name      string          `json:"name"`
	Content   json.RawMessage `json:"content"` // tool_result: a string or blocks
	ToolUseID string          `json:"tool_use_id"`
}

// anthropicBlocks reads a content field: a string or an array of blocks.
func anthropicBlocks(raw json.RawMessage) []anthropicBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}
	}
	var bs []anthropicBlock
	_ = json.Unmarshal(raw, &bs)
	return bs
}

func anthropicText(bs []anthropicBlock) string {
	var parts []string
	for _, b := range bs {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (s *Server) anthropic(w http.ResponseWriter, r *http.Request) {
	rec, err := readRequest(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch {
	case r.Method == http.MethodHead || strings.HasPrefix(r.URL.Path, "/api/hello"):
		s.record(rec)
		w.WriteHeader(http.StatusOK)
		return
	case strings.HasPrefix(r.URL.Path, "/v1/models"):
		s.record(rec)
		writeJSON(w, http.StatusOK, map[string]any{
			"data": []any{map[string]any{
				"type": "model", "id": "claude-fake-1", "display_name": "Claude Fake 1", "created_at": "2026-01-01T00:00:00Z",
			}},
			"has_more": false, "first_id": "claude-fake-1", "last_id": "claude-fake-1",
		})
		return
	case r.URL.Path == "/v1/messages/count_tokens":
		s.record(rec)
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": len(rec.Body) / 4})
		return
	case r.URL.Path != "/v1/messages" || r.Method != http.MethodPost:
		s.record(rec)
		writeJSON(w, http.StatusNotFound, map[string]any{"type": "error", "error": map[string]any{"type": "not_found_error", "message": "fakemodel: no " + r.URL.Path}})
		return
	}
	var req anthropicRequest
	if err := json.Unmarshal(rec.Body, &req); err != nil {
		s.record(rec)
		writeJSON(w, http.StatusBadRequest, map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": err.Error()}})
		return
	}
	rec.Model, rec.Stream = req.Model, req.Stream
	var tools []tool
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Name)
		tools = append(tools, tool{Name: t.Name, Props: t.InputSchema.Properties})
	}
	if len(req.System) > 0 {
		rec.Messages = append(rec.Messages, Message{Role: "system", Text: anthropicText(anthropicBlocks(req.System))})
	}
	// The last user message decides: its text, or the result of a tool it carries.
	lastUser := ""
	var result *string
	var userTexts []string
	for _, m := range req.Messages {
		bs := anthropicBlocks(m.Content)
		msg := Message{Role: m.Role, Text: anthropicText(bs)}
		var res *string
		for _, b := range bs {
			switch b.Type {
			case "tool_use":
				msg.ToolCall = b.Name
			case "tool_result":
				t := anthropicText(anthropicBlocks(b.Content))
				rec.Messages = append(rec.Messages, Message{Role: "tool", Text: t})
				if res == nil {
					res = &t
				}
			}
		}
		if m.Role == "user" {
			lastUser, result = msg.Text, res
			userTexts = append(userTexts, msg.Text)
		}
		rec.Messages = append(rec.Messages, msg)
	}
	var schema json.RawMessage
	if req.OutputConfig.Format.Type == "json_schema" {
		schema = req.OutputConfig.Format.Schema
	}
	if q, ok := askAgain(lastUser, userTexts); ok {
		lastUser, result = q, nil
	}
	idx := s.record(rec)
	if result == nil && s.limit(w, idx, lastUser) {
		return
	}
	p := s.decide(lastUser, result, tools, schema)
	s.sendAnthropic(w, r, idx, req.Model, req.Stream, p)
}

func (s *Server) sendAnthropic(w http.ResponseWriter, r *http.Request, idx int, model string, stream bool, p plan) {
	rec := s.Requests()[idx]
	id := newID("msg", rec.Seq)
	stop := "end_turn"
	var content []any
	rep := Reply{Text: p.text(), Chunks: len(p.chunks)}
	var toolID, toolJSON string
	if p.tool != nil {
		stop = "tool_use"
		toolID = newID("toolu", rec.Seq)
		js, _ := json.Marshal(p.tool.Args)
		toolJSON = string(js)
		rep.ToolCall, rep.Args = p.tool.Name, p.tool.Args
		content = append(content, map[string]any{"type": "tool_use", "id": toolID, "name": p.tool.Name, "input": p.tool.Args})
	} else {
		content = append(content, map[string]any{"type": "text", "text": rep.Text})
	}
	u := usageFor(rec.Body, rep.Text+toolJSON)
	s.answered(idx, rep, u)
	usage := map[string]any{"input_tokens": u.Input, "output_tokens": u.Output, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	if !stream {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": model, "content": content,
			"stop_reason": stop, "stop_sequence": nil, "usage": usage,
		})
		return
	}
	e := newSSE(w)
	e.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": u.Input, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	if p.tool != nil {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": toolID, "name": p.tool.Name, "input": map[string]any{}}})
		half := len(toolJSON) / 2
		for _, part := range []string{toolJSON[:half], toolJSON[half:]} {
			e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
	} else {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		for i, c := range p.chunks {
			if i > 0 && !pause(r, p.delay) {
				return
			}
			if !e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "text_delta", "text": c}}) {
				return
			}
		}
	}
	e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	e.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": u.Output}})
	e.event("message_stop", map[string]any{"type": "message_stop"})
}

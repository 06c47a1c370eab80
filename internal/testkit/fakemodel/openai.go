package fakemodel

// The OpenAI Responses API as Codex (through codex-acp and `codex app-server`) calls it.

import (
	"encoding/json"
	"net/http"
	"strings"
)

type openaiRequest struct {
	Model        string          `json:"model"`
	Stream       bool            `json:"stream"`
	Instructions string          `json:"instructions"`
	Input        json.RawMessage `json:"input"`
	Tools        []struct {
		Type       string `json:"type"`
		Name       string `json:"name"`
		Parameters struct {
			Properties map[string]any `json:"properties"`
		} `json:"parameters"`
	} `json:"tools"`
	Text struct {
		Format struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"text"`
}

type openaiItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Name    string          `json:"name"`
	Output  json.RawMessage `json:"output"`
}

// openaiText reads a content or output field: a string or an array of parts with text.
func openaiText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		if p.Text != "" {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}

func (s *Server) openai(w http.ResponseWriter, r *http.Request) {
	rec, err := readRequest(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch {
	case strings.HasSuffix(r.URL.Path, "/models"):
		s.record(rec)
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{
			map[string]any{"id": "gpt-fake-1", "object": "model", "created": 0, "owned_by": "fakemodel"},
		}})
		return
	case !strings.HasSuffix(r.URL.Path, "/responses") || r.Method != http.MethodPost:
		s.record(rec)
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"message": "fakemodel: no " + r.URL.Path, "type": "invalid_request_error"}})
		return
	}
	var req openaiRequest
	if err := json.Unmarshal(rec.Body, &req); err != nil {
		s.record(rec)
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": err.Error(), "type": "invalid_request_error"}})
		return
	}
	rec.Model, rec.Stream = req.Model, req.Stream
	var tools []tool
	for _, t := range req.Tools {
		if t.Name == "" {
			continue // a built-in tool such as web_search
		}
		rec.Tools = append(rec.Tools, t.Name)
		tools = append(tools, tool{Name: t.Name, Props: t.Parameters.Properties, Custom: t.Type == "custom"})
	}
	if req.Instructions != "" {
		rec.Messages = append(rec.Messages, Message{Role: "system", Text: req.Instructions})
	}
	var items []openaiItem
	var whole string
	if json.Unmarshal(req.Input, &whole) == nil {
		items = []openaiItem{{Type: "message", Role: "user", Content: req.Input}}
	} else {
		_ = json.Unmarshal(req.Input, &items)
	}
	// The later of the last user message and the last tool output decides.
	lastUser := ""
	var result *string
	for _, it := range items {
		switch it.Type {
		case "message", "":
			role := it.Role
			if role == "developer" {
				role = "system"
			}
			t := openaiText(it.Content)
			rec.Messages = append(rec.Messages, Message{Role: role, Text: t})
			if role == "user" {
				lastUser, result = t, nil
			}
		case "function_call", "custom_tool_call":
			rec.Messages = append(rec.Messages, Message{Role: "assistant", ToolCall: it.Name})
		case "function_call_output", "custom_tool_call_output":
			t := openaiText(it.Output)
			rec.Messages = append(rec.Messages, Message{Role: "tool", Text: t})
			lastUser, result = "", &t
		}
	}
	var schema json.RawMessage
	if req.Text.Format.Type == "json_schema" {
		schema = req.Text.Format.Schema
	}
	idx := s.record(rec)
	if result == nil && s.limit(w, idx, lastUser) {
		return
	}
	s.sendOpenAI(w, r, idx, req.Model, s.decide(lastUser, result, tools, schema))
}

func (s *Server) sendOpenAI(w http.ResponseWriter, r *http.Request, idx int, model string, p plan) {
	rec := s.Requests()[idx]
	respID := newID("resp", rec.Seq)
	rep := Reply{Text: p.text(), Chunks: len(p.chunks)}
	var item map[string]any
	callJSON := ""
	if p.tool != nil {
		rep.ToolCall, rep.Args = p.tool.Name, p.tool.Args
		callID := newID("call", rec.Seq)
		if p.tool.Args == nil {
			callJSON = p.tool.Freeform
			item = map[string]any{"type": "custom_tool_call", "id": newID("ctc", rec.Seq), "call_id": callID,
				"name": p.tool.Name, "input": p.tool.Freeform, "status": "completed"}
		} else {
			js, _ := json.Marshal(p.tool.Args)
			callJSON = string(js)
			item = map[string]any{"type": "function_call", "id": newID("fc", rec.Seq), "call_id": callID,
				"name": p.tool.Name, "arguments": callJSON, "status": "completed"}
		}
	}
	u := usageFor(rec.Body, rep.Text+callJSON)
	s.answered(idx, rep, u)
	usage := map[string]any{
		"input_tokens": u.Input, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": u.Output, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": u.Input + u.Output,
	}
	resp := func(status string, output []any) map[string]any {
		m := map[string]any{"id": respID, "object": "response", "model": model, "status": status, "output": output}
		if status == "completed" {
			m["usage"] = usage
		}
		return m
	}
	e := newSSE(w)
	e.event("response.created", map[string]any{"type": "response.created", "response": resp("in_progress", []any{})})
	if item == nil {
		msgID := newID("msg", rec.Seq)
		e.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0,
			"item": map[string]any{"type": "message", "id": msgID, "role": "assistant", "status": "in_progress", "content": []any{}}})
		for i, c := range p.chunks {
			if i > 0 && !pause(r, p.delay) {
				return
			}
			if !e.event("response.output_text.delta", map[string]any{"type": "response.output_text.delta",
				"item_id": msgID, "output_index": 0, "content_index": 0, "delta": c}) {
				return
			}
		}
		item = map[string]any{"type": "message", "id": msgID, "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": rep.Text, "annotations": []any{}}}}
	} else {
		e.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	}
	e.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	e.event("response.completed", map[string]any{"type": "response.completed", "response": resp("completed", []any{item})})
}

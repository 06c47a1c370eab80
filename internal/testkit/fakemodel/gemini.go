package fakemodel

// The Gemini API (generativelanguage v1beta) as Gemini CLI calls it:
// POST /v1beta/models/MODEL:streamGenerateContent?alt=sse, :generateContent, :countTokens.

import (
	"encoding/json"
	"net/http"
	"strings"
)

type geminiPart struct {
	Text         string `json:"text"`
	FunctionCall *struct {
		Name string `json:"name"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

type geminiRequest struct {
	Contents          []geminiContent `json:"contents"`
	SystemInstruction *geminiContent  `json:"systemInstruction"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name                 string `json:"name"`
			Parameters           schemaProps
			ParametersJSONSchema schemaProps `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	} `json:"generationConfig"`
}

type schemaProps struct {
	Properties map[string]any `json:"properties"`
}

func geminiText(ps []geminiPart) string {
	var out []string
	for _, p := range ps {
		if p.Text != "" {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}

func (s *Server) gemini(w http.ResponseWriter, r *http.Request) {
	rec, err := readRequest(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	path := r.URL.Path
	i := strings.Index(path, "/models/")
	model, method, ok := "", "", false
	if i >= 0 {
		model, method, ok = strings.Cut(path[i+len("/models/"):], ":")
	}
	rec.Model = model
	if !ok || r.Method != http.MethodPost {
		s.record(rec)
		if strings.HasSuffix(path, "/models") {
			writeJSON(w, http.StatusOK, map[string]any{"models": []any{map[string]any{"name": "models/gemini-fake-1"}}})
			return
		}
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"code": 404, "message": "fakemodel: no " + path, "status": "NOT_FOUND"}})
		return
	}
	if method == "countTokens" {
		s.record(rec)
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": len(rec.Body) / 4})
		return
	}
	var req geminiRequest
	if err := json.Unmarshal(rec.Body, &req); err != nil {
		s.record(rec)
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"code": 400, "message": err.Error(), "status": "INVALID_ARGUMENT"}})
		return
	}
	rec.Stream = method == "streamGenerateContent"
	var tools []tool
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			props := f.Parameters.Properties
			if props == nil {
				props = f.ParametersJSONSchema.Properties
			}
			rec.Tools = append(rec.Tools, f.Name)
			tools = append(tools, tool{Name: f.Name, Props: props})
		}
	}
	if req.SystemInstruction != nil {
		rec.Messages = append(rec.Messages, Message{Role: "system", Text: geminiText(req.SystemInstruction.Parts)})
	}
	lastUser := ""
	var result *string
	for _, c := range req.Contents {
		role := c.Role
		if role == "model" {
			role = "assistant"
		}
		msg := Message{Role: role, Text: geminiText(c.Parts)}
		var res *string
		for _, p := range c.Parts {
			if p.FunctionCall != nil {
				msg.ToolCall = p.FunctionCall.Name
			}
			if p.FunctionResponse != nil {
				t := string(p.FunctionResponse.Response)
				var out struct {
					Output string `json:"output"`
					Error  string `json:"error"`
				}
				if json.Unmarshal(p.FunctionResponse.Response, &out) == nil && out.Output+out.Error != "" {
					t = out.Output + out.Error
				}
				rec.Messages = append(rec.Messages, Message{Role: "tool", Text: t})
				if res == nil {
					res = &t
				}
			}
		}
		if role == "user" {
			lastUser, result = msg.Text, res
		}
		if msg.Text != "" || msg.ToolCall != "" {
			rec.Messages = append(rec.Messages, msg)
		}
	}
	var schema json.RawMessage
	if req.GenerationConfig.ResponseMimeType == "application/json" {
		schema = req.GenerationConfig.ResponseJSONSchema
		if len(schema) == 0 {
			schema = req.GenerationConfig.ResponseSchema
		}
		if len(schema) == 0 {
			schema = json.RawMessage(`{}`)
		}
	}
	idx := s.record(rec)
	s.sendGemini(w, r, idx, model, rec.Stream && strings.Contains(r.URL.RawQuery, "alt=sse"), rec.Stream, s.decide(lastUser, result, tools, schema))
}

func (s *Server) sendGemini(w http.ResponseWriter, r *http.Request, idx int, model string, sseOut, stream bool, p plan) {
	rec := s.Requests()[idx]
	rep := Reply{Text: p.text(), Chunks: len(p.chunks)}
	callJSON := ""
	if p.tool != nil {
		rep.ToolCall, rep.Args = p.tool.Name, p.tool.Args
		js, _ := json.Marshal(p.tool.Args)
		callJSON = string(js)
	}
	u := usageFor(rec.Body, rep.Text+callJSON)
	s.answered(idx, rep, u)
	chunk := func(parts []any, last bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		m := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": newID("resp", rec.Seq)}
		if last {
			cand["finishReason"] = "STOP"
			m["usageMetadata"] = map[string]any{"promptTokenCount": u.Input, "candidatesTokenCount": u.Output, "totalTokenCount": u.Input + u.Output}
		}
		return m
	}
	var chunks []map[string]any
	if p.tool != nil {
		chunks = append(chunks, chunk([]any{map[string]any{"functionCall": map[string]any{"name": p.tool.Name, "args": p.tool.Args}}}, true))
	} else {
		for i, c := range p.chunks {
			chunks = append(chunks, chunk([]any{map[string]any{"text": c}}, i == len(p.chunks)-1))
		}
	}
	if !stream {
		all := chunk([]any{map[string]any{"text": rep.Text}}, true)
		if p.tool != nil {
			all = chunks[0]
		}
		writeJSON(w, http.StatusOK, all)
		return
	}
	if !sseOut {
		writeJSON(w, http.StatusOK, chunks)
		return
	}
	e := newSSE(w)
	for i, c := range chunks {
		if i > 0 && !pause(r, p.delay) {
			return
		}
		if !e.event("", c) {
			return
		}
	}
}

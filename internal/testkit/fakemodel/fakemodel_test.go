package fakemodel

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseDirective(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Directive
	}{
		{"reply: hello world", Directive{Kind: "reply", Text: "hello world"}},
		{"<system-reminder>\nstuff\n</system-reminder>\nreply: hi", Directive{Kind: "reply", Text: "hi"}},
		{"<session>\nreply: hi\n</session>\n\nWrite the title", Directive{Kind: "reply", Text: "hi"}},
		{"slow: 5", Directive{Kind: "slow", N: 5, Text: "chunk"}},
		{"slow: 3 tick", Directive{Kind: "slow", N: 3, Text: "tick"}},
		{"tool: write /tmp/a.txt hello there", Directive{Kind: "tool", Tool: "write", Path: "/tmp/a.txt", Content: "hello there"}},
		{"tool: read /tmp/a.txt", Directive{Kind: "tool", Tool: "read", Path: "/tmp/a.txt"}},
		{"tool: bash echo hi > x", Directive{Kind: "tool", Tool: "bash", Command: "echo hi > x"}},
		{"reply: first\nreply: second", Directive{Kind: "reply", Text: "second"}},
		{"just talk\n\n", Directive{Kind: "echo", Text: "echo: just talk"}},
		{"slow: many", Directive{Kind: "echo", Text: "echo: slow: many"}},
		{"tool: fly away", Directive{Kind: "echo", Text: "echo: tool: fly away"}},
	} {
		require.Equal(t, tc.want, ParseDirective(tc.text), tc.text)
	}
}

func TestChunksOf(t *testing.T) {
	require.Equal(t, []string{"a ", "b ", "c"}, chunksOf("a b c", 4))
	got := chunksOf("one two three four five six seven eight", 4)
	require.Len(t, got, 4)
	require.Equal(t, "one two three four five six seven eight", strings.Join(got, ""))
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data map[string]any
}

func post(t *testing.T, url string, body any) *http.Response {
	t.Helper()
	js, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(url, "application/json", strings.NewReader(string(js)))
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readSSE(t *testing.T, resp *http.Response) []sseEvent {
	t.Helper()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/event-stream")
	var out []sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var cur sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.data))
		case line == "":
			out = append(out, cur)
			cur = sseEvent{}
		}
	}
	require.NoError(t, sc.Err())
	return out
}

func field(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

// claudeTools is what Claude Code offers (the parts the server reads).
var claudeTools = []any{
	map[string]any{"name": "Write", "input_schema": map[string]any{"properties": map[string]any{"file_path": map[string]any{}, "content": map[string]any{}}}},
	map[string]any{"name": "Bash", "input_schema": map[string]any{"properties": map[string]any{"command": map[string]any{}, "description": map[string]any{}}}},
}

func TestAnthropicStreamsAReplyInChunksAndRecordsTheRequest(t *testing.T) {
	s := New(Anthropic)
	defer s.Close()
	changed := s.Changed()
	resp := post(t, s.URL+"/v1/messages?beta=true", map[string]any{
		"model": "claude-fake-1", "stream": true, "max_tokens": 100, "tools": claudeTools,
		"system": []any{map[string]any{"type": "text", "text": "be brief"}},
		"messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "<system-reminder>x</system-reminder>"},
			map[string]any{"type": "text", "text": "reply: the quick brown fox jumps over"},
		}}},
	})
	evs := readSSE(t, resp)
	<-changed
	var names []string
	var text strings.Builder
	deltas := 0
	for _, e := range evs {
		names = append(names, e.name)
		require.Equal(t, e.name, e.data["type"])
		if e.name == "content_block_delta" {
			deltas++
			text.WriteString(field(e.data, "delta", "text").(string))
		}
	}
	require.Equal(t, "content_block_start", names[1])
	require.Equal(t, []string{"content_block_stop", "message_delta", "message_stop"}, names[len(names)-3:])
	require.Equal(t, "message_start", names[0])
	require.GreaterOrEqual(t, deltas, 3)
	require.Equal(t, "the quick brown fox jumps over", text.String())
	require.Equal(t, "end_turn", field(evs[len(evs)-2].data, "delta", "stop_reason"))
	require.Positive(t, field(evs[len(evs)-2].data, "usage", "output_tokens"))

	reqs := s.Requests()
	require.Len(t, reqs, 1)
	r := reqs[0]
	require.Equal(t, "claude-fake-1", r.Model)
	require.True(t, r.Stream)
	require.True(t, r.IsMain())
	require.Equal(t, []string{"Write", "Bash"}, r.Tools)
	require.True(t, r.Contains("system", "be brief"))
	require.True(t, r.Contains("user", "reply: the quick"))
	require.Equal(t, "the quick brown fox jumps over", r.Reply.Text)
	require.Positive(t, r.Usage.Input)
}

func TestAnthropicToolUseThenTheFinalReplyAfterTheResult(t *testing.T) {
	s := New(Anthropic)
	defer s.Close()
	user := map[string]any{"role": "user", "content": "tool: write /w/a.txt hello file"}
	evs := readSSE(t, post(t, s.URL+"/v1/messages", map[string]any{
		"model": "m", "stream": true, "tools": claudeTools, "messages": []any{user},
	}))
	start := evs[1].data["content_block"].(map[string]any)
	require.Equal(t, "tool_use", start["type"])
	require.Equal(t, "Write", start["name"])
	var js strings.Builder
	for _, e := range evs {
		if e.name == "content_block_delta" {
			js.WriteString(field(e.data, "delta", "partial_json").(string))
		}
	}
	var input map[string]any
	require.NoError(t, json.Unmarshal([]byte(js.String()), &input))
	require.Equal(t, map[string]any{"file_path": "/w/a.txt", "content": "hello file"}, input)
	require.Equal(t, "tool_use", field(evs[len(evs)-2].data, "delta", "stop_reason"))

	// The agent runs the tool and sends its result back.
	evs = readSSE(t, post(t, s.URL+"/v1/messages", map[string]any{
		"model": "m", "stream": true, "tools": claudeTools, "messages": []any{user,
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": start["id"], "name": "Write", "input": input}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": start["id"], "content": "File created\nsuccessfully"}}},
		},
	}))
	var text strings.Builder
	for _, e := range evs {
		if e.name == "content_block_delta" {
			text.WriteString(field(e.data, "delta", "text").(string))
		}
	}
	require.Equal(t, "tool result: File created successfully", text.String())

	// A prompt sent with a refused call's result (OpenCode does) is a directive again.
	evs = readSSE(t, post(t, s.URL+"/v1/messages", map[string]any{
		"model": "m", "stream": true, "tools": claudeTools, "messages": []any{user,
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": start["id"], "name": "Write", "input": input}}},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "tool_result", "tool_use_id": start["id"], "content": "rejected", "is_error": true},
				map[string]any{"type": "text", "text": "reply: next prompt"},
			}},
		},
	}))
	require.Equal(t, "next prompt", s.Requests()[2].Reply.Text)
	r := s.Requests()[1]
	require.True(t, r.Contains("tool", "File created"))
	_ = evs
	require.Equal(t, "Write", r.Messages[1].ToolCall)
}

func TestAnthropicToolFallsBackToTheShellAndToTextWithoutTools(t *testing.T) {
	s := New(Anthropic)
	defer s.Close()
	bashOnly := []any{claudeTools[1]}
	evs := readSSE(t, post(t, s.URL+"/v1/messages", map[string]any{
		"model": "m", "stream": true, "tools": bashOnly, "messages": []any{map[string]any{"role": "user", "content": "tool: write /w/a b"}},
	}))
	require.Equal(t, "Bash", field(evs[1].data, "content_block", "name"))
	require.Equal(t, "printf '%s' 'b' > '/w/a'", s.Requests()[0].Reply.Args["command"])

	// A side request (no tools) gets text, as JSON when it asks for a schema.
	resp := post(t, s.URL+"/v1/messages", map[string]any{
		"model": "m", "stream": false, "messages": []any{map[string]any{"role": "user", "content": "<session>\nreply: Title words\n</session>"}},
		"output_config": map[string]any{"format": map[string]any{"type": "json_schema", "schema": map[string]any{"properties": map[string]any{"title": map[string]any{"type": "string"}}}}},
	})
	var msg map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&msg))
	require.Equal(t, "end_turn", msg["stop_reason"])
	content := msg["content"].([]any)[0].(map[string]any)
	require.JSONEq(t, `{"title":"Title words"}`, content["text"].(string))
	require.False(t, s.Requests()[1].IsMain())
}

func TestAnthropicSideEndpoints(t *testing.T) {
	s := New(Anthropic)
	defer s.Close()
	req, _ := http.NewRequest(http.MethodHead, s.URL+"/api/hello", nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var n map[string]any
	require.NoError(t, json.NewDecoder(post(t, s.URL+"/v1/messages/count_tokens", map[string]any{"model": "m"}).Body).Decode(&n))
	require.Contains(t, n, "input_tokens")
	resp, err = http.Get(s.URL + "/v1/models")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()
	require.Len(t, s.Requests(), 3)
}

func TestSlowReplyStopsWhenTheClientGoesAway(t *testing.T) {
	s := New(Anthropic)
	defer s.Close()
	s.ChunkDelay = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"slow: 1000 tick"}]}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/messages", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	sc := bufio.NewScanner(resp.Body)
	var got []string
	for sc.Scan() && len(got) < 3 {
		if strings.Contains(sc.Text(), "text_delta") {
			got = append(got, sc.Text())
		}
	}
	require.Contains(t, got[2], "tick 3 ")
	cancel()
	resp.Body.Close()
	require.Equal(t, 1000, s.Requests()[0].Reply.Chunks)
}

func TestOpenAIResponsesStreamsTextAndCallsTools(t *testing.T) {
	s := New(OpenAI)
	defer s.Close()
	tools := []any{
		map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{"properties": map[string]any{"cmd": map[string]any{}, "justification": map[string]any{}}}},
		map[string]any{"type": "web_search"},
	}
	dev := map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "you are codex"}}}
	user := map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "reply: one two three four"}}}
	evs := readSSE(t, post(t, s.URL+"/v1/responses", map[string]any{"model": "gpt-fake", "stream": true, "tools": tools, "input": []any{dev, user}}))
	var text strings.Builder
	for _, e := range evs {
		require.Equal(t, e.name, e.data["type"])
		if e.name == "response.output_text.delta" {
			text.WriteString(e.data["delta"].(string))
		}
	}
	require.Equal(t, "one two three four", text.String())
	last := evs[len(evs)-1]
	require.Equal(t, "response.completed", last.name)
	require.Positive(t, field(last.data, "response", "usage", "output_tokens"))
	require.Equal(t, "one two three four", field(evs[len(evs)-2].data, "item", "content").([]any)[0].(map[string]any)["text"])
	r := s.Requests()[0]
	require.Equal(t, []string{"exec_command"}, r.Tools)
	require.True(t, r.Contains("system", "you are codex"))

	// bash: a function call of exec_command; its output comes back; the final reply.
	user2 := map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "tool: bash echo hi"}}}
	evs = readSSE(t, post(t, s.URL+"/v1/responses", map[string]any{"model": "gpt-fake", "stream": true, "tools": tools, "input": []any{dev, user2}}))
	item := evs[len(evs)-2].data["item"].(map[string]any)
	require.Equal(t, "function_call", item["type"])
	require.Equal(t, "exec_command", item["name"])
	require.JSONEq(t, `{"cmd":"echo hi"}`, item["arguments"].(string))
	evs = readSSE(t, post(t, s.URL+"/v1/responses", map[string]any{"model": "gpt-fake", "stream": true, "tools": tools, "input": []any{dev, user2,
		map[string]any{"type": "function_call", "name": "exec_command", "arguments": item["arguments"], "call_id": item["call_id"]},
		map[string]any{"type": "function_call_output", "call_id": item["call_id"], "output": "Process exited with code 0\nOutput:\nhi"},
	}}))
	text.Reset()
	for _, e := range evs {
		if e.name == "response.output_text.delta" {
			text.WriteString(e.data["delta"].(string))
		}
	}
	require.Equal(t, "tool result: Process exited with code 0 Output: hi", text.String())
}

func TestOpenAIApplyPatchForWrites(t *testing.T) {
	s := New(OpenAI)
	defer s.Close()
	tools := []any{map[string]any{"type": "custom", "name": "apply_patch"}, map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{"properties": map[string]any{"cmd": map[string]any{}}}}}
	evs := readSSE(t, post(t, s.URL+"/v1/responses", map[string]any{"model": "m", "stream": true, "tools": tools, "input": "tool: write /w/x.txt some text"}))
	item := evs[len(evs)-2].data["item"].(map[string]any)
	require.Equal(t, "custom_tool_call", item["type"])
	require.Equal(t, "*** Begin Patch\n*** Add File: /w/x.txt\n+some text\n*** End Patch\n", item["input"])
}

func TestGeminiStreamGenerateContent(t *testing.T) {
	s := New(Gemini)
	defer s.Close()
	tools := []any{map[string]any{"functionDeclarations": []any{
		map[string]any{"name": "write_file", "parametersJsonSchema": map[string]any{"properties": map[string]any{"file_path": map[string]any{}, "content": map[string]any{}}}},
	}}}
	url := s.URL + "/v1beta/models/gemini-fake-1:streamGenerateContent?alt=sse"
	evs := readSSE(t, post(t, url, map[string]any{"tools": tools, "contents": []any{
		map[string]any{"role": "user", "parts": []any{map[string]any{"text": "reply: a b c d"}}},
	}}))
	var text strings.Builder
	for _, e := range evs {
		text.WriteString(field(e.data, "candidates").([]any)[0].(map[string]any)["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"].(string))
	}
	require.Equal(t, "a b c d", text.String())
	lastCand := field(evs[len(evs)-1].data, "candidates").([]any)[0].(map[string]any)
	require.Equal(t, "STOP", lastCand["finishReason"])
	require.Equal(t, "gemini-fake-1", s.Requests()[0].Model)

	evs = readSSE(t, post(t, url, map[string]any{"tools": tools, "contents": []any{
		map[string]any{"role": "user", "parts": []any{map[string]any{"text": "tool: write /w/g.txt gem"}}},
	}}))
	part := field(evs[0].data, "candidates").([]any)[0].(map[string]any)["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)
	require.Equal(t, map[string]any{"name": "write_file", "args": map[string]any{"file_path": "/w/g.txt", "content": "gem"}}, part["functionCall"])

	evs = readSSE(t, post(t, url, map[string]any{"tools": tools, "contents": []any{
		map[string]any{"role": "user", "parts": []any{map[string]any{"text": "tool: write /w/g.txt gem"}}},
		map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": "write_file", "args": map[string]any{}}}}},
		map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"name": "write_file", "response": map[string]any{"output": "wrote it"}}}}},
	}}))
	require.Contains(t, evs[0].data["candidates"].([]any)[0].(map[string]any)["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"], "tool result: ")
	require.Equal(t, "tool result: wrote it", s.Requests()[2].Reply.Text)
}

func TestJSONForSchemaFitsTheSchema(t *testing.T) {
	// Gemini CLI's router asks for capitalized types; Claude Code's title for a string.
	got := jsonForSchema(json.RawMessage(`{"type":"OBJECT","properties":{
		"complexity_reasoning":{"type":"STRING"},"complexity_score":{"type":"INTEGER"},
		"model":{"type":"string","enum":["flash","pro"]},"ok":{"type":"boolean"},"tags":{"type":"array"}}}`),
		Directive{Kind: "reply", Text: "why"})
	require.JSONEq(t, `{"complexity_reasoning":"why","complexity_score":0,"model":"flash","ok":false,"tags":[]}`, got)
	require.JSONEq(t, `{"title":"fake"}`, jsonForSchema(json.RawMessage(`{"properties":{"title":{"type":"string"}}}`), Directive{Kind: "tool"}))
}

func TestGeminiGenerateContentWithoutStreaming(t *testing.T) {
	s := New(Gemini)
	defer s.Close()
	resp := post(t, s.URL+"/v1beta/models/gemini-fake-lite:generateContent", map[string]any{
		"contents":         []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "route this"}}}},
		"generationConfig": map[string]any{"responseMimeType": "application/json", "responseJsonSchema": map[string]any{"properties": map[string]any{"score": map[string]any{"type": "NUMBER"}}}},
	})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	part := field(out, "candidates").([]any)[0].(map[string]any)["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)
	require.JSONEq(t, `{"score":0}`, part["text"].(string))
	var n map[string]any
	require.NoError(t, json.NewDecoder(post(t, s.URL+"/v1beta/models/gemini-fake-lite:countTokens", map[string]any{}).Body).Decode(&n))
	require.Contains(t, n, "totalTokens")
}

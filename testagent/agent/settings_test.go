package agent

import (
	"context"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

func TestSettingsOfferedSetAndSaid(t *testing.T) {
	h := startNoSession(t, Options{Settings: true})
	ctx := context.Background()
	resp, err := h.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: "/", McpServers: []acp.McpServer{
		{Http: &acp.McpServerHttpInline{Name: "docs", Type: "http", Url: "http://127.0.0.1:1/mcp", Headers: []acp.HttpHeader{}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	h.sid = resp.SessionId
	if resp.Modes == nil || resp.Modes.CurrentModeId != "default" || len(resp.Modes.AvailableModes) != 3 || len(resp.ConfigOptions) != 2 {
		t.Fatalf("offer: %+v %+v", resp.Modes, resp.ConfigOptions)
	}
	if _, err := h.conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: h.sid, ModeId: "plan"}); err != nil {
		t.Fatal(err)
	}
	_, err = h.conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: h.sid, ModeId: "dontAsk"})
	wantRequestError(t, err, -32602, "unknown mode")
	set, err := h.conn.SetSessionConfigOption(ctx, acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{SessionId: h.sid, ConfigId: "model", Value: "opus"}})
	if err != nil || len(set.ConfigOptions) != 2 || set.ConfigOptions[1].Select.CurrentValue != "opus" {
		t.Fatalf("set model: %v %+v", err, set)
	}
	_, err = h.conn.SetSessionConfigOption(ctx, acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{SessionId: h.sid, ConfigId: "model", Value: "gpt"}})
	wantRequestError(t, err, -32602, "no value")
	h.mustPrompt(t, "/settings", acp.StopReasonEndTurn)
	h.mustPrompt(t, "/mcp", acp.StopReasonEndTurn)
	got := strings.Join(texts(h.client.take()), "")
	if !strings.Contains(got, "settings mode=plan model=opus") || !strings.Contains(got, "mcp: http:docs") {
		t.Fatalf("said %q", got)
	}
}

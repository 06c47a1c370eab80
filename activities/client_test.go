package activities

// Tests of the agent command line splitter and of hostClient, tacp's side of ACP toward the
// agent: it fails permissions closed and refuses the capabilities it does not offer.

import (
	"context"
	"log/slog"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"
)

func TestSplitCommand(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"one word", "testagent", []string{"testagent"}},
		{"plain words", "testagent -transcripts /tmp/t", []string{"testagent", "-transcripts", "/tmp/t"}},
		{"runs of spaces and edges", "  a   b  ", []string{"a", "b"}},
		{"tabs and newlines separate", "a\tb\nc\r\nd", []string{"a", "b", "c", "d"}},
		{"single quotes group", `a 'b c' d`, []string{"a", "b c", "d"}},
		{"double quotes group", `a "b c" d`, []string{"a", "b c", "d"}},
		{"quotes keep tabs and newlines", "'a\tb\nc'", []string{"a\tb\nc"}},
		{"quotes join with adjacent text", `pre"mid dle"post x`, []string{"premid dlepost", "x"}},
		{"single quote inside double quotes", `"it's"`, []string{"it's"}},
		{"double quote inside single quotes", `'say "hi"'`, []string{`say "hi"`}},
		{"backslash escapes a space", `a\ b c`, []string{"a b", "c"}},
		{"backslash escapes a quote", `\"a\'`, []string{`"a'`}},
		{"backslash escapes a backslash", `a\\b`, []string{`a\b`}},
		{"backslash escapes inside double quotes", `"a\"b\\c"`, []string{`a"b\c`}},
		{"backslash is literal inside single quotes", `'a\b' 'c\'`, []string{`a\b`, `c\`}},
		{"double quoted empty string is an argument", `a "" b`, []string{"a", "", "b"}},
		{"single quoted empty string is an argument", `a '' b`, []string{"a", "", "b"}},
		{"lone quoted empty string", `""`, []string{""}},
		{"escaped space alone is an argument", `\ `, []string{" "}},
		{"unicode words", "agent ünï 'côdé x'", []string{"agent", "ünï", "côdé x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SplitCommand(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestSplitCommandErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"blank", " \t\n "},
		{"unterminated double quote", `a "b c`},
		{"unterminated single quote", `a 'b c`},
		{"quote closed by the other kind", `"a'`},
		{"trailing backslash", `a b\`},
		{"trailing backslash inside double quotes", `"a\`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SplitCommand(tt.in)
			require.Error(t, err)
			require.Nil(t, got)
		})
	}
}

func TestHostClientRequestPermissionFailsClosed(t *testing.T) {
	allow := acp.PermissionOption{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "allow"}
	allowAlways := acp.PermissionOption{Kind: acp.PermissionOptionKindAllowAlways, Name: "Always", OptionId: "allow_always"}
	rejectOnce := acp.PermissionOption{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "reject"}
	rejectAlways := acp.PermissionOption{Kind: acp.PermissionOptionKindRejectAlways, Name: "Never", OptionId: "never"}
	tests := []struct {
		name     string
		options  []acp.PermissionOption
		selected acp.PermissionOptionId // "" means cancelled
	}{
		{"reject once is selected", []acp.PermissionOption{allow, allowAlways, rejectOnce}, "reject"},
		{"reject always is selected", []acp.PermissionOption{allow, rejectAlways}, "never"},
		{"first reject option wins", []acp.PermissionOption{rejectAlways, rejectOnce}, "never"},
		{"only allow options: cancelled", []acp.PermissionOption{allow, allowAlways}, ""},
		{"no options: cancelled", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &hostClient{log: slog.New(slog.DiscardHandler)}
			resp, err := c.RequestPermission(context.Background(), acp.RequestPermissionRequest{
				SessionId: "s",
				ToolCall:  acp.ToolCallUpdate{ToolCallId: "call_1"},
				Options:   tt.options,
			})
			require.NoError(t, err)
			if tt.selected == "" {
				require.Nil(t, resp.Outcome.Selected)
				require.NotNil(t, resp.Outcome.Cancelled)
				return
			}
			require.Nil(t, resp.Outcome.Cancelled)
			require.NotNil(t, resp.Outcome.Selected)
			require.Equal(t, tt.selected, resp.Outcome.Selected.OptionId)
		})
	}
}

func TestHostClientRefusesCapabilitiesItDoesNotOffer(t *testing.T) {
	c := &hostClient{log: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	require.NoError(t, c.SessionUpdate(ctx, acp.SessionNotification{}))
	calls := map[string]func() error{
		"fs/read_text_file":      func() error { _, err := c.ReadTextFile(ctx, acp.ReadTextFileRequest{}); return err },
		"fs/write_text_file":     func() error { _, err := c.WriteTextFile(ctx, acp.WriteTextFileRequest{}); return err },
		"terminal/create":        func() error { _, err := c.CreateTerminal(ctx, acp.CreateTerminalRequest{}); return err },
		"terminal/kill":          func() error { _, err := c.KillTerminal(ctx, acp.KillTerminalRequest{}); return err },
		"terminal/output":        func() error { _, err := c.TerminalOutput(ctx, acp.TerminalOutputRequest{}); return err },
		"terminal/release":       func() error { _, err := c.ReleaseTerminal(ctx, acp.ReleaseTerminalRequest{}); return err },
		"terminal/wait_for_exit": func() error { _, err := c.WaitForTerminalExit(ctx, acp.WaitForTerminalExitRequest{}); return err },
	}
	for name, call := range calls {
		require.ErrorIs(t, call(), errNotOffered, name)
	}
}

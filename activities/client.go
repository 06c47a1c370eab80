package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"unicode"

	acp "github.com/coder/acp-go-sdk"
)

// hostClient is tacp's side of ACP toward one agent process. session/update is captured on
// the wire (agentProc.inspect), so SessionUpdate has nothing left to do; permission requests
// go to the turn running at the time (between turns they fail closed); files are served from
// the workspace sandbox (initialize offers both fs methods). No terminal capability is
// advertised (why: clientCapabilities), so those requests are refused.
type hostClient struct {
	log     *slog.Logger
	sandbox *Sandbox
	// noTypedFailures: initialize does not ask for typed failures (Profile.TypedFailures).
	noTypedFailures bool
	// nice is the agent's CPU priority (Host.AgentNice).
	nice int

	mu   sync.Mutex
	turn *liveTurn
}

func (c *hostClient) setTurn(lt *liveTurn) {
	c.mu.Lock()
	c.turn = lt
	c.mu.Unlock()
}

func (c *hostClient) current() *liveTurn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.turn
}

var errNotOffered = errors.New("tacp does not offer this capability")

func (c *hostClient) SessionUpdate(context.Context, acp.SessionNotification) error { return nil }

// RequestPermission asks the workflow through the running turn. With no turn running it
// fails closed: the agent gets its reject option (or cancelled when it offers none).
func (c *hostClient) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	if lt := c.current(); lt != nil {
		return lt.requestPermission(ctx, p)
	}
	c.log.Info("permission requested between turns: rejecting", "tool_call", p.ToolCall.ToolCallId)
	for _, o := range p.Options {
		if o.Kind == acp.PermissionOptionKindRejectOnce || o.Kind == acp.PermissionOptionKindRejectAlways {
			return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{
				Selected: &acp.RequestPermissionOutcomeSelected{OptionId: o.OptionId},
			}}, nil
		}
	}
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{
		Cancelled: &acp.RequestPermissionOutcomeCancelled{},
	}}, nil
}

func (c *hostClient) ReadTextFile(ctx context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	if c.sandbox == nil {
		return acp.ReadTextFileResponse{}, errNotOffered
	}
	return c.sandbox.ReadTextFile(ctx, p)
}

func (c *hostClient) WriteTextFile(ctx context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	if c.sandbox == nil {
		return acp.WriteTextFileResponse{}, errNotOffered
	}
	return c.sandbox.WriteTextFile(ctx, p)
}

func (c *hostClient) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, errNotOffered
}

func (c *hostClient) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, errNotOffered
}

func (c *hostClient) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, errNotOffered
}

func (c *hostClient) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, errNotOffered
}

func (c *hostClient) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, errNotOffered
}

// SplitCommand splits an agent command line into argv: words separated by spaces, with
// single or double quotes grouping words and backslash escaping the next character outside
// single quotes. No variables, globs or pipes: it is not a shell.
func SplitCommand(s string) ([]string, error) {
	var argv []string
	var cur strings.Builder
	inWord, quote, escaped := false, rune(0), false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped, inWord = true, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case unicode.IsSpace(r):
			if inWord {
				argv = append(argv, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 || escaped {
		return nil, fmt.Errorf("agent command %q: unterminated quote or escape", s)
	}
	if inWord {
		argv = append(argv, cur.String())
	}
	if len(argv) == 0 {
		return nil, errors.New("agent command is empty")
	}
	return argv, nil
}

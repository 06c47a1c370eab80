package agent

// The directive interpreter: run reads the directive on the first line of a prompt (the
// package comment lists them) and plays it — echoes, chunks, sleeps, tool calls walked
// through a permission request, elicitations, reads and writes through the client's fs
// methods, a shell command, an update kind no SDK knows.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coder/acp-go-sdk"
)

// run interprets the directive on the first line of text.
func (a *testAgent) run(ctx context.Context, s *session, text string) (acp.PromptResponse, error) {
	first, body, _ := strings.Cut(text, "\n")
	fields := strings.Fields(first)
	if len(fields) == 0 || !strings.HasPrefix(fields[0], "/") {
		fields = []string{""}
		body = text
	}
	dir, args := fields[0], fields[1:]
	usageErr := func(usage string) error {
		return acp.NewInvalidParams(map[string]any{"directive": dir, "error": "usage: " + usage})
	}

	var (
		err   error
		usage *acp.Usage
	)
	switch dir {
	case "", "/echo":
		if len(args) > 0 {
			return acp.PromptResponse{}, usageErr("/echo")
		}
		err = a.echo(ctx, s, body)
	case "/chunks":
		n, every, stamp, perr := parseChunks(args)
		if perr != nil {
			return acp.PromptResponse{}, usageErr("/chunks N [every DURATION] [stamp]")
		}
		err = a.chunks(ctx, s, n, every, stamp)
	case "/sleep":
		d, perr := parseDuration(args)
		if perr != nil {
			return acp.PromptResponse{}, usageErr("/sleep DURATION")
		}
		err = a.sleep(ctx, s, d)
	case "/permission":
		if len(args) < 1 || len(args) > 2 || !slices.Contains(toolKinds, acp.ToolKind(args[0])) {
			return acp.PromptResponse{}, usageErr(fmt.Sprintf("/permission KIND [TARGET] (KIND one of %v)", toolKinds))
		}
		target, path := "something", "README.md"
		if len(args) == 2 {
			target, path = args[1], args[1]
		}
		err = a.permission(ctx, s, acp.ToolKind(args[0]), target, path)
	case "/elicit-form":
		err = a.elicitForm(ctx, s, strings.Join(args, " "))
	case "/elicit-url":
		if len(args) != 1 {
			return acp.PromptResponse{}, usageErr("/elicit-url URL")
		}
		err = a.elicitURL(ctx, s, args[0])
	case "/pwd":
		dir, werr := os.Getwd()
		if werr != nil {
			return acp.PromptResponse{}, werr
		}
		err = a.say(s, "pwd: "+dir)
	case "/fail":
		return acp.PromptResponse{}, &acp.RequestError{Code: -32603, Message: "testagent: scripted failure"}
	case "/usage":
		var d time.Duration
		if len(args) > 0 {
			if d, err = parseDuration(args); err != nil {
				return acp.PromptResponse{}, usageErr("/usage [DURATION]")
			}
		}
		if err = a.say(s, "usage"); err == nil {
			err = a.emit(s, acp.SessionUpdate{UsageUpdate: &acp.SessionUsageUpdate{
				Used: 30, Size: 200000, Cost: &acp.Cost{Amount: 0.0125, Currency: "USD"},
			}})
		}
		if err == nil && d > 0 {
			err = a.sleep(ctx, s, d)
		}
		// The tokens were spent whether the turn ran to its end or was cancelled.
		usage = &acp.Usage{InputTokens: 10, OutputTokens: 20, TotalTokens: 38, CachedReadTokens: acp.Ptr(5), ThoughtTokens: acp.Ptr(3)}
	case "/unknown":
		err = a.unknown(s)
	case "/settings":
		err = a.say(s, s.settingsLine())
	case "/mcp":
		err = a.say(s, s.mcpLine())
	case "/received":
		// What this prompt carried, all its text blocks: the test of a client that seeds a
		// new session with earlier context reads it back.
		s.mu.Lock()
		got := s.received
		s.mu.Unlock()
		err = a.say(s, fmt.Sprintf("received %d bytes:\n%s", len(got), got))
	case "/pids":
		err = a.say(s, fmt.Sprintf("pids %d %d", os.Getpid(), a.opts.ChildPID))
	case "/sh":
		if len(args) == 0 {
			return acp.PromptResponse{}, usageErr("/sh COMMAND")
		}
		err = a.say(s, shell(ctx, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(first), dir))))
	case "/read":
		if len(args) != 1 {
			return acp.PromptResponse{}, usageErr("/read PATH")
		}
		err = a.readFile(ctx, s, args[0])
	case "/write":
		if len(args) != 1 {
			return acp.PromptResponse{}, usageErr("/write PATH (the body is the content)")
		}
		err = a.writeFile(ctx, s, args[0], body)
	default:
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{"directive": dir, "error": "unknown directive " + dir})
	}
	if err != nil {
		return acp.PromptResponse{}, err
	}
	resp := acp.PromptResponse{StopReason: acp.StopReasonEndTurn, Usage: usage}
	if ctx.Err() != nil {
		resp.StopReason = acp.StopReasonCancelled
	}
	return resp, nil
}

// shell runs command as /sh does and describes how it went on one line.
func shell(ctx context.Context, command string) string {
	out, err := exec.CommandContext(ctx, "/bin/sh", "-c", command).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		return "sh: " + err.Error()
	}
	return fmt.Sprintf("sh: exit %d: %s", code, strings.Join(strings.Fields(string(out)), " "))
}

// toolKinds are the kinds /permission accepts.
var toolKinds = []acp.ToolKind{
	acp.ToolKindRead, acp.ToolKindEdit, acp.ToolKindDelete, acp.ToolKindMove, acp.ToolKindSearch,
	acp.ToolKindExecute, acp.ToolKindThink, acp.ToolKindFetch, acp.ToolKindOther,
}

func parseChunks(args []string) (n int, every time.Duration, stamp bool, err error) {
	if len(args) > 1 && args[len(args)-1] == "stamp" {
		stamp, args = true, args[:len(args)-1]
	}
	if len(args) != 1 && (len(args) != 3 || args[1] != "every") {
		return 0, 0, false, errors.New("bad arguments")
	}
	n, err = strconv.Atoi(args[0])
	if err != nil || n < 0 {
		return 0, 0, false, errors.New("bad count")
	}
	every = defaultEvery
	if len(args) == 3 {
		if every, err = parseDuration(args[2:]); err != nil {
			return 0, 0, false, err
		}
	}
	return n, every, stamp, nil
}

func parseDuration(args []string) (time.Duration, error) {
	if len(args) != 1 {
		return 0, errors.New("want one duration")
	}
	d, err := time.ParseDuration(args[0])
	if err == nil && d < 0 {
		err = errors.New("negative duration")
	}
	return d, err
}

// echo sends text back in up to 5 chunks of roughly equal rune counts.
func (a *testAgent) echo(ctx context.Context, s *session, text string) error {
	r := []rune(text)
	n := min(5, len(r))
	for i := range n {
		if ctx.Err() != nil {
			return nil
		}
		if err := a.say(s, string(r[i*len(r)/n:(i+1)*len(r)/n])); err != nil {
			return err
		}
	}
	return nil
}

// chunks sends n numbered chunks on a fixed schedule (no drift), every apart. With stamp,
// each chunk carries the wall-clock time it is sent, so a reader on the same machine can
// tell how long it took to reach it.
func (a *testAgent) chunks(ctx context.Context, s *session, n int, every time.Duration, stamp bool) error {
	start := time.Now()
	for i := 1; i <= n; i++ {
		if !wait(ctx, time.Until(start.Add(time.Duration(i-1)*every))) {
			return nil
		}
		text := fmt.Sprintf("chunk %d\n", i)
		if stamp {
			text = fmt.Sprintf("chunk %d @%d\n", i, time.Now().UnixNano())
		}
		if err := a.say(s, text); err != nil {
			return err
		}
	}
	return nil
}

// sleep streams "." every sleepTick until d has passed or the turn is cancelled.
func (a *testAgent) sleep(ctx context.Context, s *session, d time.Duration) error {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(sleepTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-deadline.C:
			return nil
		case <-tick.C:
			if err := a.say(s, "."); err != nil {
				return err
			}
		}
	}
}

// toolNames are the names claude-agent-acp gives its tools, by ACP kind: /permission's tool
// calls carry them as it does.
var toolNames = map[acp.ToolKind]string{
	acp.ToolKindRead: "Read", acp.ToolKindEdit: "Edit", acp.ToolKindDelete: "Delete", acp.ToolKindMove: "Move",
	acp.ToolKindSearch: "Grep", acp.ToolKindExecute: "Bash", acp.ToolKindThink: "Task", acp.ToolKindFetch: "WebFetch",
	acp.ToolKindOther: "Other",
}

// elicitForm asks the client question in a form of one string field, as an agent that asks
// the person a question in the middle of a turn does.
func (a *testAgent) elicitForm(ctx context.Context, s *session, question string) error {
	resp, err := a.connection().UnstableCreateElicitation(ctx, acp.UnstableCreateElicitationRequest{
		Form: &acp.UnstableCreateElicitationForm{Mode: "form", Message: question, RequestedSchema: acp.UnstableElicitationSchema{
			Type: "object", Properties: map[string]any{"answer": map[string]any{"type": "string", "title": "Answer"}}, Required: []string{"answer"},
		}},
	})
	switch {
	case err != nil:
		return a.say(s, "form elicitation failed: "+err.Error())
	case resp.Accept != nil:
		return a.say(s, fmt.Sprintf("form elicitation: accept: %v", resp.Accept.Content["answer"]))
	case resp.Decline != nil:
		return a.say(s, "form elicitation: decline")
	}
	return a.say(s, "form elicitation: cancel")
}

// elicitURL asks the client to open url, as an agent whose sign-in happens in a browser
// does, and completes the elicitation when the person accepted.
func (a *testAgent) elicitURL(ctx context.Context, s *session, url string) error {
	id := acp.UnstableElicitationId("url-" + strconv.FormatInt(time.Now().UnixNano(), 36))
	resp, err := a.connection().UnstableCreateElicitation(ctx, acp.UnstableCreateElicitationRequest{
		Url: &acp.UnstableCreateElicitationUrl{Mode: "url", Message: "Sign in to continue", Url: url, ElicitationId: id},
	})
	if err != nil {
		return a.say(s, "url elicitation failed: "+err.Error())
	}
	if resp.Accept == nil {
		action := "cancel"
		if resp.Decline != nil {
			action = "decline"
		}
		return a.say(s, "url elicitation: "+action)
	}
	if err := a.connection().UnstableCompleteElicitation(ctx, acp.UnstableCompleteElicitationNotification{ElicitationId: id}); err != nil {
		return a.say(s, "url elicitation: accept, complete failed: "+err.Error())
	}
	return a.say(s, "url elicitation: accept, completed")
}

// permission walks a tool call through session/request_permission, on claude-agent-acp's
// wire: the tool_call names the tool in _meta.claudeCode.toolName, the permission request
// that follows does not (its title names the target: the file, the command).
func (a *testAgent) permission(ctx context.Context, s *session, kind acp.ToolKind, target, path string) error {
	id := acp.ToolCallId(fmt.Sprintf("call_%d", a.calls.Add(1)))
	title := string(kind) + " " + target
	input := map[string]any{"path": path}
	start := acp.StartToolCall(id, title, acp.WithStartKind(kind),
		acp.WithStartStatus(acp.ToolCallStatusPending), acp.WithStartRawInput(input))
	start.ToolCall.Meta = map[string]any{"claudeCode": map[string]any{"toolName": toolNames[kind]}}
	if err := a.emit(s, start); err != nil {
		return err
	}
	resp, err := a.connection().RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: s.id,
		ToolCall: acp.ToolCallUpdate{
			ToolCallId: id, Title: &title, Kind: &kind,
			Status: acp.Ptr(acp.ToolCallStatusPending), RawInput: input,
		},
		Options: []acp.PermissionOption{
			{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow once", OptionId: "allow"},
			{Kind: acp.PermissionOptionKindAllowAlways, Name: "Always allow", OptionId: "allow_always"},
			{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "reject"},
		},
	})
	status, text := acp.ToolCallStatusFailed, "permission: cancelled"
	switch {
	case err != nil && ctx.Err() == nil: // the client failed the request
		_ = a.emit(s, acp.UpdateToolCall(id, acp.WithUpdateStatus(acp.ToolCallStatusFailed)))
		return err
	case err == nil && resp.Outcome.Selected != nil:
		opt := resp.Outcome.Selected.OptionId
		text = "permission: selected " + string(opt)
		if opt == "allow" || opt == "allow_always" {
			status = acp.ToolCallStatusCompleted
		}
	}
	if err := a.emit(s, acp.UpdateToolCall(id, acp.WithUpdateStatus(status))); err != nil {
		return err
	}
	return a.say(s, text)
}

// clientPath resolves a path of /read or /write against the session's cwd: ACP's fs
// methods take absolute paths.
func (s *session) clientPath(path string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if filepath.IsAbs(path) || s.cwd == "" {
		return path
	}
	return filepath.Join(s.cwd, path)
}

// readFile reads a file through the client's fs/read_text_file, when the client offered it,
// and says what it read (or why it could not).
func (a *testAgent) readFile(ctx context.Context, s *session, path string) error {
	a.mu.Lock()
	offered := a.client.Fs.ReadTextFile
	a.mu.Unlock()
	if !offered {
		return a.say(s, "read: the client offers no fs/read_text_file")
	}
	resp, err := a.connection().ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: s.id, Path: s.clientPath(path)})
	if err != nil {
		return a.say(s, "read refused: "+err.Error())
	}
	return a.say(s, "read: "+resp.Content)
}

// writeFile writes content through the client's fs/write_text_file, when the client offered
// it, and says how that went.
func (a *testAgent) writeFile(ctx context.Context, s *session, path, content string) error {
	a.mu.Lock()
	offered := a.client.Fs.WriteTextFile
	a.mu.Unlock()
	if !offered {
		return a.say(s, "write: the client offers no fs/write_text_file")
	}
	if _, err := a.connection().WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: s.id, Path: s.clientPath(path), Content: content}); err != nil {
		return a.say(s, "write refused: "+err.Error())
	}
	return a.say(s, "wrote "+path)
}

// unknown sends an update kind the SDK cannot express, bypassing its types.
func (a *testAgent) unknown(s *session) error {
	params, err := json.Marshal(map[string]any{
		"sessionId": s.id,
		"update":    map[string]any{"sessionUpdate": unknownKind, "payload": map[string]any{"x": 1}},
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a.recordLocked(s, json.RawMessage(params))
	return a.notifyRaw(params)
}

// wait sleeps for d unless ctx ends first; it reports whether ctx is still live.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

package gateway

// The one place where ACP's types and tacp's wire meet: content blocks to a prompt request,
// journal events to session/update notifications, turn endings to stop reasons. Pure
// functions, tested as tables.

import (
	"encoding/json"
	"fmt"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
)

// promptText turns an ACP prompt into the text and content of a tacp prompt. Text blocks
// are joined into text; any other block makes the whole prompt go to the agent as content
// (text still carries the text parts, for the journal and the status). Blocks the gateway
// did not advertise are refused.
func promptText(blocks []acp.ContentBlock, caps acp.PromptCapabilities) (string, json.RawMessage, error) {
	if len(blocks) == 0 {
		return "", nil, fmt.Errorf("prompt has no content blocks")
	}
	var texts []string
	plain := true
	for i, b := range blocks {
		switch {
		case b.Text != nil:
			texts = append(texts, b.Text.Text)
		case b.ResourceLink != nil:
			plain = false
			texts = append(texts, b.ResourceLink.Uri)
		case b.Image != nil && caps.Image, b.Audio != nil && caps.Audio, b.Resource != nil && caps.EmbeddedContext:
			plain = false
		case b.Image != nil, b.Audio != nil, b.Resource != nil:
			return "", nil, fmt.Errorf("prompt block %d: %s content is not supported (see promptCapabilities)", i, blockType(b))
		default:
			return "", nil, fmt.Errorf("prompt block %d: unknown content block", i)
		}
	}
	text := strings.Join(texts, "\n")
	if plain {
		return text, nil, nil
	}
	raw, err := json.Marshal(blocks)
	return text, raw, err
}

func blockType(b acp.ContentBlock) string {
	switch {
	case b.Image != nil:
		return "image"
	case b.Audio != nil:
		return "audio"
	case b.Resource != nil:
		return "embedded resource"
	}
	return "this"
}

// sessionUpdate is the params of a session/update notification, with the update kept raw.
// Its _meta.tacp.seq is the journal seq of the event it shows: a client that reconnects
// names the last one it saw (signals.ACPMeta).
type sessionUpdate struct {
	SessionID string          `json:"sessionId"`
	Update    json.RawMessage `json:"update"`
	Meta      map[string]any  `json:"_meta,omitempty"`
}

// agentUpdate returns the session/update params of the agent.update event seq, addressed
// to the tacp session (the agent's own session id is the worker's business).
func agentUpdate(sessionID string, seq int64, data json.RawMessage) (sessionUpdate, error) {
	var n struct {
		Update json.RawMessage `json:"update"`
	}
	if err := json.Unmarshal(data, &n); err != nil || len(n.Update) == 0 {
		return sessionUpdate{}, fmt.Errorf("agent.update without an update: %s", truncate(string(data), 80))
	}
	return sessionUpdate{SessionID: sessionID, Update: n.Update, Meta: signals.ACPMeta{Seq: seq}.Map()}, nil
}

// userMessage returns the session/update params that show a prompt as the user's message,
// at the seq of its turn.started.
func userMessage(sessionID string, seq int64, clientMessageID, text string) sessionUpdate {
	u, _ := json.Marshal(map[string]any{
		"sessionUpdate": "user_message_chunk",
		"content":       map[string]string{"type": "text", "text": text},
	})
	return sessionUpdate{SessionID: sessionID, Update: u, Meta: signals.ACPMeta{Seq: seq, ClientMessageID: clientMessageID}.Map()}
}

// permissionResolved returns the session/update params that show how a permission request
// was decided (the permission.resolved event seq): an update of its tool call, carrying the
// resolution in the update's _meta.tacp.
func permissionResolved(sessionID string, seq int64, toolCallID string, r signals.PermissionResolution) sessionUpdate {
	u, _ := json.Marshal(map[string]any{
		"sessionUpdate": "tool_call_update",
		"toolCallId":    toolCallID,
		"_meta":         signals.ACPMeta{PermissionResolved: &r}.Map(),
	})
	return sessionUpdate{SessionID: sessionID, Update: u, Meta: signals.ACPMeta{Seq: seq}.Map()}
}

// toolCallID returns the toolCallId of a permission request's tool call.
func toolCallID(toolCall json.RawMessage) string {
	var tc struct {
		ID string `json:"toolCallId"`
	}
	_ = json.Unmarshal(toolCall, &tc)
	return tc.ID
}

// turnOutcome is how a turn ended, as a session/prompt answer.
type turnOutcome struct {
	stop acp.StopReason
	err  error
}

// outcomeOf maps a terminal event (turn.ended, turn.failed) or session.closed to the answer
// of the session/prompt that waits for it.
func outcomeOf(ev signals.Event) turnOutcome {
	switch ev.Kind {
	case signals.EventTurnEnded:
		var d signals.TurnEndedData
		_ = json.Unmarshal(ev.Data, &d)
		if d.StopReason == "" {
			d.StopReason = string(acp.StopReasonEndTurn)
		}
		return turnOutcome{stop: acp.StopReason(d.StopReason)}
	case signals.EventTurnFailed:
		var d signals.TurnFailedData
		_ = json.Unmarshal(ev.Data, &d)
		return turnOutcome{err: &acp.RequestError{Code: codeTurnFailed, Message: "turn failed: " + d.Error, Data: map[string]any{"error": d.Error, "turn_id": ev.TurnID}}}
	default:
		return turnOutcome{err: &acp.RequestError{Code: codeTurnFailed, Message: "session closed", Data: map[string]any{"turn_id": ev.TurnID}}}
	}
}

// Error codes of the gateway's own JSON-RPC errors (the implementation-defined range).
const (
	codeTurnFailed    = -32000
	codeNotFound      = -32002 // ACP's "resource not found"
	codeForbidden     = -32003
	codeRejected      = -32004 // a tacp rejection; data.type names it
	codeInvalidParams = -32602
	codeInternalError = -32603
)

// rpcErr turns an error from tacpclient.Client into a JSON-RPC error: rejections keep their
// type and details in data, unknown sessions are "resource not found". The reason is in
// the message too, after the code's name: editors show message, not data.
func rpcErr(err error) error {
	if err == nil {
		return nil
	}
	if rej, ok := rejection.As(err); ok {
		data := map[string]any{"type": rej.Type, "error": rej.Message}
		if rej.Details != nil {
			data["details"] = rej.Details
		}
		switch rej.Type {
		case signals.RejectUnknownSession:
			return rpcError(codeNotFound, "Resource not found", rej.Message, data)
		case signals.RejectInvalidRequest:
			return rpcError(codeInvalidParams, "Invalid params", rej.Message, data)
		case signals.RejectForbidden:
			return rpcError(codeForbidden, "Forbidden", rej.Message, data)
		}
		return rpcError(codeRejected, rej.Type, rej.Message, data)
	}
	return rpcError(codeInternalError, "Internal error", err.Error(), map[string]any{"error": err.Error()})
}

// rpcError is a JSON-RPC error whose message is "name: reason".
func rpcError(code int, name, reason string, data map[string]any) *acp.RequestError {
	return &acp.RequestError{Code: code, Message: name + ": " + reason, Data: data}
}

func invalidParams(format string, args ...any) error {
	reason := fmt.Sprintf(format, args...)
	return rpcError(codeInvalidParams, "Invalid params", reason, map[string]any{"error": reason})
}

func forbidden(what string) error {
	reason := "this connection observes (--observe): it cannot " + what
	return rpcError(codeForbidden, "Forbidden", reason, map[string]any{"type": signals.RejectForbidden, "error": reason})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// notice returns the session/update params that tell an editor of a journal event the agent
// did not say itself (agent.context_lost, turn.restarted, workspace.missing, workspace.restored, a
// failed workspace.checkpoint): an agent_message_chunk of text,
// so every editor shows it, with the event in the update's _meta.tacp.notice for those that
// read it.
func notice(sessionID string, seq int64, kind, text string, data json.RawMessage) sessionUpdate {
	u, _ := json.Marshal(map[string]any{
		"sessionUpdate": "agent_message_chunk",
		"content":       map[string]string{"type": "text", "text": text},
		"_meta":         map[string]any{"tacp": map[string]any{"notice": map[string]any{"kind": kind, "data": data}}},
	})
	return sessionUpdate{SessionID: sessionID, Update: u, Meta: signals.ACPMeta{Seq: seq}.Map()}
}

// noticeText is how an editor reads a notice event.
func noticeText(ev signals.Event) (string, bool) {
	switch ev.Kind {
	case signals.EventAgentContextLost:
		var d signals.AgentContextLostData
		_ = json.Unmarshal(ev.Data, &d)
		carried := "the conversation so far was carried over from tacp's journal"
		if d.Carried == 0 {
			carried = "the conversation was not carried over"
		}
		return fmt.Sprintf("\n[tacp: the agent lost its memory of this session (%s); it continues in a new agent session, and %s]\n", d.Reason, carried), true
	case signals.EventTurnRestarted:
		// What the earlier attempt streamed stays on the client's screen: the separator
		// keeps it from running into what the new attempt streams.
		var d signals.TurnStartedData
		_ = json.Unmarshal(ev.Data, &d)
		switch {
		case d.Cause == "":
			return "\n\n— the worker running this turn was lost; running it again —\n\n", true
		case d.Resumed:
			return fmt.Sprintf("\n\n— the agent continues this turn (%s) —\n\n", d.Cause), true
		}
		return fmt.Sprintf("\n\n— running this turn again (%s) —\n\n", d.Cause), true
	case signals.EventWorkspaceMissing:
		var d signals.WorkspaceMissingData
		_ = json.Unmarshal(ev.Data, &d)
		return fmt.Sprintf("\n[tacp: the session's workspace %s is not on the worker that took this turn (%s)]\n", d.Path, d.Action), true
	case signals.EventWorkspaceRestored:
		var d signals.WorkspaceRestoredData
		_ = json.Unmarshal(ev.Data, &d)
		if d.Session != "" {
			return fmt.Sprintf("\n[tacp: this fork's workspace starts with the files of session %s after its turn %d]\n", d.Session, d.Turn), true
		}
		return fmt.Sprintf("\n[tacp: the session's workspace was not on the worker that took this turn; it was restored from the checkpoint of turn %d]\n", d.Turn), true
	case signals.EventWorkspaceCheckpoint:
		var d signals.WorkspaceCheckpointData
		_ = json.Unmarshal(ev.Data, &d)
		if d.Error == "" {
			return "", false // every turn has one: only a failure is worth an editor's line
		}
		return fmt.Sprintf("\n[tacp: the workspace checkpoint of this turn failed: %s]\n", d.Error), true
	}
	return "", false
}

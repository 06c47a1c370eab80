package signals

// What makes a prompt one a session takes, checked by the session's validator and, before
// any call, by the client: a refused prompt starts no session.

import (
	"bytes"
	"encoding/json"
	"strings"
)

// ValidatePrompt checks a prompt request's fields.
func ValidatePrompt(req PromptRequest) *Rejection {
	blocks, ok := contentBlocks(req.Content)
	if !ok {
		return Reject(RejectInvalidRequest, "content must be a JSON array of ACP content blocks")
	}
	if strings.TrimSpace(req.Text) == "" && blocks == 0 {
		return Reject(RejectInvalidRequest, "prompt text is empty")
	}
	if n := len(req.Text) + len(req.Content); n > MaxTextBytes {
		return Reject(RejectInvalidRequest, "prompt is %d bytes; the limit is %d", n, MaxTextBytes)
	}
	if req.ClientMessageID == "" {
		return Reject(RejectInvalidRequest, "client_message_id is required")
	}
	if len(req.ClientMessageID) > MaxClientIDBytes {
		return Reject(RejectInvalidRequest, "client_message_id is longer than %d bytes", MaxClientIDBytes)
	}
	if err := ValidateBy(req.By); err != nil {
		return Reject(RejectInvalidRequest, "%v", err)
	}
	return nil
}

// contentBlocks counts the blocks of a prompt's content: absent or null is none, anything but
// a JSON array is not content (the turn runner could only fail it later).
func contentBlocks(content json.RawMessage) (int, bool) {
	trimmed := bytes.TrimSpace(content)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return 0, true
	}
	var blocks []json.RawMessage
	if trimmed[0] != '[' || json.Unmarshal(trimmed, &blocks) != nil {
		return 0, false
	}
	return len(blocks), true
}

package gateway

// The wire: what the gateway writes and reads around the ACP SDK's connection. The SDK
// serializes its own messages; the gateway writes session/update notifications itself, as
// raw JSON, so that update kinds the SDK does not know pass through unchanged (contract §7:
// unknown kinds are relayed, never dropped). Both write whole lines through one lock.
// Incoming lines are checked before the SDK sees them, so that malformed JSON-RPC gets the
// JSON-RPC error the spec asks for instead of a silent drop.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// maxLine bounds one incoming JSON-RPC message. A prompt is at most signals.MaxTextBytes of
// text; JSON escaping can double it.
const maxLine = 8 << 20

// lineWriter writes whole lines under one lock.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
	// calls are the gateway's own requests (calls.go).
	calls calls
	// prompts are the client's session/prompt requests in flight (cancelrequest.go).
	prompts promptCancels
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// notify writes one JSON-RPC notification.
func (l *lineWriter) notify(method string, params any) error {
	b, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", method, params})
	if err != nil {
		return err
	}
	_, err = l.Write(append(b, '\n'))
	return err
}

// rpcError writes a JSON-RPC error response to id (null when unknown).
func (l *lineWriter) rpcError(id json.RawMessage, code int, message, detail string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   any             `json:"error"`
	}{"2.0", id, map[string]any{"code": code, "message": message, "data": map[string]string{"error": detail}}})
	_, _ = l.Write(append(b, '\n'))
}

// JSON-RPC 2.0 error codes.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// filterInput copies JSON-RPC lines from in to the pipe the SDK reads, answering the ones
// that are not JSON-RPC messages with an error on out. It closes the pipe when in ends.
func filterInput(in io.Reader, sdk *io.PipeWriter, out *lineWriter) {
	r := bufio.NewReaderSize(in, 64<<10)
	var line []byte
	tooLong := false
	for {
		chunk, isPrefix, err := r.ReadLine()
		if tooLong || len(line)+len(chunk) > maxLine {
			tooLong, line = true, line[:0] // drop the rest of it
		} else {
			line = append(line, chunk...)
		}
		if isPrefix && err == nil {
			continue
		}
		if tooLong {
			out.rpcError(nil, codeInvalidRequest, "Invalid request", "message longer than 8 MiB")
		} else if len(bytes.TrimSpace(line)) > 0 {
			if msg, ok := checkLine(line, out); ok {
				if _, werr := sdk.Write(append(msg, '\n')); werr != nil {
					out.closeCalls()
					return
				}
			}
		}
		line, tooLong = line[:0], false
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			out.closeCalls()
			sdk.CloseWithError(err)
			return
		}
	}
}

// checkLine returns line when it is a JSON-RPC message the SDK can take, and otherwise
// answers it on out.
func checkLine(line []byte, out *lineWriter) ([]byte, bool) {
	if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '[' {
		// JSON-RPC batches: ACP sends none, and the SDK reads one message a line.
		detail := "JSON-RPC batches are not supported: send one message a line"
		if json.Valid(t) && string(bytes.Join(bytes.Fields(t), nil)) == "[]" {
			detail = "an empty batch"
		} else if !json.Valid(t) {
			out.rpcError(nil, codeParseError, "Parse error", "invalid JSON")
			return nil, false
		}
		out.rpcError(nil, codeInvalidRequest, "Invalid request", detail)
		return nil, false
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		if json.Valid(line) {
			out.rpcError(nil, codeInvalidRequest, "Invalid request", "a JSON-RPC message is a JSON object")
		} else {
			out.rpcError(nil, codeParseError, "Parse error", "invalid JSON")
		}
		return nil, false
	}
	switch {
	case m.Method != nil && *m.Method == "":
		out.rpcError(m.ID, codeInvalidRequest, "Invalid request", "empty method")
		return nil, false
	case m.Method == nil && len(m.ID) == 0:
		out.rpcError(nil, codeInvalidRequest, "Invalid request", "neither method nor id")
		return nil, false
	case m.Method == nil && m.Result == nil && m.Error == nil:
		out.rpcError(m.ID, codeInvalidRequest, "Invalid request", "a response without result or error")
		return nil, false
	case m.Method == nil && out.answer(m.ID, m.Result, m.Error):
		return nil, false // the answer to one of the gateway's own requests (calls.go)
	case m.Method != nil && *m.Method == "session/prompt" && len(m.ID) > 0:
		id := compactID(m.ID)
		out.prompts.seen(id)
		return withRPCID(line, json.RawMessage(id)), true
	case m.Method != nil && *m.Method == "$/cancel_request" && len(m.ID) == 0:
		if id := cancelRequestID(m.Params); id != "" {
			out.prompts.request(id)
		}
	}
	return line, true
}

package gateway

// Requests the gateway sends to the client itself, beside the SDK's: those whose params the
// SDK's types cannot carry (acp-go-sdk v0.13.0's elicitation/create has no sessionId nor
// toolCallId, which the ACP schema requires of a question tied to a session). They take ids
// of their own ("tacp-<n>", strings, where the SDK's are numbers), and filterInput hands
// their responses to the waiting call instead of to the SDK.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// callPrefix starts the id of every request the gateway sends itself.
const callPrefix = "tacp-"

// calls are the gateway's own requests waiting for their responses.
type calls struct {
	mu      sync.Mutex
	next    int64
	pending map[string]chan callResult
	closed  bool
}

type callResult struct {
	result json.RawMessage
	err    error
}

// errConnClosed answers the calls that were pending when the client went away.
var errConnClosed = errors.New("the client closed the connection")

// call sends the request method(params) to the client and waits for its response. When ctx
// ends first it withdraws the request ($/cancel_request) and returns ctx's error.
func (l *lineWriter) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	l.calls.mu.Lock()
	if l.calls.closed {
		l.calls.mu.Unlock()
		return nil, errConnClosed
	}
	if l.calls.pending == nil {
		l.calls.pending = map[string]chan callResult{}
	}
	l.calls.next++
	id := callPrefix + strconv.FormatInt(l.calls.next, 10)
	ch := make(chan callResult, 1)
	l.calls.pending[id] = ch
	l.calls.mu.Unlock()
	defer func() {
		l.calls.mu.Lock()
		delete(l.calls.pending, id)
		l.calls.mu.Unlock()
	}()
	b, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      string `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", id, method, params})
	if err != nil {
		return nil, err
	}
	if _, err := l.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r.result, r.err
	case <-ctx.Done():
		_ = l.notify("$/cancel_request", map[string]string{"requestId": id})
		return nil, ctx.Err()
	}
}

// answer delivers a response to the gateway's own request id; it reports whether id is
// one of them (then the SDK must not see the response).
func (l *lineWriter) answer(id json.RawMessage, result, rpcErr json.RawMessage) bool {
	var s string
	if json.Unmarshal(id, &s) != nil || !strings.HasPrefix(s, callPrefix) {
		return false
	}
	l.calls.mu.Lock()
	ch := l.calls.pending[s]
	delete(l.calls.pending, s)
	l.calls.mu.Unlock()
	if ch == nil {
		return true // withdrawn: its late answer goes nowhere
	}
	if len(rpcErr) > 0 && string(rpcErr) != "null" {
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(rpcErr, &e)
		ch <- callResult{err: fmt.Errorf("client answered %d: %s", e.Code, e.Message)}
	} else {
		ch <- callResult{result: result}
	}
	return true
}

// closeCalls fails every pending call: the client is gone.
func (l *lineWriter) closeCalls() {
	l.calls.mu.Lock()
	defer l.calls.mu.Unlock()
	l.calls.closed = true
	for id, ch := range l.calls.pending {
		ch <- callResult{err: errConnClosed}
		delete(l.calls.pending, id)
	}
}

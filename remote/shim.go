package remote

// The shim's state: the JSON-RPC message as it passes through, the editor's requests on
// their way to the deck and the deck's on their way to the editor, the bounds on what is
// remembered across sockets, and the writes to the editor.

import (
	"encoding/json"
	"io"
	"log/slog"
	"sync"
)

// msg is a JSON-RPC message with its fields kept raw.
type msg map[string]json.RawMessage

func (m msg) has(k string) bool { _, ok := m[k]; return ok }

func (m msg) method() string {
	var s string
	_ = json.Unmarshal(m["method"], &s)
	return s
}

func (m msg) bytes() []byte {
	b, _ := json.Marshal(map[string]json.RawMessage(m))
	return b
}

// with returns a copy of m with key set to v.
func (m msg) with(key string, v any) msg {
	out := make(msg, len(m)+1)
	for k, x := range m {
		out[k] = x
	}
	b, _ := json.Marshal(v)
	out[key] = b
	return out
}

// call is an editor request on its way to the deck, kept until its answer is forwarded.
type call struct {
	editorID json.RawMessage
	method   string
	params   json.RawMessage
	session  string
	wire     []byte // the request as the deck gets it (the shim's id)
	sent     *link  // the socket it went out on (nil: not yet)
}

// ask is a request of the deck's on its way to the editor (a permission request).
type ask struct {
	editorID  int64
	link      *link
	remoteID  json.RawMessage
	requestID string          // _meta.tacp.request_id: the same request across sockets
	answer    json.RawMessage // the editor's answer (its result or error member), once given
	answerKey string          // "result" or "error"
}

// Resent after a reconnect: requests whose repetition changes nothing.
var idempotent = map[string]bool{
	"initialize": true, "authenticate": true, "session/load": true, "session/resume": true,
	"session/list": true, "session/prompt": true, // by its messageId
}

// ownKept bounds the messageIds of the editor's own prompts the shim remembers.
const ownKept = 4096

// permsKept bounds the permission requests remembered across sockets.
const permsKept = 1024

type shim struct {
	o   Options
	log *slog.Logger

	wmu sync.Mutex // one whole line at a time on the editor's end
	out io.Writer

	mu         sync.Mutex
	link       *link // the live socket; nil while down
	nextID     int64 // request ids toward the deck (unique across sockets)
	calls      map[int64]*call
	byEditor   map[string]int64 // editor request id → the shim's id, for $/cancel_request
	internal   map[int64]chan msg
	nextAsk    int64
	asks       map[int64]*ask  // by the id the editor sees
	perms      map[string]*ask // by request_id, until the session resolves it
	permOrder  []string
	sessions   map[string]int64 // session → seq of the last update forwarded (or its view's start)
	own        map[string]bool  // messageIds of the editor's prompts
	ownOrder   []string
	initParams json.RawMessage
	held       [][]byte // editor notifications that wait for a socket
	// gone is why the deck cannot be reached for good (a refused token, a URL that is not
	// its ACP endpoint): every request of the editor is answered with it at once.
	gone string
	// asked is closed at the editor's first request: Run, ending for good, waits for it so
	// the editor's initialize is answered with the reason rather than by a hang-up.
	asked     chan struct{}
	askedOnce sync.Once
}

func newShim(o Options, out io.Writer) *shim {
	return &shim{
		o: o, log: o.Logger, out: out,
		calls: map[int64]*call{}, byEditor: map[string]int64{}, internal: map[int64]chan msg{},
		asks: map[int64]*ask{}, perms: map[string]*ask{}, sessions: map[string]int64{}, own: map[string]bool{},
		asked: make(chan struct{}),
	}
}

// toEditor writes one message to the editor.
func (s *shim) toEditor(b []byte) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, err := s.out.Write(append(b, '\n')); err != nil {
		s.log.Debug("write to the editor failed", "err", err)
	}
}

// errorTo answers the editor's request id with a JSON-RPC error.
func (s *shim) errorTo(id json.RawMessage, code int, message string) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": message}})
	s.toEditor(b)
}

// Package deck is tacp's web deck: an HTTP server that lets a person follow sessions and act
// on them from a browser, phone first. It owns the JSON + Server-Sent Events API over
// tacpclient.Client and the small web app (plain HTML, CSS and JavaScript embedded with embed;
// no build step). Every state change goes through the same updates as the CLI, so the deck
// is refused exactly what the CLI is refused.
//
// # API
//
// Every /api/ call but login needs a token (see Auth). Bodies are JSON (Content-Type
// application/json, at most MaxBodyBytes, unknown fields refused).
//
//	POST /api/login                            {token} → whoami's answer; sets the session cookie
//	POST /api/logout                           clears the cookie
//	GET  /api/whoami                           {role, name?, by}: the token's role, person, answered_by
//	GET  /api/sessions[?limit=N]               {sessions: [...]}, awaiting approval first
//	GET  /api/sessions/{id}                    the status snapshot + server_time
//	GET  /api/sessions/{id}/events?after=&limit=   the events query, as is
//	GET  /api/sessions/{id}/stream[?after=N]   SSE: the journal after N, then live
//	POST /api/sessions/{id}/prompt             {text, client_message_id?}; starts the session if new
//	POST /api/sessions/{id}/steer              {text, expected_turn_id, client_msg_id?}
//	POST /api/sessions/{id}/cancel             {turn_id?}
//	POST /api/sessions/{id}/permissions/{req}  {option_id?, outcome?, client_msg_id?}
//	POST /api/sessions/{id}/policy             {level}
//	POST /api/sessions/{id}/forget             {tool}
//	GET  /acp                                  WebSocket: the ACP face (see ACP)
//
// A refusal is a JSON body {type, message, details?} with a status that says what kind it
// is: 401 no or wrong token, 403 an observer token on a write (type "forbidden"), 400
// invalid_request / invalid_option / malformed JSON, 404 unknown_session / unknown_request,
// 409 queue_full / stale_turn / no_live_turn / client_msg_id_reuse / no_steer_channel /
// session_closed, 413 too large, 415 not JSON, 429 too_many_requests (with Retry-After),
// 502 Temporal unreachable. A refused request changed nothing.
//
// # The stream
//
// The stream is the session's journal as Server-Sent Events: each journal event is an SSE
// event "journal" whose id is its seq and whose data is the event's JSON, so a browser that
// reconnects (a phone waking up) sends Last-Event-ID and resumes exactly after the last
// event it saw. Last-Event-ID wins over ?after=. When retention dropped events the client
// never saw, an event "gap" (id: the seq before the first retained one) comes first and
// the page shows "older events trimmed". After session.closed an event "end" tells the
// client to stop reconnecting, and so does one when the session's workflow has ended. A
// stream sends a comment line every Options.KeepAlive while idle.
//
// The streams of one session share one events poller per deck process, with the /acp
// connections (gateway.Hub): it queries the session's events when its history grows
// (tacpclient.Follower) and keeps the newest events in a bounded cache, which each stream
// reads by seq at its own pace, so a session costs one query per history wake-up however
// many streams watch it, and a reader that stops reading holds up only itself. A stream
// whose seq is older than the cache (a page opening on a long journal, a reader fallen
// behind) reads that part of the journal itself, a page per query, then reads the cache.
// A stream sends its first byte once the poller has answered, so an unknown session is a
// 404, and streams that open together wait for one query. One token holds at most
// Options.MaxStreamsPerToken streams at once: one more is refused 429 too_many_requests
// with Retry-After.
//
// # Auth
//
// Tokens are bearer tokens: controller tokens may do everything, observer tokens may only
// read (every write answers 403 forbidden). A call presents one as "Authorization: Bearer
// T" or as the cookie tacp_deck that POST /api/login sets (HttpOnly, SameSite=Strict) — a
// browser's EventSource cannot set headers, so the page logs in once and then rides the
// cookie. The URL `starter web` prints carries the token in the fragment (/#token=T): the
// fragment never reaches the server or its logs, the page posts it to /api/login and drops
// it from the address bar. Writes authorised by the cookie must come from the deck's own
// origin (Origin header, when sent, must match Host) and be JSON, which a cross-site form
// cannot send. The static files of the page are public: they hold no session data.
//
// Besides the flags' tokens, Options.TokensFile lists people as NAME ROLE sha256:HEX
// [GROUP,...], one a line, their secrets hashed (TokenLine makes a line; /api/whoami
// answers the groups too); the deck reads it again when its content changes and on Reload,
// and keeps its tokens when the new content is refused. A source (remote IP) that presents
// more wrong tokens than Options.LoginBurst, refilled at LoginRate a second, gets 429
// too_many_requests with Retry-After for every credential it presents, a right one too,
// until its limit refills.
//
// A named token is a person (access.go): the sessions they create are theirs, the list
// shows them only the sessions they may see, and a call on another person's session follows
// that session's sharing rule, or Options.Sharing when it names none (signals.RoleFor): 404
// for a session not theirs to see, 403 for a write on one they may only watch. A prompt that
// starts a session may name its "sharing" and "shared_with". An unnamed token stands for the
// deployment and has its role on every session.
//
// The page's addresses: #/ is the sessions list, #/s/ID one session and #/s/ID/REQUEST one
// of its open requests (a permission or a question), brought into view and focus when the
// page opens. A link opened while signed out keeps its address through the sign-in form.
//
// The deck does not attach as a viewer: a phone that sleeps while watching must not start
// a session's grace window and so cancel a turn it merely looked at.
//
// # ACP
//
// GET /acp upgrades to a WebSocket that speaks ACP as the agent, exactly as `starter acp`
// does on stdio (package gateway), one JSON-RPC message per text frame. The token goes in
// "Authorization: Bearer T" and is checked before the upgrade (401 otherwise); observer
// tokens get an observer connection. Unlike the rest of the deck, /acp attaches as a viewer,
// as every ACP client does. A client that reconnects resumes by journal seq: every
// session/update carries _meta.tacp.seq, and session/load or session/resume with
// _meta.tacp.after_seq replays exactly the events after it (signals.ACPMeta). One token
// holds at most Options.MaxACPPerToken sockets at once (429 too_many_requests beyond), and a
// socket whose client sends no ACP message within the gateway's FirstMessageTimeout (30 s)
// is closed with status 1008 (policy violation).
package deck

import (
	"cmp"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/tacp-dev/tacp/checkpoint"
	"github.com/tacp-dev/tacp/gateway"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

//go:embed web
var webFiles embed.FS

// MaxBodyBytes bounds a request body: a prompt or steer of signals.MaxTextBytes with room
// for JSON escaping; Temporal would refuse a larger payload anyway.
const MaxBodyBytes = 2 << 20

// Options configure a Server.
type Options struct {
	Client *tacpclient.Client
	// ControllerTokens may read and act (role signals.RoleController); at least one is
	// required.
	ControllerTokens []string
	// OperatorTokens is the old name of ControllerTokens, read as more of them.
	//
	// Deprecated: use ControllerTokens.
	OperatorTokens []string
	// ObserverTokens may only read (role signals.RoleObserver).
	ObserverTokens []string
	Logger         *slog.Logger
	// PollInterval is the pause before an open stream tries a failed events query again,
	// growing with each failure (default 250ms). Events are queried when the session's
	// history grows, and at least every Client.SafetyPoll.
	PollInterval time.Duration
	// KeepAlive is how long an idle stream waits before it sends a comment line, so that
	// proxies and phones keep the connection (default 15s). An /acp socket is pinged as
	// often, and closed when a pong does not come back as long.
	KeepAlive time.Duration
	// MaxStreamsPerToken bounds the SSE streams one token holds open at once, and
	// MaxACPPerToken its /acp sockets: one more is refused 429 too_many_requests (defaults
	// DefaultMaxStreamsPerToken, DefaultMaxACPPerToken).
	MaxStreamsPerToken int
	MaxACPPerToken     int
	// Sharing is the deck's rule for a session that names none (signals.SharingPrivate,
	// SharingTeamWatch or SharingTeamAct; default private): what a named token may do on
	// another person's session. An unnamed token has its role on every session.
	Sharing string
	// Gateway serves /acp (nil: a gateway over Client whose new sessions take the worker's
	// agent and workspace). A client's cwd names a directory on its own machine: give the
	// gateway IgnoreClientCwd.
	Gateway *gateway.Gateway
	// TokensFile names a file of people and their hashed tokens, one a line (see Auth and
	// TokenLine); its tokens add to those of the fields above. The deck reads it again when
	// its content changes and on Reload; Close stops that watch.
	TokensFile string
	// TokensPoll is how often the tokens file is checked for a change (default 2s).
	TokensPoll time.Duration
	// LoginBurst is how many wrong tokens a source (a remote IP) may present before its
	// every credential is refused 429 (default 10); LoginRate is how many more it may
	// present each second after (default 1).
	LoginBurst int
	LoginRate  float64
	// Checkpoints reads the workers' workspace checkpoint store (their -checkpoint.store),
	// for the page's per-turn changes (GET …/diff); a URL "" or checkpoint.StoreOff: none.
	Checkpoints checkpoint.Reader
}

// Server is the deck: an http.Handler serving the API and the web app.
type Server struct {
	c      *tacpclient.Client
	tokens *keyring
	limits *limiter
	log    *slog.Logger
	// checkpoints reads the checkpoint store (URL "": none).
	checkpoints checkpoint.Reader
	poll        time.Duration
	alive       time.Duration
	gw          *gateway.Gateway
	mux         *http.ServeMux
	sharing     string

	// streams and sockets count each token's open SSE streams and /acp sockets (caps.go);
	// ownQueries the events queries streams send besides their shared feeds (stream.go).
	streams, sockets *perToken
	ownQueries       queryCount
}

// New returns a deck serving o.Client's sessions.
func New(o Options) (*Server, error) {
	if o.Client == nil {
		return nil, errors.New("deck: a tacpclient.Client is required")
	}
	toks, err := flagTokens(append(append([]string(nil), o.ControllerTokens...), o.OperatorTokens...), o.ObserverTokens)
	if err != nil {
		return nil, err
	}
	s := &Server{c: o.Client, log: o.Logger, poll: o.PollInterval, alive: o.KeepAlive, gw: o.Gateway}
	if u := o.Checkpoints.URL; u != "" && u != checkpoint.StoreOff {
		s.checkpoints = o.Checkpoints
		s.checkpoints.URL = checkpoint.NormalizeStoreURL(u)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.tokens, err = newKeyring(toks, o.TokensFile, o.TokensPoll, s.log); err != nil {
		return nil, err
	}
	s.limits = newLimiter(o.LoginBurst, o.LoginRate)
	switch s.sharing = cmp.Or(o.Sharing, signals.SharingPrivate); s.sharing {
	case signals.SharingPrivate, signals.SharingTeamWatch, signals.SharingTeamAct:
	default:
		return nil, fmt.Errorf("deck: sharing %q: want private, team-watch or team-act", o.Sharing)
	}
	if s.gw == nil {
		s.gw = gateway.New(gateway.Options{Client: o.Client, Logger: s.log, IgnoreClientCwd: true})
	}
	if s.poll <= 0 {
		s.poll = 250 * time.Millisecond
	}
	if s.alive <= 0 {
		s.alive = 15 * time.Second
	}
	s.streams = newPerToken(o.MaxStreamsPerToken, DefaultMaxStreamsPerToken, "streams")
	s.sockets = newPerToken(o.MaxACPPerToken, DefaultMaxACPPerToken, "ACP sockets")
	static, err := fs.Sub(webFiles, "web")
	if err != nil {
		return nil, err
	}
	m := http.NewServeMux()
	m.HandleFunc("POST /api/login", s.login)
	m.HandleFunc("POST /api/logout", s.logout)
	m.HandleFunc("GET /api/whoami", s.read(s.whoami))
	m.HandleFunc("GET /api/sessions", s.read(s.listSessions))
	m.HandleFunc("GET /api/profiles", s.read(s.profiles))
	m.HandleFunc("GET /api/sessions/{id}", s.read(s.watch(s.status)))
	m.HandleFunc("GET /api/sessions/{id}/events", s.read(s.watch(s.events)))
	m.HandleFunc("GET /api/sessions/{id}/stream", s.read(s.watch(s.stream)))
	m.HandleFunc("GET /api/sessions/{id}/diff", s.read(s.watch(s.diff)))
	m.HandleFunc("POST /api/sessions/{id}/prompt", s.write(s.control(true, s.prompt)))
	m.HandleFunc("POST /api/sessions/{id}/steer", s.write(s.control(false, s.steer)))
	m.HandleFunc("POST /api/sessions/{id}/cancel", s.write(s.control(false, s.cancel)))
	m.HandleFunc("POST /api/sessions/{id}/permissions/{request}", s.write(s.control(false, s.permissionRespond)))
	m.HandleFunc("POST /api/sessions/{id}/questions/{request}", s.write(s.control(false, s.elicitationRespond)))
	m.HandleFunc("POST /api/sessions/{id}/retry", s.write(s.control(false, s.retryNow)))
	m.HandleFunc("POST /api/sessions/{id}/policy", s.write(s.control(false, s.setPolicy)))
	m.HandleFunc("POST /api/sessions/{id}/forget", s.write(s.control(false, s.forget)))
	m.HandleFunc("POST /api/sessions/{id}/rewind", s.write(s.watch(s.rewind)))
	m.HandleFunc("GET /acp", s.authenticated(s.acp))
	files := http.FileServerFS(static)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/"):
			writeError(w, http.StatusNotFound, "not_found", "no such API call: "+r.Method+" "+r.URL.Path, nil)
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not served here", nil)
		default:
			files.ServeHTTP(w, r)
		}
	})
	s.mux = m
	return s, nil
}

// ServeHTTP serves the API and the web app.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// The page loads only its own files and talks only to its own origin; agent output is
	// rendered as text, and this keeps any mistake there from running script.
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	s.mux.ServeHTTP(w, r)
}

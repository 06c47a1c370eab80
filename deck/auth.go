package deck

// Who may call the deck: bearer tokens with a role, presented in the Authorization header
// or in the cookie that /api/login sets, the checks that keep another site from riding
// that cookie, and who a token is (identity). The tokens come from the flags and from the
// tokens file (tokensfile.go); a wrong one counts against its source's limit (limit.go).

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// CookieName is the cookie that carries a browser's token after /api/login.
const CookieName = "tacp_deck"

// cookieMaxAge keeps a phone signed in for a week.
const cookieMaxAge = 7 * 24 * 60 * 60

type token struct {
	sum  [sha256.Size]byte
	role string
	// name is the person the token stands for (--token alice=SECRET; tokenName): an answer
	// given with it records "deck:alice". "" for an unnamed token.
	name string
	// groups are the person's groups, as the tokens file lists them (none for a flag's
	// token).
	groups []string
}

// tokens are compared by their SHA-256 in constant time, so neither a token's length nor
// its first differing byte shows in the answer time.
type tokens []token

// newTokens are the tokens of the flags, of which at least one must be a controller's.
func newTokens(controllers, observers []string) (tokens, error) {
	out, err := flagTokens(controllers, observers)
	if err != nil {
		return nil, err
	}
	if !out.haveController() {
		return nil, errors.New("deck: at least one controller token is required")
	}
	return out, nil
}

// flagTokens are the tokens of the flags, secrets in the clear, NAME=SECRET naming a person.
func flagTokens(controllers, observers []string) (tokens, error) {
	var out tokens
	seen := map[string]bool{}
	add := func(list []string, role string) error {
		for _, t := range list {
			name, t := TokenName(t)
			if t == "" {
				continue
			}
			if seen[t] {
				return errors.New("deck: the same token is given twice (an observer token must differ from every controller token)")
			}
			seen[t] = true
			out = append(out, token{sum: sha256.Sum256([]byte(t)), role: role, name: name})
		}
		return nil
	}
	if err := add(controllers, signals.RoleController); err != nil {
		return nil, err
	}
	if err := add(observers, signals.RoleObserver); err != nil {
		return nil, err
	}
	return out, nil
}

func (ts tokens) haveController() bool {
	return slices.ContainsFunc(ts, func(k token) bool { return k.role == signals.RoleController })
}

// count is how many of ts have role.
func (ts tokens) count(role string) int {
	n := 0
	for _, k := range ts {
		if k.role == role {
			n++
		}
	}
	return n
}

// role returns the role of t, or "" when t is no token of the deck.
func (ts tokens) role(t string) string {
	k, _ := ts.find(t)
	return k.role
}

// find returns the token t is, if it is one of the deck's.
func (ts tokens) find(t string) (token, bool) {
	if t == "" {
		return token{}, false
	}
	sum := sha256.Sum256([]byte(t))
	var found token
	ok := false
	for _, k := range ts { // no early exit: every token is compared
		if subtle.ConstantTimeCompare(sum[:], k.sum[:]) == 1 {
			found, ok = k, true
		}
	}
	return found, ok
}

// keyring is the deck's tokens as they stand: the flags' tokens, which never change, and
// the tokens file's, read again when the file changes. Each reading replaces the whole set
// at once, so a request is checked against one set or the next, and a token the file no
// longer lists fails from the next request on.
type keyring struct {
	cur atomic.Pointer[tokens]

	fixed tokens // the flags'
	path  string // the tokens file, "" for none
	poll  time.Duration

	mu sync.Mutex // one reading of the file at a time
	// sum is the SHA-256 of the file content cur holds, last that of the content the
	// watch read last; failed names the last reading that was refused and logged (its
	// content's sum, or its read error), so that a watch does not log the same refusal
	// every poll.
	sum, last [sha256.Size]byte
	failed    string

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (kr *keyring) find(t string) (token, bool) { return kr.cur.Load().find(t) }

func (kr *keyring) role(t string) string { return kr.cur.Load().role(t) }

// answeredBy is how an action taken with k is recorded (answered_by, by): "deck:" and the
// token's name, or its role for an unnamed token.
func (k token) answeredBy() string {
	if k.name == "" {
		return "deck:" + k.role + " token"
	}
	return "deck:" + k.name
}

// credential is the token a request presents and whether it came from the cookie.
func credential(r *http.Request) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		if t, ok := strings.CutPrefix(h, "Bearer "); ok {
			return strings.TrimSpace(t), false
		}
		return "", false
	}
	if c, err := r.Cookie(CookieName); err == nil {
		return c.Value, true
	}
	return "", false
}

// identity is who a request's token stands for, for the checks of what a person may do.
type identity struct {
	Name   string   // the person, "" for an unnamed token
	Role   string   // signals.RoleController or signals.RoleObserver
	Groups []string // as the tokens file lists them
	By     string   // how the journal records the person's actions (answeredBy)
}

func (k token) identity() identity {
	return identity{Name: k.name, Role: k.role, Groups: slices.Clone(k.groups), By: k.answeredBy()}
}

// identity is who r's token stands for, or false when r presents none of the deck's
// tokens. It answers nothing and counts nothing against the failed-credential limit: call it
// behind read or write, which do.
func (s *Server) identity(r *http.Request) (identity, bool) {
	t, _ := credential(r)
	k, ok := s.tokens.find(t)
	if !ok {
		return identity{}, false
	}
	return k.identity(), true
}

// check finds the token t that r presents. When t is none of the deck's it answers r and
// returns false: 401 for no or a wrong token, a wrong one counted against r's source; 429,
// with no comparison at all, while r's source is over its failed-credential limit.
func (s *Server) check(w http.ResponseWriter, r *http.Request, t string) (token, bool) {
	if t == "" {
		unauthorized(w)
		return token{}, false
	}
	ip, now := remoteIP(r), time.Now()
	if retry, logIt, over := s.limits.over(ip, now); over {
		if logIt {
			s.log.Warn("deck source over its failed-credential limit", "remote", ip, "retry_after", retry.Round(time.Second).String())
		}
		tooManyRequests(w, retry)
		return token{}, false
	}
	k, ok := s.tokens.find(t)
	if !ok {
		s.limits.fail(ip, now)
		s.log.Info("deck credential refused", "path", r.URL.Path, "remote", r.RemoteAddr)
		unauthorized(w)
		return token{}, false
	}
	return k, true
}

// authenticate is check of the credential r presents.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (token, bool) {
	t, _ := credential(r)
	return s.check(w, r, t)
}

// authenticated runs h, which reads its credential itself (GET /acp), only for a request
// that authenticate admits.
func (s *Server) authenticated(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.authenticate(w, r); ok {
			h(w, r)
		}
	}
}

type handler func(w http.ResponseWriter, r *http.Request, role string)

// read admits any token.
func (s *Server) read(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		k, ok := s.authenticate(w, r)
		if !ok {
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		h(w, r, k.role)
	}
}

// write admits controller tokens, and cookie-borne ones only from the deck's own origin.
func (s *Server) write(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, fromCookie := credential(r)
		k, ok := s.authenticate(w, r)
		role := k.role
		switch {
		case !ok:
			return
		case role != signals.RoleController:
			writeError(w, http.StatusForbidden, "forbidden", "an observer token can only read", nil)
			return
		case fromCookie && !sameOrigin(r):
			writeError(w, http.StatusForbidden, "forbidden", "cross-origin request refused", nil)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		h(w, r, role)
	}
}

// sameOrigin reports whether r's Origin header, when it has one, names r's own host.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true // not a browser's cross-site request: browsers send Origin on POST
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="tacp deck"`)
	writeError(w, http.StatusUnauthorized, "unauthorized", "a deck token is required (Authorization: Bearer, or log in)", nil)
}

type loginRequest struct {
	Token string `json:"token"`
}

// whoamiResult says who a token is: its role, the person it names (--token alice=SECRET;
// "" for an unnamed token), the person's groups (the tokens file's) and how the journal
// records its answers (answered_by).
type whoamiResult struct {
	Role   string   `json:"role"`
	Name   string   `json:"name,omitempty"`
	Groups []string `json:"groups,omitempty"`
	By     string   `json:"by"`
}

func whoami(k token) whoamiResult {
	return whoamiResult{Role: k.role, Name: k.name, Groups: k.groups, By: k.answeredBy()}
}

// login checks a token and hands it back as an HttpOnly cookie, for the page's EventSource.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if !sameOrigin(r) {
		writeError(w, http.StatusForbidden, "forbidden", "cross-origin request refused", nil)
		return
	}
	var req loginRequest
	if !decode(w, r, &req) {
		return
	}
	k, ok := s.check(w, r, req.Token)
	if !ok {
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: req.Token, Path: "/api/", MaxAge: cookieMaxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	s.log.Info("deck login", "role", k.role, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, whoami(k))
}

// logout clears the cookie; another site's page may not sign a person out.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if !sameOrigin(r) {
		writeError(w, http.StatusForbidden, "forbidden", "cross-origin request refused", nil)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/api/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request, _ string) {
	t, _ := credential(r)
	k, _ := s.tokens.find(t)
	writeJSON(w, http.StatusOK, whoami(k))
}

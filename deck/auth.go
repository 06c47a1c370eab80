package deck

// Who may call the deck: bearer tokens with a role, presented in the Authorization header
// or in the cookie that /api/login sets, and the checks that keep another site from riding
// that cookie.

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"strings"

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
}

// tokens are compared by their SHA-256 in constant time, so neither a token's length nor
// its first differing byte shows in the answer time.
type tokens []token

func newTokens(controllers, observers []string) (tokens, error) {
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
	if len(out) == 0 {
		return nil, errors.New("deck: at least one controller token is required")
	}
	if err := add(observers, signals.RoleObserver); err != nil {
		return nil, err
	}
	return out, nil
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

type handler func(w http.ResponseWriter, r *http.Request, role string)

// read admits any token.
func (s *Server) read(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, _ := credential(r)
		role := s.tokens.role(t)
		if role == "" {
			unauthorized(w)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		h(w, r, role)
	}
}

// write admits controller tokens, and cookie-borne ones only from the deck's own origin.
func (s *Server) write(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, fromCookie := credential(r)
		role := s.tokens.role(t)
		switch {
		case role == "":
			unauthorized(w)
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
// "" for an unnamed token) and how the journal records its answers (answered_by).
type whoamiResult struct {
	Role string `json:"role"`
	Name string `json:"name,omitempty"`
	By   string `json:"by"`
}

func whoami(k token) whoamiResult {
	return whoamiResult{Role: k.role, Name: k.name, By: k.answeredBy()}
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
	k, ok := s.tokens.find(req.Token)
	if !ok {
		s.log.Info("deck login refused", "remote", r.RemoteAddr)
		unauthorized(w)
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

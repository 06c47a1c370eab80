package deck

// How many live connections one token may hold: SSE streams and /acp sockets are counted per
// token (by its SHA-256, never the token itself), so that one token — a leaked observer
// token, a page gone wild — cannot open enough of them to slow the sessions of everyone
// else. One over the bound is refused 429 before anything is read or upgraded.

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strconv"
	"sync"
)

// Defaults of Options.MaxStreamsPerToken and Options.MaxACPPerToken: far more than a person's
// tabs and editors, far fewer than it takes to load the cluster.
const (
	DefaultMaxStreamsPerToken = 64
	DefaultMaxACPPerToken     = 32
)

// retryAfter is the Retry-After of a 429, in seconds: a slot frees when one of the token's
// connections ends, which the deck cannot foresee.
const retryAfter = 10

// perToken counts the open connections of one kind by token.
type perToken struct {
	max  int
	what string // "streams", "ACP sockets": for the refusal's message

	mu   sync.Mutex
	open map[[sha256.Size]byte]int
}

func newPerToken(max, def int, what string) *perToken {
	if max <= 0 {
		max = def
	}
	return &perToken{max: max, what: what, open: map[[sha256.Size]byte]int{}}
}

// take counts one more connection of r's token; ok false when the token holds max already.
// Call release when the connection ends.
func (p *perToken) take(r *http.Request) (release func(), ok bool) {
	t, _ := credential(r)
	sum := sha256.Sum256([]byte(t))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open[sum] >= p.max {
		return nil, false
	}
	p.open[sum]++
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.open[sum]--; p.open[sum] <= 0 {
				delete(p.open, sum)
			}
		})
	}, true
}

// refuse answers 429 too_many_requests with a Retry-After.
func (p *perToken) refuse(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	writeError(w, http.StatusTooManyRequests, "too_many_requests",
		fmt.Sprintf("this token has %d %s open, the most the deck allows one token; close one and try again", p.max, p.what), nil)
}

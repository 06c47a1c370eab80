package deck

// The failed-credential limit. A source (the remote IP of a request) that presents wrong
// tokens may do so Options.LoginBurst times, then Options.LoginRate times a second; beyond
// that every credential it presents, a right one too, is answered 429 without being
// compared, so the number of guesses does not grow with the number of requests a guesser can
// send. A request that presents no credential is a signed-out page, not a guess: it neither
// counts nor is refused 429.
//
// The sources are kept in a map ordered by when each was last seen, so neither a long run
// nor a flood of addresses grows it without bound: a source unseen for longer than it takes
// to refill its whole burst is dropped (dropping it forgives nothing), and at maxSources the
// one seen longest ago makes room.

import (
	"container/list"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

const (
	// defaultLoginBurst and defaultLoginRate are Options.LoginBurst and LoginRate unset: a
	// person who mistypes a token a few times is never slowed; a guesser gets one guess a
	// second.
	defaultLoginBurst = 10
	defaultLoginRate  = 1.0
	// maxSources bounds the sources the limit remembers.
	maxSources = 10_000
	// sourceIdle is how long a source is at least remembered after it was last seen.
	sourceIdle = 10 * time.Minute
	// limitLogEvery is how often the refusal of one source is logged at most.
	limitLogEvery = time.Minute
)

// limiter holds the failed-credential limit of each source.
type limiter struct {
	every rate.Limit
	burst int
	idle  time.Duration

	mu    sync.Mutex
	order *list.List               // of *source, the most recently seen first
	byIP  map[string]*list.Element // into order
}

// source is one remote IP's limit.
type source struct {
	ip     string
	lim    *rate.Limiter
	seen   time.Time // the last credential check from it
	logged time.Time // the last time its refusal was logged
}

func newLimiter(burst int, perSecond float64) *limiter {
	if burst <= 0 {
		burst = defaultLoginBurst
	}
	if perSecond <= 0 || math.IsNaN(perSecond) || math.IsInf(perSecond, 0) {
		perSecond = defaultLoginRate
	}
	// A source is forgiven by dropping it only once its limiter would be full again anyway.
	refill := time.Duration(float64(burst) / perSecond * float64(time.Second))
	return &limiter{
		every: rate.Limit(perSecond), burst: burst, idle: max(sourceIdle, refill),
		order: list.New(), byIP: map[string]*list.Element{},
	}
}

// over reports whether ip is over its limit at now, how long until it may present a
// credential again, and whether this refusal is the one of the minute to log.
func (l *limiter) over(ip string, now time.Time) (retry time.Duration, logIt, over bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.byIP[ip]
	if !ok {
		return 0, false, false
	}
	src := e.Value.(*source)
	src.seen = now
	l.order.MoveToFront(e)
	tokens := src.lim.TokensAt(now)
	if tokens >= 1 {
		return 0, false, false
	}
	retry = time.Duration((1 - tokens) / float64(l.every) * float64(time.Second))
	if now.Sub(src.logged) >= limitLogEvery {
		src.logged, logIt = now, true
	}
	return retry, logIt, true
}

// fail counts a failed credential check of ip at now.
func (l *limiter) fail(ip string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	e, ok := l.byIP[ip]
	if !ok {
		if l.order.Len() >= maxSources {
			oldest := l.order.Back()
			delete(l.byIP, oldest.Value.(*source).ip)
			l.order.Remove(oldest)
		}
		e = l.order.PushFront(&source{ip: ip, lim: rate.NewLimiter(l.every, l.burst)})
		l.byIP[ip] = e
	}
	src := e.Value.(*source)
	src.seen = now
	l.order.MoveToFront(e)
	src.lim.AllowN(now, 1)
}

// sweep drops the sources unseen for longer than l.idle, oldest first.
func (l *limiter) sweep(now time.Time) {
	for e := l.order.Back(); e != nil; e = l.order.Back() {
		src := e.Value.(*source)
		if now.Sub(src.seen) <= l.idle {
			return
		}
		delete(l.byIP, src.ip)
		l.order.Remove(e)
	}
}

// len is how many sources l remembers.
func (l *limiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.byIP)
}

// remoteIP is the source of r for the limit: the host of its RemoteAddr. Behind a proxy
// every request has the proxy's address; the deck does not trust X-Forwarded-For, which
// any client may set.
func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// tooManyRequests answers a source over its limit: 429, and Retry-After in whole seconds.
func tooManyRequests(w http.ResponseWriter, retry time.Duration) {
	secs := max(1, int(math.Ceil(retry.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, http.StatusTooManyRequests, "too_many_requests",
		"too many wrong tokens from this address; try again in "+strconv.Itoa(secs)+"s", nil)
}

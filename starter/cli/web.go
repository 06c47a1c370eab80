package cli

// `starter web`: serves the deck (package deck) — the web app, its JSON + SSE API and the
// ACP face over WebSocket at /acp — over the sessions of the cluster the starter connects
// to, and sends the webhooks of package notify when they are configured.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tacp-dev/tacp/deck"
	"github.com/tacp-dev/tacp/gateway"
	"github.com/tacp-dev/tacp/internal/logging"
	"github.com/tacp-dev/tacp/notify"
)

func cmdWeb(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	listen := fs.String("listen", "127.0.0.1:8080", "address to serve the deck on")
	sharing := fs.String("sharing", "private", "what a named token may do on another person's session that names no rule: private (nothing), team-watch (watch) or team-act (watch and act)")
	var token, observers tokenList
	fs.Var(&token, "token", "controller token(s), comma-separated or repeated: may read and act; NAME=SECRET names the person, whose answers record deck:NAME; at least 16 characters of secret (empty: one is generated and printed)")
	fs.Var(&observers, "observer-token", "observer token(s), comma-separated or repeated: may only read")
	tokensFile := fs.String("tokens-file", "", "file of people and their hashed tokens, one 'NAME ROLE sha256:HEX [GROUP,...]' a line ('starter token' makes one); read again when it changes and on SIGHUP")
	loginBurst := fs.Int("login.burst", 10, "wrong tokens a source (remote IP) may present before its every credential is refused with 429")
	loginRate := fs.Float64("login.rate", 1, "wrong tokens a source may present each second once its burst is spent")
	bodyTimeout := fs.Duration("body-timeout", 30*time.Second, "bound on reading a request's body: a client that withholds it loses its connection")
	poll := fs.Duration("poll", 250*time.Millisecond, "the pause before a live view tries a failed events query again (new events wake it through the session's history)")
	maxStreams := fs.Int("max-streams-per-token", deck.DefaultMaxStreamsPerToken, "live views (SSE streams) one token may hold open at once; one more is refused with 429")
	store := checkpointStoreFlag(fs)
	maxACP := fs.Int("max-acp-per-token", deck.DefaultMaxACPPerToken, "/acp sockets one token may hold open at once; one more is refused with 429")
	logLevel := fs.String("log.level", "info", "log level: debug, info, warn, error")
	publicURL := fs.String("public-url", "", "the deck's URL as people open it, for the links in notifications (default: http://LISTEN/)")
	hooks := fs.String("webhook", "", "URL(s), comma-separated, to POST notifications to (a Slack incoming webhook, an ntfy template URL, your own)")
	hookSecret := fs.String("webhook.secret", "", "shared secret: each POST carries X-Tacp-Signature: sha256=HMAC-SHA256(body)")
	hookEvents := fs.String("webhook.events", strings.Join(notify.DefaultEvents, ","), "events to notify: permission.requested, turn.ended, turn.failed")
	hookPoll := fs.Duration("webhook.poll", 2*time.Second, "how often the sessions are looked at for notifications")
	hookAttempts := fs.Int("webhook.attempts", 6, "tries of one notification before it is given up")
	hookTimeout := fs.Duration("webhook.timeout", 10*time.Second, "bound on one POST, its answer included")
	if !e.parse(fs, args, false) {
		return exitError
	}
	events, err := notify.ParseEvents(*hookEvents)
	if err != nil {
		return e.fail(err)
	}
	logger, err := logging.New(*logLevel)
	if err != nil {
		return e.fail(err)
	}
	hookURLs := splitTokens(*hooks)
	for _, u := range hookURLs {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return e.fail(fmt.Errorf("--webhook %q: want an http:// or https:// URL", u))
		}
	}
	if err := checkTokens(append(slices.Clone(token), observers...)); err != nil {
		return e.fail(err)
	}
	if *loginBurst < 1 || !(*loginRate > 0) {
		return e.fail(errors.New("--login.burst must be at least 1 and --login.rate above 0"))
	}
	controllerTokens := slices.Clone(token)
	generated := len(controllerTokens) == 0 && *tokensFile == ""
	if generated {
		controllerTokens = []string{newToken()}
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	// /acp: sessions that remote editors create take --agent and --workspace (or the
	// worker's); the client's cwd names a directory on its own machine.
	checkpoints, err := checkpointReader(*store)
	if err != nil {
		return e.fail(err)
	}
	gw := gateway.New(gateway.Options{Client: e.c, Agent: e.agent, Workspace: e.workspace, IgnoreClientCwd: true, Logger: logger})
	d, err := deck.New(deck.Options{
		Client: e.c, ControllerTokens: controllerTokens, ObserverTokens: observers,
		Logger: logger, PollInterval: *poll, Gateway: gw, Sharing: *sharing,
		TokensFile: *tokensFile, LoginBurst: *loginBurst, LoginRate: *loginRate,
		MaxStreamsPerToken: *maxStreams, MaxACPPerToken: *maxACP,
		Checkpoints: checkpoints,
	})
	if err != nil {
		return e.fail(err)
	}
	defer d.Close()
	if *tokensFile != "" {
		// SIGHUP reads the tokens file again at once (the deck also notices a change by itself).
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-hup:
					_ = d.Reload() // it logs what it did
				}
			}
		}()
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return e.fail(err)
	}
	host, _, _ := net.SplitHostPort(*listen)
	if !isLoopback(host) {
		// Tokens and cookies travel in the clear over plain HTTP: beyond this machine, put a
		// TLS-terminating proxy in front.
		logger.Warn("deck serves plain HTTP beyond loopback; front it with TLS", "listen", ln.Addr().String())
	}
	srv := &http.Server{
		Handler:           bodyDeadline(d, *bodyTimeout),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// Requests live in ctx, so an interrupt ends the live views too: Shutdown waits
		// only for idle connections, and a live view is never idle.
		BaseContext: func(net.Listener) context.Context { return ctx },
		// No WriteTimeout: the live view is a response that lasts as long as it is read.
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	url := "http://" + ln.Addr().String() + "/"
	if len(hookURLs) > 0 {
		if *hookSecret == "" {
			logger.Warn("webhooks are sent unsigned: set --webhook.secret (TACP_WEBHOOK_SECRET)")
		}
		deckURL := *publicURL
		if deckURL == "" {
			deckURL = url
		}
		hook := notify.NewWebhook(notify.WebhookOptions{URLs: hookURLs, Secret: *hookSecret, Attempts: *hookAttempts, Timeout: *hookTimeout, Logger: logger})
		follower := notify.NewFollower(notify.FollowerOptions{Sessions: e.c, Send: hook.Send, Events: events, DeckURL: deckURL, Poll: *hookPoll, Logger: logger})
		go hook.Run(ctx)
		go follower.Run(ctx)
		logger.Info("webhooks on", "urls", len(hookURLs), "events", *hookEvents)
	}
	if generated {
		// The token goes in the fragment: the browser keeps it out of requests and logs.
		fmt.Fprintf(e.err, "deck on %s#token=%s\n(a new controller token; set --token or TACP_TOKEN to keep one)\n", url, controllerTokens[0])
	} else {
		fmt.Fprintf(e.err, "deck on %s (sign in with your token, or open %s#token=<token>)\n", url, url)
	}
	logger.Info("deck serving", "addr", ln.Addr().String(), "controllers", len(controllerTokens), "observers", len(observers), "tokens_file", *tokensFile)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return e.fail(err)
	}
	logger.Info("deck stopped")
	return exitOK
}

func splitTokens(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// bodyDeadline bounds the reading of a request's body: a client that sends its headers and
// then trickles (or withholds) the body does not hold a connection beyond d. The live view
// and /acp are GETs without a body and keep their connections.
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		h.ServeHTTP(w, r)
	})
}

// tokenList is a repeatable flag of tokens: each use adds its comma-separated tokens.
type tokenList []string

func (l *tokenList) String() string { return strings.Join(*l, ",") }

func (l *tokenList) Set(v string) error {
	*l = append(*l, splitTokens(v)...)
	return nil
}

// minSecret is the shortest token secret the deck takes: a guessable token is no lock.
const minSecret = 16

// checkTokens refuses a secret shorter than minSecret, a secret given twice and a person
// named twice: every token must be one a person can be told apart by.
func checkTokens(toks []string) error {
	secrets, names := map[string]bool{}, map[string]bool{}
	for _, t := range toks {
		name, secret := tokenName(t)
		if len(secret) < minSecret {
			return fmt.Errorf("a deck token's secret has %d characters; want at least %d (starter web prints a generated one when --token is empty)", len(secret), minSecret)
		}
		if secrets[secret] {
			return errors.New("a deck token is given twice (as a controller and an observer, or twice in one list)")
		}
		if name != "" && names[name] {
			return fmt.Errorf("deck token name %q is given twice: each person needs a token of their own", name)
		}
		secrets[secret], names[name] = true, true
	}
	return nil
}

// tokenName splits NAME=SECRET as the deck does (deck.TokenName).
func tokenName(t string) (name, secret string) { return deck.TokenName(t) }

// newToken is 32 random bytes in hex: long enough that guessing is no attack.
func newToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Package remote is the editor's side of remote ACP: `starter acp --remote URL --token T`
// speaks ACP on stdio as the agent of an editor that starts a local command (Zed,
// JetBrains, acpx) and relays every message to a remote tacp's /acp (the deck's ACP face,
// package deck) over one WebSocket, one JSON-RPC message per text frame. The laptop needs
// no Temporal credentials, only the deck's URL and a token.
//
// When the socket drops (a laptop that sleeps, a network that changes, a deck that
// restarts) the shim dials again with backoff and resumes where the editor stands:
//
//  1. it sends initialize again, with the editor's own params;
//  2. it loads every session the editor had with _meta.tacp.after_seq set to the journal
//     seq of the last session/update it forwarded (every update the gateway sends carries
//     _meta.tacp.seq), so the gateway replays exactly what the editor missed;
//  3. it sends again the editor's requests whose answers were lost with the socket. A
//     session/prompt is idempotent by its messageId (the shim gives one to a prompt that
//     has none), so the prompt that was running answers when its turn ends; requests that
//     are not idempotent (session/new) are answered with an error instead;
//  4. it sends what the editor said while the socket was down (a session/cancel).
//
// Updates are deduplicated by seq, so the editor never sees one twice, and the echo of its
// own prompt (a user_message_chunk naming the prompt's client_message_id) is dropped. A
// permission request the editor is still answering stays open: the gateway asks it again
// on the new socket (same _meta.tacp.request_id) and the shim binds the editor's answer to
// that one instead of asking twice.
package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"
)

// Options configure Run.
type Options struct {
	// URL is the deck's ACP endpoint: ws://host:port/acp or wss://… (http and https are
	// read as ws and wss).
	URL string
	// Token is a deck token, sent as "Authorization: Bearer". An observer token makes an
	// observer connection.
	Token string
	// MinBackoff and MaxBackoff bound the wait between dials after a failure (defaults
	// 100 ms and 5 s; each failure doubles it, with ±20% jitter).
	MinBackoff, MaxBackoff time.Duration
	// PingInterval and PingTimeout: the shim pings the deck this often and drops a socket
	// whose pong does not come back in time (defaults 15 s and 10 s), so a socket that died
	// silently (a laptop that slept) is replaced.
	PingInterval, PingTimeout time.Duration
	// DialTimeout bounds one dial and its handshake (default 10 s).
	DialTimeout time.Duration
	// Logger gets diagnostics (never prompt text). Default: discard.
	Logger *slog.Logger
}

// ErrUnauthorized is returned by Run when the deck refuses the token (401 or 403 at the
// upgrade): dialing again would not help.
var ErrUnauthorized = errors.New("remote: the deck refused the token")

// ErrNotACP is returned by Run when the URL answers HTTP but not as a WebSocket (a page, a
// 404, a redirect): it is not the deck's /acp, and dialing again would not help. A deck
// that is away or overloaded (no answer, 5xx, 429) is tried again instead.
var ErrNotACP = errors.New("remote: the URL is not a deck's ACP endpoint")

// Run relays the ACP connection on in and out (the editor's end) to o.URL until in ends or
// ctx does, reconnecting as often as it must. It returns nil when the editor hangs up and
// ErrUnauthorized (wrapped) when the deck refuses the token.
func Run(ctx context.Context, in io.Reader, out io.Writer, o Options) error {
	if o.URL == "" {
		return errors.New("remote: a URL is required")
	}
	u, err := EndpointURL(o.URL)
	if err != nil {
		return err
	}
	o.URL = u
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(5*time.Second, o.MinBackoff)
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 15 * time.Second
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = 10 * time.Second
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s := newShim(o, out)
	go func() {
		err := s.readEditor(in)
		cancel(err) // the editor hung up (nil cause: a clean end)
	}()
	err = s.connect(ctx)
	s.shutdown()
	if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrNotACP) {
		// The editor started this process and writes initialize at once: it is answered
		// with the reason (failAll), not left to find a closed pipe.
		select {
		case <-s.asked:
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
		return err
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// EndpointURL is the WebSocket URL of a deck's ACP endpoint as a person may write it: http
// and https become ws and wss, and a URL with no path (the deck's own address, as its
// sign-in page shows it) gets /acp. Any other path is kept: a deck behind a proxy may serve
// /acp elsewhere.
func EndpointURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("remote: URL %q: %v", raw, err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	case "ws", "wss":
	default:
		return "", fmt.Errorf("remote: URL %q: want ws://, wss://, http:// or https://", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("remote: URL %q names no host", raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/acp"
	}
	return u.String(), nil
}

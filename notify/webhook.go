package notify

// Delivery: each notification is POSTed to every webhook URL on its own goroutine (at most
// MaxInFlight at once), tried again with backoff on a failure that may pass, and given up
// after Attempts or MaxAge. Send never blocks: a full queue drops the notification with a
// warning, so that nothing upstream (the follower, the deck) ever waits for a receiver.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// WebhookOptions configure a Webhook.
type WebhookOptions struct {
	// URLs receive every notification.
	URLs []string
	// Secret signs each body (X-Tacp-Signature); empty: unsigned.
	Secret string
	// Attempts bounds the tries of one delivery (default 6).
	Attempts int
	// Timeout bounds one attempt, answer included (default 10 s).
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between attempts (defaults 1 s and 30 s;
	// doubling, or the receiver's Retry-After when it is longer).
	MinBackoff, MaxBackoff time.Duration
	// MaxAge gives up on a notification this long after its event (default 10 min): news
	// that late is no news.
	MaxAge time.Duration
	// Queue bounds the notifications waiting to be sent (default 1024), MaxInFlight the
	// deliveries running at once (default 16).
	Queue, MaxInFlight int
	// Client sends the POSTs (default: a client of its own).
	Client *http.Client
	Logger *slog.Logger
}

// Webhook delivers notifications.
type Webhook struct {
	o     WebhookOptions
	queue chan Notification
	slots chan struct{}
	wg    sync.WaitGroup
}

// NewWebhook returns a Webhook with o's defaults filled in; Run sends.
func NewWebhook(o WebhookOptions) *Webhook {
	if o.Attempts <= 0 {
		o.Attempts = 6
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(30*time.Second, o.MinBackoff)
	}
	if o.MaxAge <= 0 {
		o.MaxAge = 10 * time.Minute
	}
	if o.Queue <= 0 {
		o.Queue = 1024
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 16
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Webhook{o: o, queue: make(chan Notification, o.Queue), slots: make(chan struct{}, o.MaxInFlight)}
}

// Send queues n for every URL. It never blocks.
func (w *Webhook) Send(n Notification) {
	select {
	case w.queue <- n:
	default:
		w.o.Logger.Warn("webhook queue full; notification dropped", "id", n.ID)
	}
}

// Run delivers queued notifications until ctx ends, then waits for the deliveries under
// way (each ends with its attempt's timeout at the latest).
func (w *Webhook) Run(ctx context.Context) {
	defer w.wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-w.queue:
			body, err := json.Marshal(n)
			if err != nil {
				w.o.Logger.Error("notification not encoded", "id", n.ID, "err", err)
				continue
			}
			for _, u := range w.o.URLs {
				select {
				case w.slots <- struct{}{}:
				case <-ctx.Done():
					return
				}
				w.wg.Add(1)
				go func() {
					defer func() { <-w.slots; w.wg.Done() }()
					w.deliver(ctx, u, n, body)
				}()
			}
		}
	}
}

// Sign returns the X-Tacp-Signature value of body under secret: "sha256=" and the hex
// HMAC-SHA256.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether signature is Sign(secret, body), in constant time: what a
// receiver does first.
func Verify(secret string, body []byte, signature string) bool {
	return hmac.Equal([]byte(Sign(secret, body)), []byte(signature))
}

// errPermanent marks an answer that another attempt would not change.
var errPermanent = errors.New("not retried")

// deliver tries one POST until it is delivered or the bounds run out.
func (w *Webhook) deliver(ctx context.Context, target string, n Notification, body []byte) {
	giveUp := n.At.Add(w.o.MaxAge)
	if n.Deadline != nil && n.Deadline.Before(giveUp) {
		giveUp = *n.Deadline // past the deadline the request is decided: nothing to ask
	}
	backoff := w.o.MinBackoff
	log := w.o.Logger.With("id", n.ID, "event", n.Event, "url", redact(target))
	for attempt := 1; ; attempt++ {
		retryAfter, err := w.post(ctx, target, n, body, attempt)
		if err == nil {
			log.Info("webhook delivered", "attempt", attempt)
			return
		}
		wait := max(backoff, retryAfter)
		switch {
		case errors.Is(err, errPermanent):
			log.Error("webhook refused; not retried", "attempt", attempt, "err", err)
			return
		case ctx.Err() != nil:
			return
		case attempt >= w.o.Attempts || time.Now().Add(wait).After(giveUp):
			log.Error("webhook not delivered; giving up", "attempts", attempt, "err", err)
			return
		}
		log.Warn("webhook attempt failed; retrying", "attempt", attempt, "in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, w.o.MaxBackoff)
	}
}

// post makes one attempt. It returns how long the receiver asked to wait (Retry-After)
// when it did.
func (w *Webhook) post(ctx context.Context, target string, n Notification, body []byte, attempt int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, w.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errPermanent, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tacp-deck")
	req.Header.Set(HeaderEvent, n.Event)
	req.Header.Set(HeaderDelivery, n.ID)
	req.Header.Set(HeaderAttempt, strconv.Itoa(attempt))
	if w.o.Secret != "" {
		req.Header.Set(HeaderSignature, Sign(w.o.Secret, body))
	}
	resp, err := w.o.Client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return 0, nil
	case c == http.StatusRequestTimeout || c == http.StatusTooManyRequests || c >= 500:
		var after time.Duration
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			after = min(time.Duration(s)*time.Second, w.o.MaxBackoff)
		}
		return after, fmt.Errorf("HTTP %d", c)
	default:
		return 0, fmt.Errorf("%w: HTTP %d", errPermanent, c)
	}
}

// redact keeps a URL's scheme and host for the logs: its path and query may hold a secret
// (a Slack webhook's, an ntfy topic).
func redact(target string) string {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return "(url)"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

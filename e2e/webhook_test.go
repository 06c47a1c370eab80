package e2e

// Webhooks end to end: the deck's notifier (package notify) over the suite's sessions, and
// `starter web --webhook` itself, POSTing to httptest receivers. A permission request asked
// of a person reaches the receiver signed and within a bound, an auto-decided one does not,
// the body holds no tool argument and no prompt or agent text; a 500 is retried with the
// same id and bytes; a receiver that never answers does not delay the turn.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/notify"
	"github.com/tacp-dev/tacp/signals"
)

// hookPost is one POST a receiver got.
type hookPost struct {
	hdr  http.Header
	body []byte
	n    notify.Notification
}

// hookReceiver records the POSTs about one session and answers them with respond (200
// when nil); the others it answers 200 and forgets (every session of the suite is followed).
type hookReceiver struct {
	*httptest.Server
	session string

	mu      sync.Mutex
	posts   []hookPost
	respond func(hookPost, int) int // the post and how many came before it; returns the status
	wake    chan struct{}
}

func newHookReceiver(t *testing.T, session string) *hookReceiver {
	t.Helper()
	r := &hookReceiver{session: session, wake: make(chan struct{}, 1)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var n notify.Notification
		if json.Unmarshal(b, &n) != nil || n.SessionID != r.session {
			return
		}
		p := hookPost{hdr: req.Header.Clone(), body: b, n: n}
		r.mu.Lock()
		before := len(r.posts)
		r.posts = append(r.posts, p)
		respond := r.respond
		r.mu.Unlock()
		select {
		case r.wake <- struct{}{}:
		default:
		}
		code := http.StatusOK
		if respond != nil {
			code = respond(p, before)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(r.Close)
	return r
}

// waitFor waits, within bound, for a POST that match accepts and returns it.
func (r *hookReceiver) waitFor(t *testing.T, bound time.Duration, match func(hookPost) bool) hookPost {
	t.Helper()
	deadline := time.After(bound)
	for {
		r.mu.Lock()
		for _, p := range r.posts {
			if match(p) {
				r.mu.Unlock()
				return p
			}
		}
		r.mu.Unlock()
		select {
		case <-r.wake:
		case <-deadline:
			t.Fatalf("no matching POST within %s", bound)
		}
	}
}

func (r *hookReceiver) count(match func(hookPost) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.posts {
		if match(p) {
			n++
		}
	}
	return n
}

func isEvent(event string) func(hookPost) bool {
	return func(p hookPost) bool { return p.n.Event == event }
}

// startNotifier runs the deck's notifier in this process over the suite's sessions.
func startNotifier(t *testing.T, o notify.WebhookOptions, events ...string) {
	t.Helper()
	ev, err := notify.ParseEvents(strings.Join(events, ","))
	require.NoError(t, err)
	hook := notify.NewWebhook(o)
	f := notify.NewFollower(notify.FollowerOptions{Sessions: sc, Send: hook.Send, Events: ev, DeckURL: "http://deck.test/", Poll: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); hook.Run(ctx) }()
	go func() { defer wg.Done(); f.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// permissionRequestOf returns the data of the permission.requested of turn.
func permissionRequestOf(t *testing.T, id string, turn int64) signals.PermissionRequestedData {
	t.Helper()
	evs := waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventPermissionRequested && ev.TurnID == turn })
	var d signals.PermissionRequestedData
	require.NoError(t, json.Unmarshal(evs[len(evs)-1].Data, &d))
	return d
}

func TestWebhookSignedPOSTWithinABoundAfterAPermissionRequest(t *testing.T) {
	t.Parallel()
	id := session(t)
	r := newHookReceiver(t, id)
	const secret = "webhook-secret-for-the-test"
	// The deck itself, as operators run it, up before the session begins: a session it
	// first sees later is followed from where it stands.
	startDeckProcess(t, "127.0.0.1:0", "op-"+signals.NewID(), []string{"TACP_WEBHOOK_SECRET=" + secret},
		"--webhook", r.URL, "--webhook.poll", "250ms", "--webhook.events", "permission.requested,turn.ended",
		"--public-url", "https://deck.example/", "--log.level", "info")

	cfg := signals.SessionConfig{SessionID: id}
	prompt(t, cfg, "the password is hunter2") // the testagent says it back: agent text
	turnEnd(t, id, 1)
	prompt(t, cfg, "/permission read") // decided by the policy: nobody to wake
	turnEnd(t, id, 2)
	prompt(t, cfg, "/permission edit") // asked
	req := permissionRequestOf(t, id, 3)

	p := r.waitFor(t, 45*time.Second, isEvent(notify.EventPermissionRequested)) // the deck reads every active session of the suite each poll
	require.True(t, notify.Verify(secret, p.body, p.hdr.Get(notify.HeaderSignature)), "signed: %s", p.hdr.Get(notify.HeaderSignature))
	require.False(t, notify.Verify("another", p.body, p.hdr.Get(notify.HeaderSignature)))
	require.Equal(t, p.n.ID, p.hdr.Get(notify.HeaderDelivery))
	require.Equal(t, notify.EventPermissionRequested, p.hdr.Get(notify.HeaderEvent))
	require.Equal(t, "1", p.hdr.Get(notify.HeaderAttempt))
	require.Equal(t, id+":permission.requested:"+req.RequestID, p.n.ID)
	require.Equal(t, req.RequestID, p.n.RequestID)
	require.EqualValues(t, 3, p.n.TurnID)
	require.Equal(t, &notify.Tool{Title: "edit something", Kind: "edit"}, p.n.Tool)
	require.True(t, req.Deadline.Equal(*p.n.Deadline))
	require.Equal(t, "https://deck.example/#/s/"+id, p.n.URL)
	require.Contains(t, p.n.Text, p.n.URL)
	for _, secret := range []string{"hunter2", "README.md", "rawInput", "/permission"} {
		require.NotContains(t, string(p.body), secret, "no prompt text, agent text or tool argument in the body")
	}

	_, err := sc.PermissionRespond(ctxFor(t, 30*time.Second), id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: "allow"})
	require.NoError(t, err)
	turnEnd(t, id, 3)
	r.waitFor(t, 45*time.Second, func(p hookPost) bool { return p.n.Event == notify.EventTurnEnded && p.n.TurnID == 3 })
	require.Equal(t, 1, r.count(isEvent(notify.EventPermissionRequested)), "the asked request once; the policy's not at all")
	require.Equal(t, 3, r.count(isEvent(notify.EventTurnEnded)))
}

func TestWebhookA500IsRetried(t *testing.T) {
	t.Parallel()
	id := session(t)
	r := newHookReceiver(t, id)
	r.respond = func(_ hookPost, before int) int {
		if before < 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}
	startNotifier(t, notify.WebhookOptions{URLs: []string{r.URL}, Secret: "s", MinBackoff: 50 * time.Millisecond}, notify.EventPermissionRequested)
	prompt(t, signals.SessionConfig{SessionID: id}, "/permission edit")
	req := permissionRequestOf(t, id, 1)
	r.waitFor(t, 30*time.Second, func(p hookPost) bool { return p.hdr.Get(notify.HeaderAttempt) == "3" })
	r.mu.Lock()
	posts := append([]hookPost(nil), r.posts...)
	r.mu.Unlock()
	require.Len(t, posts, 3)
	for i, p := range posts {
		require.Equal(t, id+":permission.requested:"+req.RequestID, p.hdr.Get(notify.HeaderDelivery), "one id on every attempt")
		require.Equal(t, string(posts[0].body), string(p.body), "the same bytes on every attempt")
		require.Equal(t, []string{"1", "2", "3"}[i], p.hdr.Get(notify.HeaderAttempt))
		require.True(t, notify.Verify("s", p.body, p.hdr.Get(notify.HeaderSignature)))
	}
	_, err := sc.PermissionRespond(ctxFor(t, 30*time.Second), id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: "allow"})
	require.NoError(t, err)
	turnEnd(t, id, 1)
}

func TestWebhookReceiverThatNeverAnswersDoesNotDelayTheTurn(t *testing.T) {
	t.Parallel()
	id := session(t)
	r := newHookReceiver(t, id)
	release := make(chan struct{})
	answered := make(chan struct{})
	var once sync.Once
	r.respond = func(hookPost, int) int {
		<-release // never, while the test runs
		once.Do(func() { close(answered) })
		return http.StatusOK
	}
	t.Cleanup(func() { close(release) })
	startNotifier(t, notify.WebhookOptions{URLs: []string{r.URL}, Timeout: time.Hour}, notify.EventPermissionRequested)
	prompt(t, signals.SessionConfig{SessionID: id}, "/permission edit")
	req := permissionRequestOf(t, id, 1)
	r.waitFor(t, 30*time.Second, isEvent(notify.EventPermissionRequested)) // in flight, unanswered

	_, err := sc.PermissionRespond(ctxFor(t, 30*time.Second), id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: "allow"})
	require.NoError(t, err)
	evs := turnEnd(t, id, 1)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind)
	require.Equal(t, "end_turn", data["stop_reason"])
	select {
	case <-answered:
		t.Fatal("the receiver answered; the test proves nothing")
	default:
	}
	require.Equal(t, 1, r.count(isEvent(notify.EventPermissionRequested)), "still the first attempt, in flight")
}

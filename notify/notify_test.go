package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func TestANotificationCarriesTheToolsTitleAndKindAndNothingElseOfIt(t *testing.T) {
	call := json.RawMessage(`{"toolCallId":"c1","title":"Edit config","kind":"edit","rawInput":{"path":"/etc/secret","token":"s3cr3t"},"content":[{"type":"text","text":"hidden"}]}`)
	n := PermissionRequested("s 1", 3, "r-9", toolOf(call), t0.Add(10*time.Minute), t0, "https://deck.example/")
	b, err := json.Marshal(n)
	require.NoError(t, err)
	for _, secret := range []string{"/etc/secret", "s3cr3t", "hidden", "rawInput"} {
		require.NotContains(t, string(b), secret)
	}
	require.Equal(t, "s 1:permission.requested:r-9", n.ID)
	require.Equal(t, &Tool{Title: "Edit config", Kind: "edit"}, n.Tool)
	require.Equal(t, "https://deck.example/#/s/s%201", n.URL)
	require.Contains(t, n.Text, n.URL, "Slack shows the link")
	require.Contains(t, n.Message, "10:10:00 UTC")
	require.Equal(t, "s1:turn.failed:4", TurnFailed("s1", 4, t0, "").ID)
	require.Equal(t, "s1:turn.ended:4", TurnEnded("s1", 4, "end_turn", t0, "").ID)
}

func TestParseEvents(t *testing.T) {
	def, err := ParseEvents("")
	require.NoError(t, err)
	require.Equal(t, map[string]bool{EventPermissionRequested: true, EventElicitationRequested: true, EventTurnFailed: true}, def)
	all, err := ParseEvents("permission.requested, turn.ended,turn.failed")
	require.NoError(t, err)
	require.Len(t, all, 3)
	_, err = ParseEvents("turn.started")
	require.Error(t, err)
}

// receiver is a webhook endpoint that answers with the statuses it is given, in order
// (the last one from then on).
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	got      []*http.Request
	bodies   [][]byte
	hits     chan struct{}
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{statuses: statuses, hits: make(chan struct{}, 100)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, req)
		r.bodies = append(r.bodies, b)
		code := r.statuses[min(len(r.got), len(r.statuses))-1]
		r.mu.Unlock()
		w.WriteHeader(code)
		r.hits <- struct{}{}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-r.hits:
		case <-time.After(20 * time.Second):
			t.Fatalf("the receiver got fewer than %d POSTs", n)
		}
	}
}

func startWebhook(t *testing.T, o WebhookOptions) *Webhook {
	t.Helper()
	w := NewWebhook(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func TestWebhookSignsTheBodyAndRetriesWhatMayPass(t *testing.T) {
	r := newReceiver(t, 500, 503, 200)
	w := startWebhook(t, WebhookOptions{URLs: []string{r.URL}, Secret: "shh", MinBackoff: time.Millisecond})
	n := TurnFailed("s1", 2, time.Now(), "")
	w.Send(n)
	r.wait(t, 3)
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Len(t, r.got, 3)
	for i, req := range r.got {
		require.Equal(t, string(r.bodies[0]), string(r.bodies[i]), "every attempt sends the same bytes")
		require.Equal(t, n.ID, req.Header.Get(HeaderDelivery))
		require.Equal(t, EventTurnFailed, req.Header.Get(HeaderEvent))
		require.Equal(t, []string{"1", "2", "3"}[i], req.Header.Get(HeaderAttempt))
		require.True(t, Verify("shh", r.bodies[i], req.Header.Get(HeaderSignature)))
		require.False(t, Verify("other", r.bodies[i], req.Header.Get(HeaderSignature)))
		require.Equal(t, "application/json", req.Header.Get("Content-Type"))
	}
}

func TestWebhookGivesUpOnARefusalAndAfterItsAttempts(t *testing.T) {
	bad := newReceiver(t, 400)
	down := newReceiver(t, 502)
	w := startWebhook(t, WebhookOptions{URLs: []string{bad.URL, down.URL}, Attempts: 3, MinBackoff: time.Millisecond})
	w.Send(TurnFailed("s1", 2, time.Now(), ""))
	bad.wait(t, 1)
	down.wait(t, 3)
	// A later notification still goes out: nothing is stuck.
	w.Send(TurnFailed("s1", 3, time.Now(), ""))
	bad.wait(t, 1)
	down.wait(t, 3)
	bad.mu.Lock()
	require.Len(t, bad.got, 2, "a 400 is not retried")
	bad.mu.Unlock()
}

func TestWebhookSendNeverBlocksOnAReceiverThatNeverAnswers(t *testing.T) {
	release := make(chan struct{})
	var hits atomic.Int32
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		<-release
	}))
	t.Cleanup(func() { close(release); stuck.Close() })
	w := startWebhook(t, WebhookOptions{URLs: []string{stuck.URL}, Timeout: time.Hour, MaxInFlight: 1, Queue: 2})
	done := make(chan struct{})
	go func() {
		for i := range 100 { // far more than the queue and the slots
			w.Send(TurnFailed("s1", int64(i), time.Now(), ""))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Send blocked")
	}
	require.Eventually(t, func() bool { return hits.Load() == 1 }, 10*time.Second, time.Millisecond)
}

// fakeSessions is a Sessions whose answers the test sets, counting what is read.
type fakeSessions struct {
	mu      sync.Mutex
	infos   []tacpclient.SessionInfo
	status  map[string]signals.Status
	journal map[string][]signals.Event
	reads   int
}

func (f *fakeSessions) ListWhere(context.Context, string, int) ([]tacpclient.SessionInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]tacpclient.SessionInfo(nil), f.infos...), nil
}

func (f *fakeSessions) Status(_ context.Context, id string) (signals.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.status[id], nil
}

func (f *fakeSessions) Events(_ context.Context, id string, after int64, limit int) (signals.EventsResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	var out []signals.Event
	for _, ev := range f.journal[id] {
		if ev.Seq > after && len(out) < limit {
			out = append(out, ev)
		}
	}
	return signals.EventsResult{Events: out}, nil
}

func (f *fakeSessions) add(id string, evs ...signals.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.journal == nil {
		f.journal = map[string][]signals.Event{}
	}
	j := f.journal[id]
	for _, ev := range evs {
		ev.Seq = int64(len(j) + 1)
		j = append(j, ev)
	}
	f.journal[id] = j
}

func requested(turn int64, rid, kind string) signals.Event {
	d, _ := json.Marshal(signals.PermissionRequestedData{RequestID: rid, ToolCall: json.RawMessage(`{"title":"t","kind":"` + kind + `","rawInput":{"a":1}}`), Deadline: t0.Add(time.Hour)})
	return signals.Event{Kind: signals.EventPermissionRequested, TurnID: turn, At: t0, Data: d}
}

func resolved(turn int64, rid, by string) signals.Event {
	d, _ := json.Marshal(signals.PermissionResolution{RequestID: rid, Outcome: "selected", DecidedBy: by})
	return signals.Event{Kind: signals.EventPermissionResolved, TurnID: turn, At: t0, Data: d}
}

func ended(turn int64) signals.Event {
	return signals.Event{Kind: signals.EventTurnEnded, TurnID: turn, At: t0, Data: json.RawMessage(`{"stop_reason":"end_turn"}`)}
}

func follower(src *fakeSessions, events string) (*Follower, *[]Notification) {
	var got []Notification
	ev, _ := ParseEvents(events)
	f := NewFollower(FollowerOptions{Sessions: src, Events: ev, Send: func(n Notification) { got = append(got, n) }, Now: func() time.Time { return t0 }})
	return f, &got
}

func ids(ns []Notification) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.ID)
	}
	return out
}

func TestFollowerNotifiesAnAskedRequestOnceAndNotAnAutoDecidedOne(t *testing.T) {
	src := &fakeSessions{infos: []tacpclient.SessionInfo{{SessionID: "s1", State: signals.StateRunning, Turn: 1, StartedAt: t0}}}
	src.add("s1", signals.Event{Kind: signals.EventSessionStarted}, signals.Event{Kind: signals.EventTurnStarted, TurnID: 1},
		requested(1, "auto", "read"), resolved(1, "auto", signals.DecidedByPolicy),
		requested(1, "asked", "edit"))
	f, got := follower(src, "")
	ctx := context.Background()
	require.NoError(t, f.Step(ctx))
	require.Equal(t, []string{"s1:permission.requested:asked"}, ids(*got))
	n := (*got)[0]
	require.Equal(t, &Tool{Title: "t", Kind: "edit"}, n.Tool)
	require.Equal(t, t0.Add(time.Hour), *n.Deadline)

	src.add("s1", resolved(1, "asked", signals.DecidedByUser), ended(1))
	require.NoError(t, f.Step(ctx))
	require.NoError(t, f.Step(ctx))
	require.Len(t, *got, 1, "once; and turn.ended is not chosen by default")
}

func TestFollowerReadsNothingOfAnIdleSessionUntilItChanges(t *testing.T) {
	src := &fakeSessions{infos: []tacpclient.SessionInfo{{SessionID: "old", State: signals.StateIdle, Turn: 4, StartedAt: t0.Add(-time.Hour)}}}
	src.add("old", ended(4))
	src.status = map[string]signals.Status{"old": {Journal: signals.JournalRange{FirstSeq: 1, LastSeq: 1}}}
	f, got := follower(src, "turn.ended")
	ctx := context.Background()
	for range 3 {
		require.NoError(t, f.Step(ctx))
	}
	require.Zero(t, src.reads, "an idle session costs a line of the list, nothing more")
	require.Empty(t, *got, "its last turn's end is old news")

	// A turn starts and ends between two looks: its end is found in the journal's tail.
	src.add("old", signals.Event{Kind: signals.EventTurnStarted, TurnID: 5}, ended(5))
	src.mu.Lock()
	src.infos[0].Turn = 5
	src.status["old"] = signals.Status{Journal: signals.JournalRange{FirstSeq: 1, LastSeq: 3}}
	src.mu.Unlock()
	require.NoError(t, f.Step(ctx))
	require.Equal(t, []string{"old:turn.ended:5"}, ids(*got))
}

func TestFollowerStartedLateAsksAgainWhatIsStillOpen(t *testing.T) {
	src := &fakeSessions{infos: []tacpclient.SessionInfo{{SessionID: "s1", State: signals.StateSuspended, Turn: 2, AwaitingApproval: true, StartedAt: t0.Add(-time.Hour)}}}
	src.add("s1", requested(2, "r1", "edit"))
	src.status = map[string]signals.Status{"s1": {
		PendingPermissions: []signals.PendingPermission{{RequestID: "r1", TurnID: 2, Title: "t", Kind: "edit", Deadline: t0.Add(time.Hour)}},
		Journal:            signals.JournalRange{FirstSeq: 1, LastSeq: 1},
	}}
	f, got := follower(src, "")
	require.NoError(t, f.Step(context.Background()))
	require.Equal(t, []string{"s1:permission.requested:r1"}, ids(*got), "the same id as before the restart: receivers deduplicate")
	require.NoError(t, f.Step(context.Background()))
	require.Len(t, *got, 1)
	require.True(t, strings.HasPrefix((*got)[0].Message, "Session s1 asks permission: edit"))
}

package e2e

// No role can hurt another's sessions (issue 42), as the deck's live connections go: the SSE
// streams of one session share one events poller, so a session costs one query per history
// wake-up however many pages watch it; each token holds a bounded number of streams and
// /acp sockets; and a socket that never speaks ACP is closed. Five hundred observer streams
// on one session leave another person's running turn alone.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/deck"
	"github.com/tacp-dev/tacp/gateway"
	"github.com/tacp-dev/tacp/signals"
)

// loadDeck is a deck over the suite's sessions whose counters the test reads, with one
// controller and one observer token.
type loadDeck struct {
	*httptest.Server
	deck               *deck.Server
	gw                 *gateway.Gateway
	controller, viewer string
	// client opens streams: one connection each, as many as the test asks.
	client *http.Client
}

func newLoadDeck(t *testing.T, o deck.Options) *loadDeck {
	t.Helper()
	d := &loadDeck{controller: "ctl-" + signals.NewID(), viewer: "obs-" + signals.NewID()}
	o.Client, o.ControllerTokens, o.ObserverTokens = sc, []string{d.controller}, []string{d.viewer}
	if o.Gateway == nil {
		o.Gateway = gateway.New(gateway.Options{Client: sc, IgnoreClientCwd: true})
	}
	d.gw = o.Gateway
	var err error
	d.deck, err = deck.New(o)
	require.NoError(t, err)
	d.Server = httptest.NewServer(d.deck)
	tr := &http.Transport{MaxIdleConnsPerHost: 1000, DisableCompression: true}
	d.client = &http.Client{Transport: tr}
	t.Cleanup(func() { d.CloseClientConnections(); d.Close(); tr.CloseIdleConnections() })
	return d
}

// ownQueries is how many events queries the deck's streams have sent of their own, beside
// the shared pollers'.
func (d *loadDeck) ownQueries() int64 { return d.deck.EventsQueries() - d.gw.Polls() }

// streamReader is one SSE stream read to its end in the background.
type streamReader struct {
	last   atomic.Int64 // the seq of the last journal event read
	fault  atomic.Value // string: the first event out of order
	ended  atomic.Bool  // an "end" event came
	done   chan struct{}
	cancel context.CancelFunc
}

// openStream opens session id's stream with token after seq after and returns its status;
// with 200 the stream is read in the background until it ends or the test does.
func (d *loadDeck) openStream(t *testing.T, id, token string, after int64) (*streamReader, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", d.URL+sessPath(id, "/stream")+"?after="+strconv.FormatInt(after, 10), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := d.client.Do(req)
	require.NoError(t, err)
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		cancel()
		return nil, res
	}
	s := &streamReader{done: make(chan struct{}), cancel: cancel}
	s.last.Store(after)
	go func() {
		defer close(s.done)
		defer res.Body.Close()
		rd := bufio.NewReader(res.Body)
		var event, id string
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case line == "" && event == "journal":
				seq, _ := strconv.ParseInt(id, 10, 64)
				if seq != s.last.Load()+1 && s.fault.Load() == nil {
					s.fault.Store(fmt.Sprintf("event %d after %d", seq, s.last.Load()))
				}
				s.last.Store(seq)
				event, id = "", ""
			case line == "" && event == "end":
				s.ended.Store(true)
				event = ""
			case line == "":
				event, id = "", ""
			}
		}
	}()
	return s, res
}

// lastSeq is the journal's last seq.
func lastSeq(t *testing.T, id string) int64 {
	t.Helper()
	res, err := sc.Events(ctxFor(t, 10*time.Second), id, 1<<40, 1)
	require.NoError(t, err)
	return res.LastSeq
}

// The streams of one session share one poller: the cache answers those that open after it,
// a turn costs the deck about one query per history wake-up, not one per stream, and a
// stream that starts before the cache reads that part of the journal itself, then joins.
func TestDeckStreamsOfOneSessionShareOneFeed(t *testing.T) {
	t.Parallel()
	d := newLoadDeck(t, deck.Options{})
	id := session(t)
	prompt(t, signals.SessionConfig{SessionID: id}, "/chunks 3")
	turnEnd(t, id, 1)

	// A turn with one stream open, then the same turn with twenty: the deck's queries for
	// each stay near the events the turn journaled, whatever the streams.
	turnQueries := func(turn int64, streams []*streamReader) (queries int64, events int64) {
		q0, seq0 := d.deck.EventsQueries(), lastSeq(t, id)
		prompt(t, signals.SessionConfig{SessionID: id}, "/chunks 10 every 100ms")
		end := turnEnd(t, id, turn)
		endSeq := end[len(end)-1].Seq
		for _, s := range streams {
			require.Eventually(t, func() bool { return s.last.Load() >= endSeq }, 60*time.Second, 10*time.Millisecond)
			require.Nil(t, s.fault.Load(), "every event once, in order")
		}
		return d.deck.EventsQueries() - q0, endSeq - seq0
	}
	first, _ := d.openStream(t, id, d.viewer, 0)
	require.NotNil(t, first)
	require.Eventually(t, func() bool { return first.last.Load() >= lastSeq(t, id) }, 60*time.Second, 10*time.Millisecond)
	q1, e1 := turnQueries(2, []*streamReader{first})
	t.Logf("one stream: %d queries for %d events", q1, e1)
	require.LessOrEqual(t, q1, e1+5, "about one query per history wake-up (+5: wake-ups that journal nothing)")

	// Nineteen more open from the start, which the feed's cache holds: no query of their own.
	streams := []*streamReader{first}
	own := d.ownQueries()
	for range 19 {
		s, res := d.openStream(t, id, d.viewer, 0)
		require.NotNil(t, s, "status %d", res.StatusCode)
		streams = append(streams, s)
	}
	require.Equal(t, own, d.ownQueries(), "a stream the cache answers sends no query")
	require.Equal(t, 1, d.deck.Feeds(), "one poller for the session")

	q20, e20 := turnQueries(3, streams)
	t.Logf("twenty streams: %d queries for %d events", q20, e20)
	require.LessOrEqual(t, q20, e20+5, "twenty streams cost what one does")

	// With every stream gone the poller stops; one that resumes at the journal's end starts
	// a new poller there, and a page opening from the start then reads what precedes it
	// itself, once, and joins.
	for _, s := range streams {
		s.cancel()
	}
	require.Eventually(t, func() bool { return d.deck.Feeds() == 0 }, 10*time.Second, 10*time.Millisecond, "the last stream to go stops the poller")
	resumed, _ := d.openStream(t, id, d.viewer, lastSeq(t, id))
	require.NotNil(t, resumed)
	own = d.ownQueries()
	late, _ := d.openStream(t, id, d.viewer, 0)
	require.NotNil(t, late)
	require.Eventually(t, func() bool { return late.last.Load() >= lastSeq(t, id) }, 60*time.Second, 10*time.Millisecond)
	require.Nil(t, late.fault.Load(), "every event once, in order")
	require.Equal(t, int64(1), d.ownQueries()-own, "one query of its own")

	// Both carry the next turn, and closing the session ends them with "end".
	turnQueries(4, []*streamReader{resumed, late})
	closeSession(t, id)
	for _, s := range []*streamReader{resumed, late} {
		select {
		case <-s.done:
		case <-time.After(60 * time.Second):
			t.Fatal("a stream outlived its session")
		}
		require.True(t, s.ended.Load(), "the stream ends with an end event")
	}
	require.Eventually(t, func() bool { return d.deck.Feeds() == 0 }, 10*time.Second, 10*time.Millisecond)
}

// Five hundred observer streams on one streaming session beside another person's running
// turn: the turn is neither restarted nor failed, every chunk of it is journaled once, its
// status answers throughout, and the watched session costs the deck one feed's queries.
func TestDeckFiveHundredObserverStreamsBesideAnotherPersonsTurn(t *testing.T) {
	const streams = 500
	d := newLoadDeck(t, deck.Options{MaxStreamsPerToken: streams})
	watched, other := session(t), session(t)
	prompt(t, signals.SessionConfig{SessionID: watched}, "/chunks 3")
	turnEnd(t, watched, 1)

	// The other person's turn streams for about 20 s, the whole time the streams are open.
	const chunks = 100
	prompt(t, signals.SessionConfig{SessionID: other}, fmt.Sprintf("/chunks %d every 200ms", chunks))
	waitRunning(t, other, 1)

	// The status of the other session, through the deck, all along.
	var statusFaults []string
	var statusCalls atomic.Int64
	var worst atomic.Int64 // ms, for the log only
	stopStatus := make(chan struct{})
	var statusDone sync.WaitGroup
	statusDone.Go(func() {
		for {
			select {
			case <-stopStatus:
				return
			case <-time.After(100 * time.Millisecond):
			}
			start := time.Now()
			r, err := http.NewRequestWithContext(ctxFor(t, 30*time.Second), "GET", d.URL+sessPath(other), nil)
			if err != nil {
				statusFaults = append(statusFaults, err.Error())
				return
			}
			r.Header.Set("Authorization", "Bearer "+d.controller)
			res, err := http.DefaultClient.Do(r)
			if err != nil {
				statusFaults = append(statusFaults, err.Error())
				continue
			}
			var st signals.Status
			err = json.NewDecoder(res.Body).Decode(&st)
			_ = res.Body.Close()
			switch {
			case res.StatusCode != http.StatusOK || err != nil:
				statusFaults = append(statusFaults, fmt.Sprintf("status %d: %v", res.StatusCode, err))
			case st.TurnID != 1:
				statusFaults = append(statusFaults, fmt.Sprintf("turn %d", st.TurnID))
			}
			statusCalls.Add(1)
			if ms := time.Since(start).Milliseconds(); ms > worst.Load() {
				worst.Store(ms)
			}
		}
	})

	// Five hundred pages open the watched session from the start, fifty at a time: the
	// first one's poller answers them all.
	opening, own := d.deck.EventsQueries(), d.ownQueries()
	readers := make([]*streamReader, streams)
	var open sync.WaitGroup
	for i := range readers {
		open.Go(func() {
			s, res := d.openStream(t, watched, d.viewer, 0)
			if s == nil {
				t.Errorf("stream %d: status %d", i, res.StatusCode)
				return
			}
			readers[i] = s
		})
		if i%50 == 49 {
			open.Wait()
		}
	}
	open.Wait()
	require.False(t, t.Failed())
	require.Equal(t, 1, d.deck.Feeds(), "one poller for the watched session")
	opening = d.deck.EventsQueries() - opening
	t.Logf("%d streams opened with %d events queries", streams, opening)
	require.Equal(t, own, d.ownQueries(), "the poller's cache answers every stream that opens")
	require.LessOrEqual(t, opening, int64(5), "opening streams costs one poller's queries")

	// The watched session streams a turn to all five hundred.
	q0, seq0 := d.deck.EventsQueries(), lastSeq(t, watched)
	prompt(t, signals.SessionConfig{SessionID: watched}, "/chunks 40 every 100ms")
	end := turnEnd(t, watched, 2)
	endSeq := end[len(end)-1].Seq
	for i, s := range readers {
		require.Eventually(t, func() bool { return s.last.Load() >= endSeq }, 120*time.Second, 10*time.Millisecond, "stream %d", i)
		require.Nil(t, s.fault.Load(), "stream %d: every event once, in order", i)
	}
	queries, events := d.deck.EventsQueries()-q0, endSeq-seq0
	t.Logf("%d streams: %d events queries for a turn of %d events", streams, queries, events)
	require.LessOrEqual(t, queries, events+5, "the watched session costs one feed's queries, not one per stream")

	// The other turn is still the first, still running: the load is over before it is.
	st, err := sc.Status(ctxFor(t, 10*time.Second), other)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.TurnID)
	require.Equal(t, signals.StateRunning, st.State, "the other turn ended before the load did: lengthen it")
	close(stopStatus)
	statusDone.Wait()
	t.Logf("the other session's status: %d calls, the slowest %d ms", statusCalls.Load(), worst.Load())
	require.Empty(t, statusFaults, "the other session's status answers throughout")
	require.Positive(t, statusCalls.Load())

	// It ends once, with every chunk once: no restart, no failure.
	evs := turnEnd(t, other, 1)
	checkInvariants(t, evs)
	for _, ev := range evs {
		require.NotContains(t, []string{signals.EventTurnRestarted, signals.EventTurnFailed}, ev.Kind, "seq %d", ev.Seq)
	}
	require.Equal(t, signals.EventTurnEnded, evs[len(evs)-1].Kind)
	texts := agentTexts(t, evs, 1)
	require.Len(t, texts, chunks)
	for i, text := range texts {
		require.Equal(t, fmt.Sprintf("chunk %d\n", i+1), text)
	}
}

// One token holds at most MaxStreamsPerToken streams and MaxACPPerToken /acp sockets; one
// more is refused 429 with a Retry-After, and a connection that ends frees its slot.
func TestDeckCapsStreamsAndSocketsPerToken(t *testing.T) {
	t.Parallel()
	gw := gateway.New(gateway.Options{Client: sc, IgnoreClientCwd: true, FirstMessageTimeout: 10 * time.Minute})
	d := newLoadDeck(t, deck.Options{Gateway: gw})
	id := session(t)
	prompt(t, signals.SessionConfig{SessionID: id}, "/chunks 1")
	turnEnd(t, id, 1)

	var open []*streamReader
	for i := range deck.DefaultMaxStreamsPerToken {
		s, res := d.openStream(t, id, d.viewer, 0)
		require.NotNil(t, s, "stream %d: status %d", i+1, res.StatusCode)
		open = append(open, s)
	}
	refused := func(res *http.Response) {
		t.Helper()
		require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
		require.NotEmpty(t, res.Header.Get("Retry-After"))
	}
	_, res := d.openStream(t, id, d.viewer, 0)
	refused(res)
	r := call429(t, d, sessPath(id, "/stream"), d.viewer)
	require.Equal(t, "too_many_requests", r)
	other, res := d.openStream(t, id, d.controller, 0)
	require.NotNil(t, other, "another token has its own cap: status %d", res.StatusCode)
	open[0].cancel()
	require.Eventually(t, func() bool {
		s, _ := d.openStream(t, id, d.viewer, 0)
		return s != nil
	}, 30*time.Second, 20*time.Millisecond, "a stream that ends frees its slot")

	// /acp sockets, counted apart from streams.
	url := "ws" + strings.TrimPrefix(d.URL, "http") + "/acp"
	dial := func() (*websocket.Conn, *http.Response, error) {
		hdr := http.Header{}
		hdr.Set("Authorization", "Bearer "+d.viewer)
		return websocket.Dial(ctxFor(t, 30*time.Second), url, &websocket.DialOptions{HTTPHeader: hdr})
	}
	var sockets []*websocket.Conn
	for i := range deck.DefaultMaxACPPerToken {
		ws, _, err := dial()
		require.NoError(t, err, "socket %d", i+1)
		sockets = append(sockets, ws)
	}
	t.Cleanup(func() {
		for _, ws := range sockets {
			_ = ws.CloseNow()
		}
	})
	_, res, err := dial()
	require.Error(t, err)
	refused(res)
	body, _ := io.ReadAll(res.Body)
	require.Contains(t, string(body), `"too_many_requests"`)
	require.NoError(t, sockets[0].Close(websocket.StatusNormalClosure, ""))
	require.Eventually(t, func() bool {
		ws, _, err := dial()
		if err != nil {
			return false
		}
		sockets = append(sockets, ws)
		return true
	}, 30*time.Second, 20*time.Millisecond, "a socket that ends frees its slot")
}

// call429 opens a stream that the cap refuses and returns its body's type.
func call429(t *testing.T, d *loadDeck, path, token string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxFor(t, 30*time.Second), "GET", d.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := d.client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	var e struct{ Type, Message string }
	require.NoError(t, json.NewDecoder(res.Body).Decode(&e))
	require.NotEmpty(t, e.Message)
	return e.Type
}

// A socket whose client never sends an ACP message is closed by the deck (policy
// violation); one that speaks ACP is served past that bound.
func TestDeckClosesAnACPSocketThatNeverSpeaks(t *testing.T) {
	t.Parallel()
	gw := gateway.New(gateway.Options{Client: sc, IgnoreClientCwd: true, FirstMessageTimeout: 300 * time.Millisecond})
	d := newLoadDeck(t, deck.Options{Gateway: gw})
	url := "ws" + strings.TrimPrefix(d.URL, "http") + "/acp"

	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+d.viewer)
	silent, _, err := websocket.Dial(ctxFor(t, 30*time.Second), url, &websocket.DialOptions{HTTPHeader: hdr})
	require.NoError(t, err)
	defer silent.CloseNow()
	_, _, err = silent.Read(ctxFor(t, 60*time.Second))
	var ce websocket.CloseError
	require.True(t, errors.As(err, &ce), "err = %v", err)
	require.Equal(t, websocket.StatusPolicyViolation, ce.Code)

	speaking := dialACP(t, url, d.viewer)
	require.Never(t, func() bool {
		_, err := speaking.conn.ListSessions(ctxFor(t, 10*time.Second), acp.ListSessionsRequest{})
		return err != nil
	}, time.Second, 100*time.Millisecond, "a socket that spoke ACP is served past the bound")
}

package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

func TestPromptTextMapsContentBlocks(t *testing.T) {
	none := acp.PromptCapabilities{}
	all := acp.PromptCapabilities{Image: true, Audio: true, EmbeddedContext: true}
	link := acp.ResourceLinkBlock("spec", "file:///w/spec.md")
	for _, tc := range []struct {
		name        string
		blocks      []acp.ContentBlock
		caps        acp.PromptCapabilities
		text        string
		content     bool
		errContains string
	}{
		{"text blocks join into text", []acp.ContentBlock{acp.TextBlock("a"), acp.TextBlock("b")}, none, "a\nb", false, ""},
		{"a resource link goes as content", []acp.ContentBlock{acp.TextBlock("see"), link}, none, "see\nfile:///w/spec.md", true, ""},
		{"an image without the capability is refused", []acp.ContentBlock{acp.ImageBlock("aGk=", "image/png")}, none, "", false, "image content is not supported"},
		{"an image with the capability goes as content", []acp.ContentBlock{acp.TextBlock("look"), acp.ImageBlock("aGk=", "image/png")}, all, "look", true, ""},
		{"audio without the capability is refused", []acp.ContentBlock{acp.AudioBlock("aGk=", "audio/wav")}, none, "", false, "audio content"},
		{"no blocks is refused", nil, all, "", false, "no content blocks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, content, err := promptText(tc.blocks, tc.caps)
			if tc.errContains != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errContains) {
					t.Fatalf("err = %v, want one containing %q", err, tc.errContains)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if text != tc.text || (content != nil) != tc.content {
				t.Fatalf("got (%q, content %v), want (%q, content %v)", text, content != nil, tc.text, tc.content)
			}
		})
	}
}

func TestAgentUpdateIsReaddressedKeptRawAndCarriesItsSeq(t *testing.T) {
	data := json.RawMessage(`{"sessionId":"agent-own-id","update":{"sessionUpdate":"tacp_custom_kind","x":[1,2]}}`)
	u, err := agentUpdate("s1", 7, data)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(u)
	if want := `{"sessionId":"s1","update":{"sessionUpdate":"tacp_custom_kind","x":[1,2]},"_meta":{"tacp":{"seq":7}}}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
	if _, err := agentUpdate("s1", 1, json.RawMessage(`{"nope":1}`)); err == nil {
		t.Fatal("an event without an update is an error")
	}
}

func TestOutcomeOfTerminalEvents(t *testing.T) {
	ended := outcomeOf(signals.Event{Kind: signals.EventTurnEnded, TurnID: 3, Data: json.RawMessage(`{"stop_reason":"cancelled"}`)})
	if ended.stop != acp.StopReasonCancelled || ended.err != nil {
		t.Fatalf("turn.ended: %+v", ended)
	}
	failed := outcomeOf(signals.Event{Kind: signals.EventTurnFailed, TurnID: 3, Data: json.RawMessage(`{"error":"boom"}`)})
	var re *acp.RequestError
	if !errors.As(failed.err, &re) || re.Code != codeTurnFailed || !strings.Contains(string(mustJSON(re.Data)), "boom") {
		t.Fatalf("turn.failed: %+v", failed)
	}
}

func TestRPCErrKeepsTheRejectionType(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{signals.Reject(signals.RejectUnknownSession, "no session x"), codeNotFound},
		{signals.Reject(signals.RejectInvalidRequest, "bad"), codeInvalidParams},
		{signals.Reject(signals.RejectForbidden, "observer"), codeForbidden},
		{signals.Reject(signals.RejectQueueFull, "full"), codeRejected},
		{errors.New("network"), codeInternalError},
	} {
		var re *acp.RequestError
		if !errors.As(rpcErr(tc.err), &re) || re.Code != tc.code {
			t.Errorf("%v: got %v, want code %d", tc.err, rpcErr(tc.err), tc.code)
		}
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestFilterInputAnswersWhatIsNotJSONRPC(t *testing.T) {
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize"}`,
		`not json`,
		``,
		`{"jsonrpc":"2.0"}`,
		`{"jsonrpc":"2.0","id":2,"method":""}`,
		`{"jsonrpc":"2.0","id":3}`,
		`{"jsonrpc":"2.0","id":4,"result":{}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{}}`,
		`{"x":"` + strings.Repeat("a", maxLine) + `"}`,
		`{"jsonrpc":"2.0","id":5,"method":"session/list"}`,
	}, "\n")
	var out strings.Builder
	w := &lineWriter{w: &out}
	pr, pw := io.Pipe()
	go filterInput(strings.NewReader(in), pw, w)
	passed, err := io.ReadAll(pr)
	if err != nil {
		t.Fatal(err)
	}
	wantPassed := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize"}`,
		`{"jsonrpc":"2.0","id":4,"result":{}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{}}`,
		`{"jsonrpc":"2.0","id":5,"method":"session/list"}`,
	}
	if got := strings.Split(strings.TrimSpace(string(passed)), "\n"); strings.Join(got, "|") != strings.Join(wantPassed, "|") {
		t.Fatalf("passed to the SDK:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantPassed, "\n"))
	}
	var codes []int
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var m struct {
			Error struct{ Code int } `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		codes = append(codes, m.Error.Code)
	}
	want := []int{codeParseError, codeInvalidRequest, codeInvalidRequest, codeInvalidRequest, codeInvalidRequest}
	if mustString(codes) != mustString(want) {
		t.Fatalf("error codes %v, want %v", codes, want)
	}
}

func mustString(v any) string { return string(mustJSON(v)) }

// fakeJournal is an events query over a growing slice, counting the queries, with
// followers that are woken by each event added (as a history long poll is).
type fakeJournal struct {
	mu        sync.Mutex
	events    []signals.Event
	queries   int
	followers []*fakeFollower
	ended     bool
}

func (j *fakeJournal) add(kind string, turn int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, signals.Event{Seq: int64(len(j.events) + 1), Kind: kind, TurnID: turn})
	for _, f := range j.followers {
		f.wake()
	}
}

// end closes the session's workflow: the followers end after their next query.
func (j *fakeJournal) end() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.ended = true
	for _, f := range j.followers {
		f.wake()
	}
}

func (j *fakeJournal) queryCount() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.queries
}

func (j *fakeJournal) Follow(context.Context, string) follower {
	j.mu.Lock()
	defer j.mu.Unlock()
	f := &fakeFollower{j: j, ready: make(chan struct{}, 1)}
	j.followers = append(j.followers, f)
	return f
}

type fakeFollower struct {
	j       *fakeJournal
	ready   chan struct{}
	queried bool // queried since the journal ended
}

func (f *fakeFollower) wake() {
	select {
	case f.ready <- struct{}{}:
	default:
	}
}

func (f *fakeFollower) Ready() <-chan struct{} { return f.ready }

func (f *fakeFollower) Querying() func() {
	f.j.mu.Lock()
	defer f.j.mu.Unlock()
	f.queried = f.j.ended
	return func() {}
}

func (f *fakeFollower) Ended() bool {
	f.j.mu.Lock()
	defer f.j.mu.Unlock()
	return f.queried
}

func (j *fakeJournal) Events(_ context.Context, _ string, after int64, limit int) (signals.EventsResult, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.queries++
	var out []signals.Event
	for _, ev := range j.events {
		if ev.Seq > after && (limit == 0 || len(out) < limit) {
			out = append(out, ev)
		}
	}
	return signals.EventsResult{Events: out, LastSeq: int64(len(j.events))}, nil
}

// drain reads s until it has seen seq, returning every seq it got.
func drain(t *testing.T, s *subscription, from, seq int64) []int64 {
	t.Helper()
	var got []int64
	deadline := time.After(10 * time.Second)
	for from < seq {
		select {
		case <-s.notify:
		case <-deadline:
			t.Fatalf("saw up to %d, want %d", from, seq)
		}
		evs, ok := s.after(from)
		if !ok {
			t.Fatalf("cache does not cover %d", from)
		}
		for _, ev := range evs {
			got = append(got, ev.Seq)
			from = ev.Seq
		}
	}
	return got
}

func TestHubPollsEachSessionOnceForAnyNumberOfSubscribers(t *testing.T) {
	j := &fakeJournal{}
	h := newHub(j, time.Millisecond, discard())
	a, b := h.subscribe("s", 0), h.subscribe("s", 0)
	other := h.subscribe("t", 0)
	if h.feedCount() != 2 {
		t.Fatalf("%d feeds, want one per session", h.feedCount())
	}
	j.add(signals.EventSessionStarted, 0)
	j.add(signals.EventTurnStarted, 1)
	j.add(signals.EventTurnEnded, 1)
	for _, s := range []*subscription{a, b} {
		if got := drain(t, s, 0, 3); mustString(got) != "[1,2,3]" {
			t.Fatalf("got %v", got)
		}
	}
	a.unsubscribe()
	b.unsubscribe()
	other.unsubscribe()
	if h.feedCount() != 0 {
		t.Fatal("the last unsubscribe stops the poller")
	}
}

func TestHubCacheIsBoundedAndSaysWhenASlowReaderMustReadTheJournal(t *testing.T) {
	j := &fakeJournal{}
	for range cacheSize + 10 {
		j.add(signals.EventAgentUpdate, 1)
	}
	h := newHub(j, time.Millisecond, discard())
	s := h.subscribe("s", 0)
	defer s.unsubscribe()
	require.Eventually(t, func() bool {
		evs, ok := s.after(int64(cacheSize + 9))
		return ok && len(evs) == 1
	}, 10*time.Second, time.Millisecond, "the poller never caught up")
	if _, ok := s.after(0); ok {
		t.Fatal("seq 1 fell out of the cache: the reader must be told to read the journal")
	}
	evs, ok := s.after(int64(cacheSize))
	if !ok || len(evs) != 10 {
		t.Fatalf("after %d: %d events, covered %v", cacheSize, len(evs), ok)
	}
}

func TestHubQueriesOnlyWhenTheSessionsHistoryGrows(t *testing.T) {
	j := &fakeJournal{}
	j.add(signals.EventSessionStarted, 0)
	h := newHub(j, time.Millisecond, discard())
	s := h.subscribe("s", 0)
	defer s.unsubscribe()
	drain(t, s, 0, 1)
	queries := j.queryCount()
	require.Never(t, func() bool { return j.queryCount() > queries }, 100*time.Millisecond, 5*time.Millisecond,
		"a quiet session is not queried")
	j.add(signals.EventTurnStarted, 1)
	require.Equal(t, []int64{2}, drain(t, s, 1, 2), "its history growing wakes the poller")
	require.Equal(t, queries+1, j.queryCount(), "one query for one wake-up")
}

func TestHubStopsQueryingASessionWhoseWorkflowClosed(t *testing.T) {
	j := &fakeJournal{}
	h := newHub(j, time.Millisecond, discard())
	s := h.subscribe("s", 0)
	defer s.unsubscribe()
	j.add(signals.EventSessionClosed, 0)
	j.end()
	drain(t, s, 0, 1)
	require.Eventually(t, func() bool {
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.followers[0].queried
	}, 5*time.Second, time.Millisecond)
	queries := j.queryCount()
	s.hurry()() // a prompt about to be sent asks for nothing either
	for range 3 {
		j.followers[0].wake()
	}
	require.Never(t, func() bool { return j.queryCount() > queries }, 100*time.Millisecond, 5*time.Millisecond)
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestEveryUpdateTheGatewayWritesCarriesTheSeqOfItsEvent(t *testing.T) {
	user, _ := json.Marshal(userMessage("s1", 4, "m-1", "hello"))
	if want := `{"sessionId":"s1","update":{"content":{"text":"hello","type":"text"},"sessionUpdate":"user_message_chunk"},"_meta":{"tacp":{"seq":4,"client_message_id":"m-1"}}}`; string(user) != want {
		t.Fatalf("user message: got %s, want %s", user, want)
	}
	r := signals.PermissionResolution{RequestID: "r1", Outcome: "selected", OptionID: "allow", DecidedBy: "user"}
	res, _ := json.Marshal(permissionResolved("s1", 9, "tc1", r))
	if want := `{"sessionId":"s1","update":{"_meta":{"tacp":{"permission_resolved":{"request_id":"r1","outcome":"selected","option_id":"allow","decided_by":"user"}}},"sessionUpdate":"tool_call_update","toolCallId":"tc1"},"_meta":{"tacp":{"seq":9}}}`; string(res) != want {
		t.Fatalf("resolution: got %s, want %s", res, want)
	}
}

func TestWriteAfterReadsTheResumptionPoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta map[string]any
		def  int64
		want int64
		err  bool
	}{
		{"no _meta: the default", nil, noReplay, noReplay, false},
		{"another key: the default", map[string]any{"other": 1}, 0, 0, false},
		{"after_seq", map[string]any{"tacp": map[string]any{"after_seq": float64(42)}}, 0, 42, false},
		{"after_seq 0 replays everything", map[string]any{"tacp": map[string]any{"after_seq": float64(0)}}, noReplay, 0, false},
		{"a negative seq is refused", map[string]any{"tacp": map[string]any{"after_seq": float64(-1)}}, 0, 0, true},
		{"not a number is refused", map[string]any{"tacp": map[string]any{"after_seq": "7"}}, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := writeAfter(tc.meta, tc.def)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if err == nil && got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
}

// What a client calls itself reaches the journal one line long and bounded, whole
// characters only, so that the person, the client and the viewer fit in a by.
func TestClientNameIsOneBoundedLine(t *testing.T) {
	require.Equal(t, "Zed 0.200", clientName("Zed\n 0.200\x00"))
	long := clientName(strings.Repeat("é", 100))
	require.True(t, utf8.ValidString(long))
	require.LessOrEqual(t, len(long), maxClientName+len("…"))
	c := &conn{viewer: "acp-0123456789ab-controller", person: "deck:" + strings.Repeat("n", 64)}
	c.peer = peerOf(acp.InitializeRequest{ClientInfo: &acp.Implementation{Name: strings.Repeat("界", 100) + "\n", Version: "1.0"}})
	require.NotContains(t, c.peer.name, "\n")
	require.LessOrEqual(t, len(c.peer.name), maxClientName+len("…"))
	require.NoError(t, signals.ValidateBy(c.answeredBy()))
	require.True(t, strings.HasPrefix(c.answeredBy(), "deck:nnnn"), c.answeredBy())
}

package session

// Tests of the prompt queue (contract §6 "Turns"): idempotent on client_message_id, bounded by
// queue_limit and a byte budget, turn ids one apart, FIFO, and plain data across
// continue-as-new.

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

func promptReq(text, id string) signals.PromptRequest {
	return signals.PromptRequest{Text: text, ClientMessageID: id}
}

func mustOffer(t *testing.T, q *Queue, req signals.PromptRequest, busy bool) signals.PromptResult {
	t.Helper()
	res, rej := q.Offer(req, busy)
	require.Nil(t, rej, "prompt %q rejected", req.ClientMessageID)
	require.False(t, res.Duplicate)
	return res
}

// cloneQueue deep-copies q for before/after comparisons.
func cloneQueue(q *Queue) Queue {
	c := *q
	c.Items = slices.Clone(q.Items)
	if q.Seen.Entries != nil {
		c.Seen.Entries = make(map[string]signals.PromptResult, len(q.Seen.Entries))
		for k, v := range q.Seen.Entries {
			c.Seen.Entries[k] = v
		}
	}
	c.Seen.Order = slices.Clone(q.Seen.Order)
	return c
}

func TestQueue_NewQueueDefaults(t *testing.T) {
	tests := []struct {
		limit, want int
	}{
		{0, DefaultQueueLimit},
		{-1, DefaultQueueLimit},
		{1, 1},
		{32, 32},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.limit), func(t *testing.T) {
			q := NewQueue(tt.limit)
			require.Equal(t, tt.want, q.Limit)
			require.Equal(t, DefaultQueueBytes, q.MaxBytes)
			require.Empty(t, q.Items)
			require.Zero(t, q.Bytes())
			require.Zero(t, q.LastTurnID)
		})
	}
	require.Equal(t, 16, DefaultQueueLimit, "contract §6: queue_limit default 16")
}

func TestQueue_DuplicateClientMessageIDReturnsOriginalResult(t *testing.T) {
	tests := []struct {
		name  string
		retry signals.PromptRequest
		busy  bool
	}{
		{"same request", promptReq("hello", "c1"), true},
		{"different text", promptReq("something else", "c1"), false},
		{"while idle", promptReq("hello", "c1"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := NewQueue(4)
			orig := mustOffer(t, q, promptReq("hello", "c1"), true)
			mustOffer(t, q, promptReq("later", "c2"), true)
			before := cloneQueue(q)

			res, rej := q.Offer(tt.retry, tt.busy)
			require.Nil(t, rej)
			require.Equal(t, signals.PromptResult{TurnID: orig.TurnID, Position: orig.Position, Duplicate: true}, res)
			require.True(t, reflect.DeepEqual(before, *q), "a duplicate queued something")
		})
	}
}

func TestQueue_DuplicateWinsOverQueueFull(t *testing.T) {
	q := NewQueue(2)
	orig := mustOffer(t, q, promptReq("a", "c1"), true)
	mustOffer(t, q, promptReq("b", "c2"), true)

	_, rej := q.Check(promptReq("c", "c3"), true)
	require.NotNil(t, rej)
	require.Equal(t, signals.RejectQueueFull, rej.Type)

	before := cloneQueue(q)
	res, rej := q.Offer(promptReq("a", "c1"), true)
	require.Nil(t, rej)
	require.Equal(t, signals.PromptResult{TurnID: orig.TurnID, Position: orig.Position, Duplicate: true}, res)
	require.True(t, reflect.DeepEqual(before, *q))
}

func TestQueue_DuplicateAfterThePromptRan(t *testing.T) {
	q := NewQueue(4)
	orig := mustOffer(t, q, promptReq("a", "c1"), false)
	_, ok := q.Pop()
	require.True(t, ok)
	res, rej := q.Offer(promptReq("a", "c1"), true)
	require.Nil(t, rej)
	require.True(t, res.Duplicate)
	require.Equal(t, orig.TurnID, res.TurnID)
	require.Empty(t, q.Items, "a repeated client_message_id starts nothing")
}

func TestQueue_QueueFullAtLimit(t *testing.T) {
	q := NewQueue(3)
	for i := range 3 {
		mustOffer(t, q, promptReq("p", "c"+strconv.Itoa(i)), true)
	}
	before := cloneQueue(q)
	res, rej := q.Offer(promptReq("p", "c3"), true)
	require.NotNil(t, rej)
	require.Equal(t, signals.RejectQueueFull, rej.Type)
	require.Contains(t, rej.Message, "3")
	require.Equal(t, signals.PromptResult{}, res)
	require.True(t, reflect.DeepEqual(before, *q), "a rejection changed the queue")

	// Room again after a pop; the turn id continues past the rejected prompt.
	q.Pop()
	res = mustOffer(t, q, promptReq("p", "c3"), true)
	require.Equal(t, int64(4), res.TurnID)
}

func TestQueue_ByteBudget(t *testing.T) {
	tests := []struct {
		name     string
		maxBytes int
		queued   []string // texts already queued
		text     string
		wantFull bool
	}{
		{"fits", 10, []string{"12345678"}, "12", false},
		{"exactly at the budget", 10, []string{"12345"}, "12345", false},
		{"one byte over", 10, []string{"12345"}, "123456", true},
		{"empty queue takes a prompt over the budget", 10, nil, strings.Repeat("x", 50), false},
		{"no budget", 0, []string{strings.Repeat("x", 50)}, strings.Repeat("y", 50), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := NewQueue(8)
			q.MaxBytes = tt.maxBytes
			for i, text := range tt.queued {
				mustOffer(t, q, promptReq(text, "q"+strconv.Itoa(i)), true)
			}
			res, rej := q.Offer(promptReq(tt.text, "new"), true)
			if tt.wantFull {
				require.NotNil(t, rej)
				require.Equal(t, signals.RejectQueueFull, rej.Type)
				require.Contains(t, rej.Message, "bytes")
				return
			}
			require.Nil(t, rej)
			require.Equal(t, len(tt.queued)+1, res.Position)
		})
	}
}

func TestQueue_ByteBudgetCountsContent(t *testing.T) {
	q := NewQueue(8)
	q.MaxBytes = 20
	content := json.RawMessage(`[{"type":"text","text":"hi"}]`) // 29 bytes
	res, rej := q.Offer(signals.PromptRequest{Content: content, ClientMessageID: "c1"}, true)
	require.Nil(t, rej)
	require.Equal(t, 1, res.Position)
	require.Equal(t, len(content), q.Bytes())

	_, rej = q.Offer(promptReq("x", "c2"), true)
	require.NotNil(t, rej)
	require.Equal(t, signals.RejectQueueFull, rej.Type)
}

func TestQueue_BytesTrackQueuedText(t *testing.T) {
	q := NewQueue(8)
	mustOffer(t, q, promptReq("abc", "c1"), true)
	mustOffer(t, q, signals.PromptRequest{Text: "de", Content: json.RawMessage(`[1]`), ClientMessageID: "c2"}, true)
	require.Equal(t, 3+2+3, q.Bytes())
	q.Pop()
	require.Equal(t, 5, q.Bytes())
	q.Pop()
	require.Zero(t, q.Bytes())
	mustOffer(t, q, promptReq("xyz", "c3"), true)
	q.Drain()
	require.Zero(t, q.Bytes())
}

func TestQueue_Positions(t *testing.T) {
	tests := []struct {
		name   string
		queued int
		busy   bool
		want   int
	}{
		{"idle and empty runs now", 0, false, 0},
		{"busy and empty waits for the running turn", 0, true, 1},
		{"idle with one queued", 1, false, 1},
		{"busy with two queued", 2, true, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := NewQueue(8)
			for i := range tt.queued {
				mustOffer(t, q, promptReq("p", "q"+strconv.Itoa(i)), true)
			}
			res := mustOffer(t, q, promptReq("p", "new"), tt.busy)
			require.Equal(t, tt.want, res.Position)
		})
	}
}

func TestQueue_TurnIDsIncreaseByOne(t *testing.T) {
	q := NewQueue(8)
	for want := int64(1); want <= 5; want++ {
		res := mustOffer(t, q, promptReq("p", "c"+strconv.FormatInt(want, 10)), want%2 == 0)
		require.Equal(t, want, res.TurnID)
		require.Equal(t, want, q.LastTurnID)
		if want%2 == 1 {
			q.Pop() // a turn started from the queue
		}
	}
	// Draining (close) never lets an id be handed out again.
	q.Drain()
	res := mustOffer(t, q, promptReq("p", "c6"), false)
	require.Equal(t, int64(6), res.TurnID)
}

func TestQueue_CheckChangesNothing(t *testing.T) {
	tests := []struct {
		name string
		req  signals.PromptRequest
	}{
		{"would queue", promptReq("new", "c9")},
		{"duplicate", promptReq("a", "c1")},
		{"full", promptReq("x", "c10")},
		{"invalid", promptReq("", "c11")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := NewQueue(3)
			mustOffer(t, q, promptReq("a", "c1"), true)
			mustOffer(t, q, promptReq("b", "c2"), true)
			if tt.name == "full" {
				mustOffer(t, q, promptReq("c", "c3"), true)
			}
			before := cloneQueue(q)
			res1, rej1 := q.Check(tt.req, true)
			res2, rej2 := q.Check(tt.req, true)
			require.Equal(t, res1, res2)
			require.Equal(t, rej1, rej2)
			require.True(t, reflect.DeepEqual(before, *q), "Check changed the queue")

			// Offer decides the same way.
			res3, rej3 := q.Offer(tt.req, true)
			require.Equal(t, res1, res3)
			require.Equal(t, rej1, rej3)
		})
	}
}

func TestQueue_PopIsFIFO(t *testing.T) {
	q := NewQueue(8)
	for i := range 4 {
		mustOffer(t, q, promptReq("text"+strconv.Itoa(i), "c"+strconv.Itoa(i)), true)
	}
	for i := range 4 {
		p, ok := q.Pop()
		require.True(t, ok)
		require.Equal(t, signals.QueuedPrompt{TurnID: int64(i + 1), ClientMessageID: "c" + strconv.Itoa(i), Text: "text" + strconv.Itoa(i)}, p)
	}
	p, ok := q.Pop()
	require.False(t, ok)
	require.Equal(t, signals.QueuedPrompt{}, p)
}

func TestQueue_DrainReturnsIDsInOrder(t *testing.T) {
	q := NewQueue(8)
	require.Empty(t, q.Drain())
	for i := range 3 {
		mustOffer(t, q, promptReq("p", "c"+strconv.Itoa(i)), true)
	}
	require.Equal(t, []string{"c0", "c1", "c2"}, q.Drain())
	require.Empty(t, q.Items)
	require.Zero(t, q.Bytes())
	_, ok := q.Pop()
	require.False(t, ok)
	// Drained ids are still remembered: a retry does not queue the prompt again.
	res, rej := q.Offer(promptReq("p", "c1"), false)
	require.Nil(t, rej)
	require.True(t, res.Duplicate)
	require.Empty(t, q.Items)
}

func TestQueue_EntriesOmitText(t *testing.T) {
	q := NewQueue(8)
	require.NotNil(t, q.Entries(), "status shows [] rather than null")
	require.Empty(t, q.Entries())
	mustOffer(t, q, promptReq("secret prompt", "c1"), true)
	mustOffer(t, q, signals.PromptRequest{Text: "ab", Content: json.RawMessage(`[]`), ClientMessageID: "c2"}, true)
	require.Equal(t, []signals.QueueEntry{
		{TurnID: 1, ClientMessageID: "c1", Bytes: len("secret prompt")},
		{TurnID: 2, ClientMessageID: "c2", Bytes: 4},
	}, q.Entries())
	b, err := json.Marshal(q.Entries())
	require.NoError(t, err)
	require.NotContains(t, string(b), "secret")
}

func TestQueue_JSONRoundTrip(t *testing.T) {
	q := NewQueue(3)
	q.MaxBytes = 1000
	mustOffer(t, q, promptReq("a", "c1"), true)
	mustOffer(t, q, signals.PromptRequest{Text: "b", Content: json.RawMessage(`[{"type":"text","text":"b"}]`), ClientMessageID: "c2"}, true)
	q.Pop()

	b, err := json.Marshal(q)
	require.NoError(t, err)
	var next Queue
	require.NoError(t, json.Unmarshal(b, &next))
	require.True(t, reflect.DeepEqual(*q, next), "round trip changed the queue:\nbefore %+v\nafter  %+v", *q, next)

	// The carried queue keeps deduplicating, limiting and numbering.
	res, rej := next.Offer(promptReq("a", "c1"), true)
	require.Nil(t, rej)
	require.Equal(t, signals.PromptResult{TurnID: 1, Position: 1, Duplicate: true}, res)
	res = mustOffer(t, &next, promptReq("c", "c3"), true)
	require.Equal(t, int64(3), res.TurnID)
	mustOffer(t, &next, promptReq("d", "c4"), true)
	_, rej = next.Offer(promptReq("e", "c5"), true)
	require.NotNil(t, rej)
	require.Equal(t, signals.RejectQueueFull, rej.Type)
}

func TestQueue_InvalidRequests(t *testing.T) {
	tests := []struct {
		name    string
		req     signals.PromptRequest
		wantMsg string
	}{
		{"empty text and no content", promptReq("", "c1"), "empty"},
		{"whitespace text", promptReq(" \n\t", "c1"), "empty"},
		{"text over MaxTextBytes", promptReq(strings.Repeat("a", signals.MaxTextBytes+1), "c1"), "limit"},
		{"text and content over MaxTextBytes", signals.PromptRequest{Text: strings.Repeat("a", signals.MaxTextBytes), Content: json.RawMessage(`[]`), ClientMessageID: "c1"}, "limit"},
		{"missing client_message_id", promptReq("hello", ""), "client_message_id"},
		{"client_message_id too long", promptReq("hello", strings.Repeat("c", signals.MaxClientIDBytes+1)), "client_message_id"},
		// Content the turn runner could only fail later is refused now.
		{"content an object, not blocks", signals.PromptRequest{Text: "x", Content: json.RawMessage(`{"type":"text"}`), ClientMessageID: "c1"}, "JSON array"},
		{"content a string", signals.PromptRequest{Text: "x", Content: json.RawMessage(`"hi"`), ClientMessageID: "c1"}, "JSON array"},
		{"content not JSON", signals.PromptRequest{Text: "x", Content: json.RawMessage(`[{`), ClientMessageID: "c1"}, "JSON array"},
		{"null content and no text", signals.PromptRequest{Content: json.RawMessage(`null`), ClientMessageID: "c1"}, "empty"},
		{"no blocks and blank text", signals.PromptRequest{Text: " ", Content: json.RawMessage(` [ ] `), ClientMessageID: "c1"}, "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, signals.RejectInvalidRequest, ValidatePrompt(tt.req).Type)
			q := NewQueue(4)
			before := cloneQueue(q)
			res, rej := q.Offer(tt.req, false)
			require.NotNil(t, rej)
			require.Equal(t, signals.RejectInvalidRequest, rej.Type)
			require.Contains(t, rej.Message, tt.wantMsg)
			require.Equal(t, signals.PromptResult{}, res)
			require.True(t, reflect.DeepEqual(before, *q))
		})
	}
}

func TestQueue_ValidRequestsAtTheLimits(t *testing.T) {
	tests := []struct {
		name string
		req  signals.PromptRequest
	}{
		{"content without text", signals.PromptRequest{Content: json.RawMessage(`[{"type":"text","text":"hi"}]`), ClientMessageID: "c1"}},
		{"text of exactly MaxTextBytes", promptReq(strings.Repeat("a", signals.MaxTextBytes), "c1")},
		{"client_message_id of exactly MaxClientIDBytes", promptReq("hi", strings.Repeat("c", signals.MaxClientIDBytes))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Nil(t, ValidatePrompt(tt.req))
			mustOffer(t, NewQueue(4), tt.req, false)
		})
	}
}

func TestQueue_BytesStayExactAcrossJSONRoundTrip(t *testing.T) {
	// A prompt's content may change its byte length when it crosses continue-as-new as JSON
	// (compacted, HTML-escaped): the queue's size is derived from its items and never drifts.
	tests := []struct {
		name    string
		content json.RawMessage
	}{
		{"spaces after separators (Python json.dumps)", json.RawMessage(`[{"type": "text", "text": "hi"}]`)},
		{"unescaped HTML characters (JavaScript JSON.stringify)", json.RawMessage(`[{"type":"text","text":"<b>&</b>"}]`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := NewQueue(4)
			mustOffer(t, q, signals.PromptRequest{Text: "t", Content: tt.content, ClientMessageID: "c1"}, true)
			b, err := json.Marshal(q)
			require.NoError(t, err)
			var next Queue
			require.NoError(t, json.Unmarshal(b, &next))
			_, ok := next.Pop()
			require.True(t, ok)
			require.Zero(t, next.Bytes(), "an empty queue holds 0 bytes")
		})
	}
}

// --- Fuzz ---

// FuzzQueueOffer drives a queue of arbitrary limit and byte budget with an arbitrary
// sequence of offers (ids from a small set, so duplicates happen; text and content of any
// size, garbage included), pops and drains. At every step Check changes nothing and Offer
// answers as Check did; a rejection changes nothing; a duplicate returns the original result;
// turn ids are handed out one apart; the queue never holds more than its limit, nor more than
// its byte budget unless a single prompt; and the validation rejects empty text, text over
// MaxTextBytes and missing or oversized ids before anything else.
func FuzzQueueOffer(f *testing.F) {
	f.Add(uint8(2), uint32(100), []byte{0, 1, 2, 3, 0x40, 0x80, 4, 0xc0})
	f.Add(uint8(0), uint32(0), []byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Add(uint8(1), uint32(5), []byte{0x11, 0x22, 0x33, 0xff, 0xfe, 0x80, 0x81})
	f.Fuzz(func(t *testing.T, limit uint8, maxBytes uint32, ops []byte) {
		q := NewQueue(int(limit % 20))
		q.MaxBytes = int(maxBytes % (2 << 20))
		if len(ops) > 300 {
			ops = ops[:300]
		}
		seen := map[string]signals.PromptResult{}
		var last int64
		for i, op := range ops {
			switch {
			case op >= 0xf0: // drain
				n := len(q.Items)
				if ids := q.Drain(); len(ids) != n || len(q.Items) != 0 {
					t.Fatalf("drain returned %d ids of %d", len(ids), n)
				}
				continue
			case op >= 0xc0: // pop
				n := len(q.Items)
				var head signals.QueuedPrompt
				if n > 0 {
					head = q.Items[0]
				}
				p, ok := q.Pop()
				if ok != (n > 0) || (ok && !reflect.DeepEqual(p, head)) || len(q.Items) != max(n-1, 0) {
					t.Fatalf("pop of %d items: %v %+v", n, ok, p)
				}
				continue
			}
			req := fuzzPrompt(op, i)
			busy := op&1 == 1
			before := cloneQueue(q)
			res, rej := q.Check(req, busy)
			if !reflect.DeepEqual(before, cloneQueue(q)) {
				t.Fatalf("Check changed the queue")
			}
			res2, rej2 := q.Offer(req, busy)
			if !reflect.DeepEqual(res, res2) || !reflect.DeepEqual(rej, rej2) {
				t.Fatalf("Offer answered %+v %v, Check %+v %v", res2, rej2, res, rej)
			}
			if vrej := ValidatePrompt(req); vrej != nil {
				if rej == nil || rej.Type != signals.RejectInvalidRequest || rej.Message == "" {
					t.Fatalf("invalid prompt (%v) answered %+v %v", vrej, res, rej)
				}
			}
			if strings.TrimSpace(req.Text) == "" && len(req.Content) == 0 || len(req.Text)+len(req.Content) > signals.MaxTextBytes ||
				req.ClientMessageID == "" || len(req.ClientMessageID) > signals.MaxClientIDBytes {
				if ValidatePrompt(req) == nil {
					t.Fatalf("garbage prompt passed validation: text %d bytes, id %q", len(req.Text), req.ClientMessageID)
				}
			}
			switch {
			case rej != nil:
				if !reflect.DeepEqual(before, cloneQueue(q)) {
					t.Fatalf("a rejected prompt (%v) changed the queue", rej)
				}
				if rej.Type != signals.RejectInvalidRequest && rej.Type != signals.RejectQueueFull {
					t.Fatalf("rejection type %q", rej.Type)
				}
			case res.Duplicate:
				orig, ok := seen[req.ClientMessageID]
				if !ok || orig.TurnID != res.TurnID || orig.Position != res.Position {
					t.Fatalf("duplicate %+v of %+v (known %v)", res, orig, ok)
				}
				if !reflect.DeepEqual(before, cloneQueue(q)) {
					t.Fatalf("a duplicate changed the queue")
				}
			default:
				if _, dup := seen[req.ClientMessageID]; dup {
					t.Fatalf("id %q accepted twice", req.ClientMessageID)
				}
				seen[req.ClientMessageID] = res
				if res.TurnID != last+1 {
					t.Fatalf("turn id %d after %d", res.TurnID, last)
				}
				last = res.TurnID
				want := len(q.Items) - 1
				if busy {
					want++
				}
				if res.Position != want {
					t.Fatalf("position %d, want %d", res.Position, want)
				}
			}
			if len(q.Items) > q.Limit {
				t.Fatalf("%d items past the limit %d", len(q.Items), q.Limit)
			}
			if len(q.Items) > 1 && q.MaxBytes > 0 && q.Bytes() > q.MaxBytes {
				t.Fatalf("%d bytes queued past the budget %d", q.Bytes(), q.MaxBytes)
			}
		}
	})
}

// fuzzPrompt makes a prompt request from one op byte: the id from a set of eight (or empty,
// or oversized), the text empty, blank, short, or over the limit, sometimes with content.
func fuzzPrompt(op byte, i int) signals.PromptRequest {
	req := signals.PromptRequest{ClientMessageID: "m" + strconv.Itoa(int(op>>3&7))}
	switch op >> 3 & 7 {
	case 6:
		req.ClientMessageID = ""
	case 7:
		req.ClientMessageID = strings.Repeat("i", signals.MaxClientIDBytes+int(op&1))
	}
	switch op & 6 {
	case 0:
		req.Text = "prompt " + strconv.Itoa(i)
	case 2:
		req.Text = strings.Repeat("t", 1000*int(op>>4)+1)
	case 4:
		req.Text = " \n\t"
	case 6:
		req.Text = strings.Repeat("x", signals.MaxTextBytes-1+int(op>>6))
	}
	if op&0x40 != 0 && op&6 != 6 {
		req.Content = json.RawMessage(`[{"type":"text","text":"c"}]`)
	}
	return req
}

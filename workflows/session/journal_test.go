package session

// Tests of the journal (contract §4 events query, §5 events, §6 "Journal" belt): contiguous
// seqs from 1 that never restart, retention by count and bytes, paging and the gap rule.

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

var journalT0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// appendN journals n events of kind agent.update with no data.
func appendN(j *Journal, n int) {
	for range n {
		j.Append(signals.EventAgentUpdate, 1, journalT0, nil)
	}
}

func seqsOf(evs []signals.Event) []int64 {
	out := make([]int64, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

func seqRange(from, to int64) []int64 {
	out := []int64{}
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func TestJournal_NewJournalDefaults(t *testing.T) {
	require.Equal(t, 4096, DefaultJournalSize, "contract §6: journal_size default 4096")
	for _, size := range []int{0, -5} {
		j := NewJournal(size)
		require.Equal(t, DefaultJournalSize, j.Size)
		require.Equal(t, DefaultJournalBytes, j.MaxBytes)
	}
	j := NewJournal(10)
	require.Equal(t, 10, j.Size)
	require.Zero(t, j.LastSeq)
	require.Equal(t, int64(1), j.FirstRetainedSeq(), "an empty journal's next seq is 1")
	require.Equal(t, signals.JournalRange{FirstSeq: 1, LastSeq: 0}, j.Range())
}

func TestJournal_SeqContiguousFromOne(t *testing.T) {
	j := NewJournal(100)
	kinds := []string{signals.EventSessionStarted, signals.EventPromptAccepted, signals.EventTurnStarted, signals.EventAgentUpdate, signals.EventTurnEnded}
	for i, kind := range kinds {
		ev := j.Append(kind, int64(i), journalT0.Add(time.Duration(i)*time.Second), nil)
		require.Equal(t, int64(i+1), ev.Seq)
		require.Equal(t, kind, ev.Kind)
		require.Equal(t, int64(i), ev.TurnID)
		require.Equal(t, ev, j.Events[i], "Append returns the event it journaled")
	}
	require.Equal(t, int64(len(kinds)), j.LastSeq)
	require.Equal(t, seqRange(1, 5), seqsOf(j.Events))
}

func TestJournal_AtIsUTC(t *testing.T) {
	j := NewJournal(10)
	local := journalT0.In(time.FixedZone("UTC+5", 5*3600))
	ev := j.Append(signals.EventTurnStarted, 1, local, nil)
	require.Equal(t, time.UTC, ev.At.Location())
	require.True(t, ev.At.Equal(journalT0))
}

func TestJournal_RetainsLastSizeEvents(t *testing.T) {
	tests := []struct {
		name      string
		size      int
		appends   int
		wantFirst int64
	}{
		{"under size", 5, 3, 1},
		{"exactly size", 5, 5, 1},
		{"one past size", 5, 6, 2},
		{"far past size", 5, 100, 96},
		{"size one", 1, 10, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := NewJournal(tt.size)
			appendN(j, tt.appends)
			require.Equal(t, int64(tt.appends), j.LastSeq)
			require.Equal(t, tt.wantFirst, j.FirstRetainedSeq())
			require.Equal(t, seqRange(tt.wantFirst, int64(tt.appends)), seqsOf(j.Events))
			require.Equal(t, signals.JournalRange{FirstSeq: tt.wantFirst, LastSeq: int64(tt.appends)}, j.Range())
		})
	}
}

func TestJournal_ByteCapKeepsAtLeastNewestEvent(t *testing.T) {
	data := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`) }
	// w is what an event of n data bytes weighs, its envelope included (seqs 1-9: one digit).
	w := func(n int) int {
		return eventBytes(signals.Event{Seq: 1, Kind: signals.EventAgentUpdate, TurnID: 1, At: journalT0.UTC(), Data: data(n)})
	}
	tests := []struct {
		name      string
		maxBytes  int
		sizes     []int // data bytes of each appended event
		wantSeqs  []int64
		wantBytes int
	}{
		{"under the cap", 4 * w(10), []int{10, 10, 10}, []int64{1, 2, 3}, 3 * w(10)},
		{"exactly the cap", 3 * w(10), []int{10, 10, 10}, []int64{1, 2, 3}, 3 * w(10)},
		{"over the cap drops the oldest", 3*w(10) - 1, []int{10, 10, 10}, []int64{2, 3}, 2 * w(10)},
		{"one big event drops everything before it", w(40) + 5, []int{10, 10, 40}, []int64{3}, w(40)},
		{"an event over the cap on its own is kept", 5, []int{10}, []int64{1}, w(10)},
		{"the newest survives even when each is over the cap", 5, []int{10, 10, 10}, []int64{3}, w(10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := NewJournal(100)
			j.MaxBytes = tt.maxBytes
			for _, n := range tt.sizes {
				j.Append(signals.EventAgentUpdate, 1, journalT0, data(n))
			}
			require.Equal(t, tt.wantSeqs, seqsOf(j.Events))
			require.Equal(t, tt.wantBytes, j.Bytes)
			require.Equal(t, int64(len(tt.sizes)), j.LastSeq)
		})
	}
}

func TestJournal_BytesTrackRetainedEvents(t *testing.T) {
	j := NewJournal(3)
	for i := range 10 {
		j.Append(signals.EventAgentUpdate, 1, journalT0, map[string]int{"i": i})
		b, err := json.Marshal(j.Events)
		require.NoError(t, err)
		require.Equal(t, len(b), j.Bytes+len(j.Events)+1, "after append %d: the events and the array's brackets and commas", i+1)
	}
}

func TestJournal_SincePaging(t *testing.T) {
	j := NewJournal(5000)
	appendN(j, 2500)
	tests := []struct {
		name     string
		after    int64
		limit    int
		wantSeqs []int64
	}{
		{"default limit", 0, 0, seqRange(1, DefaultEventsLimit)},
		{"negative limit takes the default", 0, -1, seqRange(1, DefaultEventsLimit)},
		{"limit capped at DefaultEventsLimit", 0, 5000, seqRange(1, DefaultEventsLimit)},
		{"small limit", 10, 3, []int64{11, 12, 13}},
		{"next page", 1000, 0, seqRange(1001, 2000)},
		{"last page is short", 2000, 0, seqRange(2001, 2500)},
		{"limit past the end", 2498, 10, []int64{2499, 2500}},
		{"caught up", 2500, 0, []int64{}},
		{"after beyond last seq", 9999, 0, []int64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := j.Since(tt.after, tt.limit)
			require.Equal(t, tt.wantSeqs, seqsOf(res.Events))
			require.NotNil(t, res.Events, "events is [] on the wire, never null")
			require.Equal(t, int64(2500), res.LastSeq)
			require.Equal(t, int64(1), res.FirstRetainedSeq)
			require.False(t, res.Gap)
		})
	}

	// Paging to the end with after_seq = the last seq seen visits every event once.
	var got []int64
	after := int64(0)
	for {
		res := j.Since(after, 300)
		if len(res.Events) == 0 {
			break
		}
		got = append(got, seqsOf(res.Events)...)
		after = res.Events[len(res.Events)-1].Seq
	}
	require.Equal(t, seqRange(1, 2500), got)
}

func TestJournal_GapExactlyWhenRetentionDroppedUnseenEvents(t *testing.T) {
	j := NewJournal(5)
	appendN(j, 12) // retains 8..12
	require.Equal(t, int64(8), j.FirstRetainedSeq())
	tests := []struct {
		after    int64
		wantGap  bool
		wantSeqs []int64
	}{
		{0, true, seqRange(8, 12)},
		{5, true, seqRange(8, 12)},
		{6, true, seqRange(8, 12)}, // missed seq 7
		{7, false, seqRange(8, 12)},
		{8, false, seqRange(9, 12)},
		{11, false, []int64{12}},
		{12, false, []int64{}},
		{20, false, []int64{}},
	}
	for _, tt := range tests {
		res := j.Since(tt.after, 0)
		require.Equal(t, tt.wantGap, res.Gap, "after %d", tt.after)
		require.Equal(t, tt.after+1 < res.FirstRetainedSeq, res.Gap, "after %d: contract §4 gap rule", tt.after)
		require.Equal(t, tt.wantSeqs, seqsOf(res.Events), "after %d", tt.after)
		require.Equal(t, int64(8), res.FirstRetainedSeq)
		require.Equal(t, int64(12), res.LastSeq)
	}
}

func TestJournal_EmptyJournalHasNoGap(t *testing.T) {
	res := NewJournal(10).Since(0, 0)
	require.Equal(t, signals.EventsResult{Events: []signals.Event{}, LastSeq: 0, FirstRetainedSeq: 1, Gap: false}, res)
	b, err := json.Marshal(res)
	require.NoError(t, err)
	require.JSONEq(t, `{"events":[],"last_seq":0,"first_retained_seq":1,"gap":false}`, string(b))
}

func TestJournal_JSONRoundTripKeepsLastSeq(t *testing.T) {
	j := NewJournal(3)
	j.Append(signals.EventSessionStarted, 0, journalT0, signals.SessionStartedData{Run: 1})
	for range 5 {
		j.Append(signals.EventAgentUpdate, 1, journalT0, json.RawMessage(`{"sessionUpdate":"agent_message_chunk"}`))
	}

	// Continue-as-new carries the Journal as JSON.
	b, err := json.Marshal(j)
	require.NoError(t, err)
	var next Journal
	require.NoError(t, json.Unmarshal(b, &next))
	require.True(t, reflect.DeepEqual(*j, next), "round trip changed the journal:\nbefore %+v\nafter  %+v", *j, next)

	// Seqs continue where the last run stopped; they never restart at 1.
	ev := next.Append(signals.EventTurnEnded, 1, journalT0, signals.TurnEndedData{StopReason: "end_turn"})
	require.Equal(t, int64(7), ev.Seq)
	require.Equal(t, []int64{5, 6, 7}, seqsOf(next.Events))
	require.Equal(t, int64(5), next.FirstRetainedSeq())
	require.True(t, next.Since(3, 0).Gap)
	require.False(t, next.Since(4, 0).Gap)
}

func TestJournal_DataPassesThrough(t *testing.T) {
	tests := []struct {
		name string
		data any
		want json.RawMessage
	}{
		{"no data", nil, nil},
		{"raw JSON unchanged, whitespace and unknown fields included", json.RawMessage(`{ "sessionUpdate" : "future_kind", "x": [1, 2] }`),
			json.RawMessage(`{ "sessionUpdate" : "future_kind", "x": [1, 2] }`)},
		{"struct marshalled", signals.TurnEndedData{StopReason: "end_turn"}, json.RawMessage(`{"stop_reason":"end_turn"}`)},
		{"map marshalled", map[string]any{"a": 1}, json.RawMessage(`{"a":1}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := NewJournal(10)
			ev := j.Append(signals.EventAgentUpdate, 1, journalT0, tt.data)
			require.Equal(t, tt.want, ev.Data)
			require.Equal(t, tt.want, j.Since(0, 0).Events[0].Data)
			require.Equal(t, eventBytes(ev), j.Bytes)
		})
	}
}

func TestJournal_EventJSONMatchesDesign(t *testing.T) {
	j := NewJournal(10)
	ev := j.Append(signals.EventTurnEnded, 7, journalT0, signals.TurnEndedData{StopReason: "cancelled"})
	b, err := json.Marshal(ev)
	require.NoError(t, err)
	require.JSONEq(t, `{"seq":1,"kind":"turn.ended","turn_id":7,"at":"2025-03-01T12:00:00Z","data":{"stop_reason":"cancelled"}}`, string(b))
}

// FuzzJournalSince appends arbitrary events into a journal of arbitrary size and byte cap and
// pages it from an arbitrary after_seq: the page is contiguous, after after_seq, bounded by the
// limit, and gap holds exactly when after_seq+1 < first_retained_seq.
func FuzzJournalSince(f *testing.F) {
	f.Add(uint16(10), uint16(3), uint16(0), int64(0), 0)
	f.Add(uint16(100), uint16(10), uint16(0), int64(95), 2)
	f.Add(uint16(50), uint16(5), uint16(40), int64(44), 0)
	f.Add(uint16(3000), uint16(4096), uint16(0), int64(1), 5000)
	f.Add(uint16(7), uint16(7), uint16(1), int64(-3), -1)
	f.Fuzz(func(t *testing.T, appends, size, maxBytes uint16, after int64, limit int) {
		if after == math.MaxInt64 {
			// after_seq+1 overflows; no journal reaches that seq.
			t.Skip()
		}
		n := int(appends % 3000)
		j := NewJournal(int(size % 5000))
		j.MaxBytes = int(maxBytes)
		for i := range n {
			// Data of 0 to 40 bytes.
			var data any
			if k := i % 5; k > 0 {
				data = json.RawMessage(`"` + strings.Repeat("d", k*8) + `"`)
			}
			j.Append(signals.EventAgentUpdate, 1, journalT0, data)
		}
		if j.LastSeq != int64(n) {
			t.Fatalf("last seq %d after %d appends", j.LastSeq, n)
		}
		if n > 0 && len(j.Events) == 0 {
			t.Fatalf("the newest event was dropped")
		}
		if len(j.Events) > j.Size {
			t.Fatalf("%d events retained, size %d", len(j.Events), j.Size)
		}

		res := j.Since(after, limit)
		first := j.FirstRetainedSeq()
		if res.FirstRetainedSeq != first || res.LastSeq != j.LastSeq {
			t.Fatalf("result range %d..%d, journal %d..%d", res.FirstRetainedSeq, res.LastSeq, first, j.LastSeq)
		}
		// A negative after reads from the start, like 0.
		if res.Gap != (max(after, 0)+1 < first) {
			t.Fatalf("gap %v with after %d, first retained %d", res.Gap, after, first)
		}
		wantMax := limit
		if limit <= 0 || limit > DefaultEventsLimit {
			wantMax = DefaultEventsLimit
		}
		if len(res.Events) > wantMax {
			t.Fatalf("%d events for limit %d", len(res.Events), limit)
		}
		for i, e := range res.Events {
			if e.Seq <= after {
				t.Fatalf("seq %d not after %d", e.Seq, after)
			}
			if i > 0 && e.Seq != res.Events[i-1].Seq+1 {
				t.Fatalf("seqs not contiguous: %d after %d", e.Seq, res.Events[i-1].Seq)
			}
		}
		// The page starts at the first event the caller has not seen (or the first retained
		// one after a gap) and is as long as the limit allows.
		wantStart := max(after+1, first)
		wantLen := 0
		if wantStart <= j.LastSeq {
			wantLen = int(min(int64(wantMax), j.LastSeq-wantStart+1))
		}
		if len(res.Events) != wantLen {
			t.Fatalf("%d events, want %d (after %d, retained %d..%d, limit %d)", len(res.Events), wantLen, after, first, j.LastSeq, limit)
		}
		if wantLen > 0 && res.Events[0].Seq != wantStart {
			t.Fatalf("page starts at %d, want %d", res.Events[0].Seq, wantStart)
		}
	})
}

// The journal's byte count is what its events weigh as JSON, envelopes included: the
// retained tail, marshalled, never passes MaxBytes.
func TestJournal_BytesAreTheEventsAsTheyWeighInJSON(t *testing.T) {
	j := NewJournal(0)
	at := time.Date(2026, 12, 5, 8, 0, 0, 123456789, time.UTC)
	for i := range 20000 {
		j.Append(signals.EventAgentUpdate, int64(i/100+1), at.Add(time.Duration(i)*time.Millisecond), json.RawMessage(`{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"tok"}}}`))
		if i%997 == 0 {
			j.Append(signals.EventSessionStarted, 0, at, nil)
		}
	}
	b, err := json.Marshal(j.Events)
	require.NoError(t, err)
	require.Equal(t, len(b), j.Bytes+len(j.Events)+1, "the events and the array's commas and brackets")
	require.LessOrEqual(t, j.Bytes, DefaultJournalBytes)
}

// A session whose journal is full continues as new with an input under the 512 KiB at which
// Temporal warns of a large payload: the journal's bound counts the events as they weigh.
func TestJournal_AFullJournalFitsTheContinueAsNewInput(t *testing.T) {
	r := newCoreRig(t, signals.SessionConfig{SessionID: "s1"})
	chunk := json.RawMessage(`{"sessionId":"a1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + strings.Repeat("y", 60) + `"}}}`)
	big := json.RawMessage(`{"sessionId":"a1","update":{"sessionUpdate":"tool_call_update","content":"` + strings.Repeat("z", 8000) + `"}}`)
	for i := range 12000 {
		data := chunk
		if i%50 == 0 {
			data = big
		}
		r.core.Journal.Append(signals.EventAgentUpdate, int64(i/1000+1), coreEpoch.Add(time.Duration(i)*time.Millisecond), data)
	}
	cmd, ok := r.core.carry(RunInfo{}).(ContinueAsNew)
	require.True(t, ok)
	in, err := json.Marshal(cmd.Input)
	require.NoError(t, err)
	t.Logf("continue-as-new input with a full journal: %d bytes, %d events retained", len(in), len(r.core.Journal.Events))
	require.Less(t, len(in), 512<<10)
}

package session

// The journal: the session's ordered event log (contract §5). Every event gets the next
// contiguous seq, starting at 1 and never reused across continue-as-new; the last Size
// events are retained (and no more than MaxBytes of them, so the tail always fits the
// continue-as-new payload). Pure code: the caller supplies the time.

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// Journal defaults.
const (
	DefaultJournalSize = 4096
	// DefaultJournalBytes bounds the retained events as they weigh in JSON, envelope and
	// data (eventBytes), so the journal carried across continue-as-new stays under the
	// 512 KiB at which Temporal warns of a large payload, with room for the rest of the
	// session's state.
	DefaultJournalBytes = 384 << 10
	// DefaultEventsLimit is the page size of the events query when the caller names none.
	DefaultEventsLimit = 1000
)

// Journal is the retained tail of the event log. Its fields are exported so that it travels
// across continue-as-new as it is.
type Journal struct {
	Events   []signals.Event `json:"events"`
	LastSeq  int64           `json:"last_seq"`
	Size     int             `json:"size"`
	MaxBytes int             `json:"max_bytes"`
	Bytes    int             `json:"bytes"`
}

// NewJournal returns an empty journal retaining size events (DefaultJournalSize if <= 0).
func NewJournal(size int) *Journal {
	if size <= 0 {
		size = DefaultJournalSize
	}
	return &Journal{Size: size, MaxBytes: DefaultJournalBytes}
}

// Append journals one event with the next seq and returns it. data is marshalled to JSON
// (json.RawMessage passes through unchanged).
func (j *Journal) Append(kind string, turnID int64, at time.Time, data any) signals.Event {
	var raw json.RawMessage
	switch d := data.(type) {
	case nil:
	case json.RawMessage:
		raw = d
	default:
		b, err := json.Marshal(d)
		if err != nil {
			// Every data type tacp journals is a plain struct; this cannot happen.
			panic("journal: marshal " + kind + ": " + err.Error())
		}
		raw = b
	}
	j.LastSeq++
	ev := signals.Event{Seq: j.LastSeq, Kind: kind, TurnID: turnID, At: at.UTC(), Data: raw}
	j.Events = append(j.Events, ev)
	j.Bytes += eventBytes(ev)
	j.trim()
	return ev
}

// trim drops the oldest events past Size or MaxBytes, always keeping the newest one.
func (j *Journal) trim() {
	drop := 0
	for len(j.Events)-drop > 1 && (len(j.Events)-drop > j.Size || (j.MaxBytes > 0 && j.Bytes > j.MaxBytes)) {
		j.Bytes -= eventBytes(j.Events[drop])
		drop++
	}
	if drop > 0 {
		// Copy so the dropped events' backing array can be collected.
		j.Events = append([]signals.Event(nil), j.Events[drop:]...)
	}
}

// Recount recomputes Bytes from the retained events. A run calls it on the journal it was
// handed across continue-as-new, whose raw data JSON may have been re-encoded.
func (j *Journal) Recount() {
	j.Bytes = 0
	for _, ev := range j.Events {
		j.Bytes += eventBytes(ev)
	}
}

// eventBytes is what ev weighs as JSON: {"seq":N,"kind":"K","turn_id":N,"at":"T","data":D}.
// The kind and the time need no escaping (tacp's own names, RFC 3339).
func eventBytes(ev signals.Event) int {
	n := len(`{"seq":,"kind":"","at":""}`) + len(strconv.FormatInt(ev.Seq, 10)) + len(ev.Kind) + len(ev.At.Format(time.RFC3339Nano))
	if ev.TurnID != 0 {
		n += len(`,"turn_id":`) + len(strconv.FormatInt(ev.TurnID, 10))
	}
	if len(ev.Data) > 0 {
		n += len(`,"data":`) + len(ev.Data)
	}
	return n
}

// FirstRetainedSeq is the seq of the oldest retained event (LastSeq+1 when empty).
func (j *Journal) FirstRetainedSeq() int64 {
	if len(j.Events) == 0 {
		return j.LastSeq + 1
	}
	return j.Events[0].Seq
}

// Since returns up to limit events with seq > afterSeq. Gap is true when retention dropped
// events the caller has not seen (afterSeq+1 < first retained seq).
func (j *Journal) Since(afterSeq int64, limit int) signals.EventsResult {
	if limit <= 0 || limit > DefaultEventsLimit {
		limit = DefaultEventsLimit
	}
	afterSeq = max(afterSeq, 0)
	afterSeq = min(afterSeq, j.LastSeq) // nothing lies past the last seq, and no overflow below
	first := j.FirstRetainedSeq()
	res := signals.EventsResult{
		Events:           []signals.Event{},
		LastSeq:          j.LastSeq,
		FirstRetainedSeq: first,
		Gap:              afterSeq+1 < first,
	}
	start := 0
	if afterSeq >= first {
		start = int(afterSeq - first + 1)
	}
	if start >= len(j.Events) {
		return res
	}
	end := min(start+limit, len(j.Events))
	res.Events = j.Events[start:end]
	return res
}

// Range is the retained seq range for status.
func (j *Journal) Range() signals.JournalRange {
	return signals.JournalRange{FirstSeq: j.FirstRetainedSeq(), LastSeq: j.LastSeq}
}

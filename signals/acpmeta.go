package signals

// The ACP face's own fields (contract §8): what tacp's gateway puts in, and reads from, the
// "tacp" object of an ACP message's _meta. A client in another language needs only this
// to resume a stream by seq.

import (
	"encoding/json"
	"fmt"
	"time"
)

// ACPMetaKey is the key of tacp's object in an ACP message's _meta.
const ACPMetaKey = "tacp"

// ACPMeta is _meta.tacp on the ACP face's messages. Which fields a message carries:
//
//   - session/update params: Seq, the journal event the update shows (every update the
//     gateway sends comes from exactly one event); ClientMessageID on the
//     user_message_chunk of a prompt, the prompt's client_message_id (the messageId of its
//     session/prompt), so that the client that sent it can drop its own echo.
//   - session/load and session/resume params: AfterSeq, the last seq the client saw. The
//     gateway replays the events after it, then goes live: nothing missed, nothing twice.
//     Without it session/load replays the whole retained journal and session/resume
//     nothing.
//   - session/new, session/load and session/resume results: Seq, where the connection's
//     view of the session stands (every later update has a higher seq); Gap and
//     FirstRetainedSeq when retention dropped events after AfterSeq before the client saw
//     them.
//   - session/request_permission params: RequestID and Deadline of the session's request.
//   - the tool_call_update that shows a resolution (in the update's own _meta):
//     PermissionResolved.
type ACPMeta struct {
	Seq                int64                 `json:"seq,omitempty"`
	AfterSeq           *int64                `json:"after_seq,omitempty"`
	ClientMessageID    string                `json:"client_message_id,omitempty"`
	Gap                bool                  `json:"gap,omitempty"`
	FirstRetainedSeq   int64                 `json:"first_retained_seq,omitempty"`
	RequestID          string                `json:"request_id,omitempty"`
	Deadline           *time.Time            `json:"deadline,omitempty"`
	PermissionResolved *PermissionResolution `json:"permission_resolved,omitempty"`
}

// Map returns m as an ACP _meta object: {"tacp": m}.
func (m ACPMeta) Map() map[string]any {
	return map[string]any{ACPMetaKey: m}
}

// ACPMetaOf reads _meta.tacp out of an ACP _meta object as the ACP SDK decodes it (nil or
// without the key: the zero ACPMeta).
func ACPMetaOf(meta map[string]any) (ACPMeta, error) {
	var m ACPMeta
	v, ok := meta[ACPMetaKey]
	if !ok || v == nil {
		return m, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("_meta.%s: %w", ACPMetaKey, err)
	}
	if m.AfterSeq != nil && *m.AfterSeq < 0 {
		return m, fmt.Errorf("_meta.%s.after_seq must be a journal seq (≥ 0), not %d", ACPMetaKey, *m.AfterSeq)
	}
	return m, nil
}

// ACPMetaOfJSON reads _meta.tacp out of the raw JSON of an ACP message's params or result
// (anything with a top-level "_meta"); what is not such JSON reads as the zero ACPMeta.
func ACPMetaOfJSON(raw json.RawMessage) ACPMeta {
	var v struct {
		Meta struct {
			Tacp ACPMeta `json:"tacp"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(raw, &v)
	return v.Meta.Tacp
}

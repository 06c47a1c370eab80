package session

// The prompt queue (contract §6 "Turns"): prompts wait behind the running turn, at most Limit
// of them and at most MaxBytes of text; a repeated client_message_id returns its original
// result and queues nothing. Pure code: Check decides without changing anything (the
// validator), Offer decides the same way and commits (the handler).

import (
	"github.com/tacp-dev/tacp/signals"
)

// Queue defaults.
const (
	DefaultQueueLimit = 16
	// DefaultQueueBytes bounds the text waiting in the queue, which travels in the
	// continue-as-new payload.
	DefaultQueueBytes = 768 << 10
)

// Queue is the prompt queue and its dedup index; it also hands out turn ids.
type Queue struct {
	Items      []signals.QueuedPrompt           `json:"items"`
	Limit      int                              `json:"limit"`
	MaxBytes   int                              `json:"max_bytes"`
	LastTurnID int64                            `json:"last_turn_id"`
	Seen       DedupIndex[signals.PromptResult] `json:"seen"`
}

// NewQueue returns an empty queue holding at most limit prompts (DefaultQueueLimit if <= 0).
func NewQueue(limit int) *Queue {
	if limit <= 0 {
		limit = DefaultQueueLimit
	}
	return &Queue{Limit: limit, MaxBytes: DefaultQueueBytes, Seen: NewDedupIndex[signals.PromptResult]()}
}

// ValidatePrompt refuses a prompt no session takes (signals.ValidatePrompt).
func ValidatePrompt(req signals.PromptRequest) *signals.Rejection { return signals.ValidatePrompt(req) }

// Check decides a prompt without changing the queue. busy says a turn is running (it is
// ahead of every queued prompt).
func (q *Queue) Check(req signals.PromptRequest, busy bool) (signals.PromptResult, *signals.Rejection) {
	if rej := ValidatePrompt(req); rej != nil {
		return signals.PromptResult{}, rej
	}
	if prev, ok := q.Seen.Get(req.ClientMessageID); ok {
		prev.Duplicate = true
		return prev, nil
	}
	if len(q.Items) >= q.Limit {
		return signals.PromptResult{}, signals.Reject(signals.RejectQueueFull, "%d prompts are queued; the limit is %d", len(q.Items), q.Limit)
	}
	size := len(req.Text) + len(req.Content)
	if held := q.Bytes(); q.MaxBytes > 0 && len(q.Items) > 0 && held+size > q.MaxBytes {
		return signals.PromptResult{}, signals.Reject(signals.RejectQueueFull, "queued prompts hold %d bytes; this one would pass the limit of %d", held, q.MaxBytes)
	}
	position := len(q.Items)
	if busy {
		position++
	}
	return signals.PromptResult{TurnID: q.LastTurnID + 1, Position: position}, nil
}

// Offer decides a prompt as Check does and, when it is new and accepted, queues it.
func (q *Queue) Offer(req signals.PromptRequest, busy bool) (signals.PromptResult, *signals.Rejection) {
	res, rej := q.Check(req, busy)
	if rej != nil || res.Duplicate {
		return res, rej
	}
	q.LastTurnID = res.TurnID
	q.Items = append(q.Items, signals.QueuedPrompt{
		TurnID: res.TurnID, ClientMessageID: req.ClientMessageID, Text: req.Text, Content: req.Content, Unwatched: req.Unwatched,
	})
	q.Seen.Put(req.ClientMessageID, res)
	return res, nil
}

// Pop removes and returns the oldest queued prompt.
func (q *Queue) Pop() (signals.QueuedPrompt, bool) {
	if len(q.Items) == 0 {
		return signals.QueuedPrompt{}, false
	}
	p := q.Items[0]
	q.Items = append([]signals.QueuedPrompt(nil), q.Items[1:]...)
	return p, true
}

// Drain removes every queued prompt and returns their client_message_ids.
func (q *Queue) Drain() []string {
	ids := make([]string, 0, len(q.Items))
	for _, p := range q.Items {
		ids = append(ids, p.ClientMessageID)
	}
	q.Items = nil
	return ids
}

// Bytes is the size of the queued text. It is derived, not kept: a prompt's content may
// change its byte length when it crosses continue-as-new as JSON.
func (q *Queue) Bytes() int {
	n := 0
	for _, p := range q.Items {
		n += len(p.Text) + len(p.Content)
	}
	return n
}

// Entries lists the queue for status, without prompt text.
func (q *Queue) Entries() []signals.QueueEntry {
	out := make([]signals.QueueEntry, 0, len(q.Items))
	for _, p := range q.Items {
		out = append(out, signals.QueueEntry{TurnID: p.TurnID, ClientMessageID: p.ClientMessageID, Bytes: len(p.Text) + len(p.Content)})
	}
	return out
}

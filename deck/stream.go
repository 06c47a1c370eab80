package deck

// The live half of the API: a session's journal as Server-Sent Events, where an event's
// SSE id is its journal seq, so Last-Event-ID resumes exactly where a client stopped.
//
// The streams of one session share one events poller, the feed of the gateway's hub that
// also serves the deck's /acp (gateway.Hub): it queries the session's events when its
// history grows (tacpclient.Follower), not on a clock, and keeps the newest events for its
// readers. A session costs one query per history wake-up however many pages watch it, and
// a quiet one no query beyond the safety poll. Each stream reads the feed by seq at its own
// pace, so a reader that stops reading holds up only itself; one that falls behind the
// feed's cache, or resumes from further back, reads a page of the journal itself and comes
// back to the feed.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tacp-dev/tacp/gateway"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
)

// streamBatch is how many events a stream's own read asks for: a replay of a long journal
// goes out in pieces of this size, flushed one by one.
const streamBatch = 500

// sse writes Server-Sent Events and flushes each.
type sse struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	last time.Time // of the last write, for keep-alives
}

func (e *sse) send(id string, event string, data any) error {
	b, err := json.Marshal(data) // JSON has no raw newline, so one data line suffices
	if err != nil {
		return err
	}
	var sb strings.Builder
	if id != "" {
		sb.WriteString("id: " + id + "\n")
	}
	sb.WriteString("event: " + event + "\ndata: ")
	sb.Write(b)
	sb.WriteString("\n\n")
	return e.raw(sb.String())
}

func (e *sse) raw(s string) error {
	if _, err := fmt.Fprint(e.w, s); err != nil {
		return err
	}
	e.last = time.Now()
	return e.rc.Flush()
}

// resumePoint is the seq the client saw last: Last-Event-ID (a browser reconnecting) wins
// over ?after= (the page's first connect).
func resumePoint(r *http.Request) (int64, error) {
	v := r.Header.Get("Last-Event-ID")
	name := "Last-Event-ID"
	if v == "" {
		v, name = r.URL.Query().Get("after"), "after"
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s must be a journal seq (an integer ≥ 0), not %q", name, v)
	}
	return n, nil
}

type gapData struct {
	FirstRetainedSeq int64 `json:"first_retained_seq"`
}

type endData struct {
	Reason string `json:"reason"`
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, _ string) {
	id := r.PathValue("id")
	after, err := resumePoint(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, signals.RejectInvalidRequest, err.Error(), nil)
		return
	}
	release, ok := s.streams.take(r)
	if !ok {
		s.log.Info("deck stream refused: the token's streams are at the cap", "session", id, "remote", r.RemoteAddr, "cap", s.streams.max)
		s.streams.refuse(w)
		return
	}
	defer release()
	ctx := r.Context()
	sub := s.gw.Hub().Subscribe(id, after)
	defer sub.Unsubscribe()
	// The feed's first answer comes before any byte is sent, so that an unknown session is
	// a real 404; streams that open together wait for that one query.
	if err := firstAnswer(ctx, sub); err != nil {
		s.fail(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream lives as long as its reader
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no") // a reverse proxy must not hold events back
	w.WriteHeader(http.StatusOK)
	e := &sse{w: w, rc: rc}
	// retry: how soon a browser reconnects after the stream drops.
	if e.raw("retry: 2000\n\n") != nil {
		return
	}
	s.log.Debug("deck stream open", "session", id, "after", after)
	defer s.log.Debug("deck stream closed", "session", id)

	var res signals.EventsResult
	own := false // res is the answer of the stream's own query
	failures := 0
	for {
		// res holds what the stream's own query brought, or the feed's events after `after`.
		if res.Gap {
			after = res.FirstRetainedSeq - 1
			if e.send(strconv.FormatInt(after, 10), "gap", gapData{FirstRetainedSeq: res.FirstRetainedSeq}) != nil {
				return
			}
		}
		closed := false
		for _, ev := range res.Events {
			if ev.Seq <= after {
				continue
			}
			if e.send(strconv.FormatInt(ev.Seq, 10), "journal", ev) != nil {
				return
			}
			after = ev.Seq
			closed = closed || ev.Kind == signals.EventSessionClosed
		}
		// A closed session (a client resuming one, or one terminated) journals nothing
		// more; the end tells the browser not to reconnect.
		if closed {
			_ = e.send("", "end", endData{Reason: "session closed"})
			return
		}
		drained := own && len(res.Events) == 0 && !res.Gap
		res, own = signals.EventsResult{}, false
		ended := sub.Ended() // before After: an end seen first means After has it all
		evs, covered := sub.After(after)
		switch {
		case len(evs) > 0:
			res.Events = evs
			continue
		case covered && ended:
			_ = e.send("", "end", endData{Reason: "session closed"})
			return
		case covered:
			if _, gone := rejection.As(sub.Err()); gone {
				s.rejected(e, id, sub.Err())
				return
			}
			if !s.idle(ctx, e, sub.Notify(), nil) {
				return
			}
			continue
		case drained:
			// The journal has nothing after `after`, yet the feed stands beyond it (a new
			// feed starts where its first reader asked, and reads on from the journal's
			// end): wait for the feed.
			if !s.idle(ctx, e, sub.Notify(), nil) {
				return
			}
			continue
		}
		// Behind the feed's cache: a page of the journal itself.
		res, err = s.query(ctx, id, after)
		switch {
		case err == nil:
			failures, own = 0, true
		case ctx.Err() != nil:
			return
		default:
			if _, ok := rejection.As(err); ok {
				s.rejected(e, id, err)
				return
			}
			// A worker restarting or the cluster blinking: keep the stream, retry slower.
			failures++
			s.log.Warn("deck stream read failed", "session", id, "failures", failures, "err", err)
			res = signals.EventsResult{}
			t := time.NewTimer(s.poll * time.Duration(1+min(failures, 20)))
			goOn := s.idle(ctx, e, nil, t.C)
			t.Stop()
			if !goOn {
				return
			}
		}
	}
}

// firstAnswer waits until sub's feed has read the session's journal (nil) or failed to
// (its error: a rejection says the session is unknown).
func firstAnswer(ctx context.Context, sub *gateway.Subscription) error {
	t := time.NewTimer(callTimeout)
	defer t.Stop()
	for {
		if sub.Known() {
			return nil
		}
		if err := sub.Err(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return context.DeadlineExceeded
		case <-sub.Notify():
		}
	}
}

// rejected ends a stream whose session answers its events query with a rejection (it is
// gone).
func (s *Server) rejected(e *sse, id string, err error) {
	rej, _ := rejection.As(err)
	s.log.Info("deck stream rejected", "session", id, "type", rej.Type)
	_ = e.send("", "rejected", apiError{Type: rej.Type, Message: rej.Message})
}

// idle waits until wake or retry fires, sending a keep-alive comment whenever the stream has
// been silent for s.alive; false: the stream is over.
func (s *Server) idle(ctx context.Context, e *sse, wake <-chan struct{}, retry <-chan time.Time) bool {
	for {
		alive := time.NewTimer(max(s.alive-time.Since(e.last), 0))
		select {
		case <-ctx.Done():
			alive.Stop()
			return false
		case <-wake:
			alive.Stop()
			return true
		case <-retry:
			alive.Stop()
			return true
		case <-alive.C:
			if e.raw(": keep-alive\n\n") != nil {
				return false
			}
		}
	}
}

// query is a page of the journal a stream reads itself: what lies before the feed's cache.
func (s *Server) query(ctx context.Context, id string, after int64) (signals.EventsResult, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	s.ownQueries.Add(1)
	return s.c.Events(ctx, id, after, streamBatch)
}

// EventsQueries returns how many events queries the deck's streams and /acp connections have
// sent: their shared feeds' and the streams' own reads (for tests and the benchmark).
func (s *Server) EventsQueries() int64 { return s.ownQueries.Load() + s.gw.Polls() }

// Feeds returns how many sessions the deck's feeds poll right now.
func (s *Server) Feeds() int { return s.gw.Feeds() }

// queryCount counts the queries of the streams' own.
type queryCount struct{ atomic.Int64 }

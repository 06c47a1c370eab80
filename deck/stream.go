package deck

// The live half of the API: a session's journal as Server-Sent Events, where an event's
// SSE id is its journal seq, so Last-Event-ID resumes exactly where a client stopped. A
// stream queries the session's events when its history grows (signals.Follower), not on a
// clock: an open page on a quiet session costs no query beyond the client's safety poll.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// streamBatch is how many events one poll asks for: a replay of a long journal goes out in
// pieces of this size, flushed one by one.
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
	ctx := r.Context()
	// Following starts before the first query, so that history written after it wakes us.
	fl := s.c.Follow(ctx, id)
	// The first query runs before any byte is sent, so an unknown session is a real 404.
	done := fl.Querying()
	res, err := s.query(ctx, id, after)
	done()
	if err != nil {
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

	failures := 0
	for {
		closed := false
		if res.Gap {
			after = res.FirstRetainedSeq - 1
			if e.send(strconv.FormatInt(after, 10), "gap", gapData{FirstRetainedSeq: res.FirstRetainedSeq}) != nil {
				return
			}
		}
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
		caughtUp := failures == 0 && after >= res.LastSeq
		// A workflow that closed (a client resuming a closed session, or one terminated)
		// journals nothing more; the end tells the browser not to reconnect.
		if closed || (caughtUp && fl.Ended()) {
			_ = e.send("", "end", endData{Reason: "session closed"})
			return
		}
		if caughtUp || failures > 0 {
			var retry <-chan time.Time
			var t *time.Timer
			if failures > 0 {
				t = time.NewTimer(s.poll * time.Duration(1+min(failures, 20)))
				retry = t.C
			}
			goOn := s.idle(ctx, e, fl, retry)
			if t != nil {
				t.Stop()
			}
			if !goOn {
				return
			}
		}
		done := fl.Querying()
		res, err = s.query(ctx, id, after)
		done()
		switch {
		case err == nil:
			failures = 0
		case ctx.Err() != nil:
			return
		default:
			if rej, ok := signals.AsRejection(err); ok {
				_ = e.send("", "rejected", apiError{Type: rej.Type, Message: rej.Message})
				return
			}
			// A worker restarting or the cluster blinking: keep the stream, retry slower.
			failures++
			s.log.Warn("deck stream poll failed", "session", id, "failures", failures, "err", err)
			res = signals.EventsResult{LastSeq: after} // nothing new
		}
	}
}

// idle waits until the follower says to query (or retry fires), sending a keep-alive
// comment whenever the stream has been silent for s.alive; false: the stream is over.
func (s *Server) idle(ctx context.Context, e *sse, fl *signals.Follower, retry <-chan time.Time) bool {
	for {
		alive := time.NewTimer(max(s.alive-time.Since(e.last), 0))
		select {
		case <-ctx.Done():
			alive.Stop()
			return false
		case <-fl.Ready():
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

func (s *Server) query(ctx context.Context, id string, after int64) (signals.EventsResult, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return s.c.Events(ctx, id, after, streamBatch)
}

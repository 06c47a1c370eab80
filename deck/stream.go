package deck

// The live half of the API: a session's journal as Server-Sent Events, where an event's
// SSE id is its journal seq, so Last-Event-ID resumes exactly where a client stopped.

import (
	"context"
	"encoding/json"
	"errors"
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
	// The first query runs before any byte is sent, so an unknown session is a real 404.
	res, err := s.query(ctx, id, after)
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
	checkedClosed := false
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
		caughtUp := after >= res.LastSeq
		if !closed && caughtUp && !checkedClosed {
			// Caught up at once (a client resuming a closed session): nothing more will come,
			// and polling a finished workflow replays its history on a worker for every poll.
			checkedClosed = true
			closed = s.isClosed(ctx, id)
		}
		if closed {
			_ = e.send("", "end", endData{Reason: "session closed"})
			return
		}
		if caughtUp {
			select {
			case <-ctx.Done():
				return
			case <-time.After(s.poll * time.Duration(1+min(failures, 20))):
			}
			if time.Since(e.last) >= s.alive && e.raw(": keep-alive\n\n") != nil {
				return
			}
		}
		res, err = s.query(ctx, id, after)
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
			// A worker restarting or the cluster blinking: keep the stream, poll slower.
			failures++
			s.log.Warn("deck stream poll failed", "session", id, "failures", failures, "err", err)
			res = signals.EventsResult{LastSeq: after + 1} // nothing new; not caught up
		}
	}
}

func (s *Server) query(ctx context.Context, id string, after int64) (signals.EventsResult, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return s.c.Events(ctx, id, after, streamBatch)
}

func (s *Server) isClosed(ctx context.Context, id string) bool {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	st, err := s.c.Status(ctx, id)
	if err != nil {
		var rej *signals.Rejection
		return errors.As(err, &rej) && rej.Type == signals.RejectSessionClosed
	}
	return st.State == signals.StateClosed
}

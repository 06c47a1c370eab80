package fakemodel

// Writing answers: server-sent events, each flushed, the pause between chunks that ends
// when the client goes away, JSON bodies and response ids.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// sse writes server-sent events, flushing each.
type sse struct {
	w  http.ResponseWriter
	fl http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	return &sse{w: w, fl: fl}
}

// event writes one event; name may be empty (data only). It reports whether the client is
// still there.
func (e *sse) event(name string, data any) bool {
	var b bytes.Buffer
	if name != "" {
		fmt.Fprintf(&b, "event: %s\n", name)
	}
	js, _ := json.Marshal(data)
	fmt.Fprintf(&b, "data: %s\n\n", js)
	if _, err := e.w.Write(b.Bytes()); err != nil {
		return false
	}
	if e.fl != nil {
		e.fl.Flush()
	}
	return true
}

// pause waits d, or reports false when the client went away first.
func pause(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return r.Context().Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func newID(prefix string, n int) string { return fmt.Sprintf("%s_fake%06d", prefix, n) }

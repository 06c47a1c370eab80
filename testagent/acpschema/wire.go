package acpschema

// The wire check: a connection's traffic watched as it passes (CheckedWire).

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
)

// schemaCheck is one connection's check.
type schemaCheck struct {
	conv *Conversation
	path string
	mu   sync.Mutex
	seen int // violations written
}

// CheckedWire returns one ACP connection's two streams — in, what the client sends, and
// out, what the agent sends — passed through unchanged and watched: every message of the
// side checked that does not hold to the pinned v1 schema is appended to the file at path.
// Tests use it to hold a whole suite's traffic to the schema (the test agent for what
// tacp's runner sends agents, `starter acp` built with the schemacheck tag for what tacp
// sends editors).
func CheckedWire(in io.Reader, out io.Writer, checked Direction, path string) (io.Reader, io.Writer, error) {
	s, err := LoadV1()
	if err != nil {
		return in, out, err
	}
	c := &schemaCheck{conv: &Conversation{Schema: s, Checked: checked}, path: path}
	return &lineTap{r: in, each: func(l []byte) { c.observe(FromClient, l) }},
		&lineTap{w: out, each: func(l []byte) { c.observe(FromAgent, l) }}, nil
}

func (c *schemaCheck) observe(dir Direction, line []byte) {
	c.conv.Observe(dir, line)
	c.mu.Lock()
	defer c.mu.Unlock()
	bad := c.conv.Violations()
	if len(bad) == c.seen {
		return
	}
	f, err := os.OpenFile(c.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "acpschema: %v\n", err)
		return
	}
	defer f.Close()
	for _, v := range bad[c.seen:] {
		fmt.Fprintf(f, "%s\n", v)
	}
	c.seen = len(bad)
}

// lineTap passes a stream through (r when reading, w when writing) and hands each whole
// line to each.
type lineTap struct {
	r    io.Reader
	w    io.Writer
	each func([]byte)
	mu   sync.Mutex
	buf  []byte
}

func (t *lineTap) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.take(p[:n])
	return n, err
}

func (t *lineTap) Write(p []byte) (int, error) {
	t.take(p)
	return t.w.Write(p)
}

func (t *lineTap) take(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			return
		}
		line := append([]byte(nil), t.buf[:i]...)
		t.buf = t.buf[i+1:]
		t.each(line)
	}
}

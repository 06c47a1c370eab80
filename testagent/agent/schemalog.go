package agent

// The wire check of what a client sends an agent: with SchemaLogEnv set, the agent watches
// its own connection, both ways, and appends every message its client sent that does not
// hold to the pinned ACP v1 schema (acpschema) to the file it names. The e2e suite sets it
// for every test agent it starts, so everything tacp's turn runner sends an agent over the
// whole suite — initialize, session/new and load, prompts, cancels, set_mode, the answers
// to permission requests, questions and file reads — is held to the schema; a violation
// fails the suite.

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/tacp-dev/tacp/testagent/acpschema"
)

// SchemaLogEnv names the file violations are appended to (unset: no check).
const SchemaLogEnv = "TESTAGENT_SCHEMA_LOG"

// schemaCheck is one connection's check.
type schemaCheck struct {
	conv *acpschema.Conversation
	path string
	mu   sync.Mutex
	seen int // violations written
}

// checkedWire returns in and out watched by the check SchemaLogEnv asks for, or as they are.
func checkedWire(in io.Reader, out io.Writer) (io.Reader, io.Writer) {
	path := os.Getenv(SchemaLogEnv)
	if path == "" {
		return in, out
	}
	s, err := acpschema.LoadV1()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: schema check: %v\n", DefaultName, err)
		return in, out
	}
	c := &schemaCheck{conv: &acpschema.Conversation{Schema: s, Checked: acpschema.FromClient}, path: path}
	return &lineTap{r: in, each: func(l []byte) { c.observe(acpschema.FromClient, l) }},
		&lineTap{w: out, each: func(l []byte) { c.observe(acpschema.FromAgent, l) }}
}

func (c *schemaCheck) observe(dir acpschema.Direction, line []byte) {
	c.conv.Observe(dir, line)
	c.mu.Lock()
	defer c.mu.Unlock()
	bad := c.conv.Violations()
	if len(bad) == c.seen {
		return
	}
	f, err := os.OpenFile(c.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: schema check: %v\n", DefaultName, err)
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

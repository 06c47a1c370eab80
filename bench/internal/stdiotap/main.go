// Command stdiotap runs an ACP agent with its stdio passed through and writes, for every
// JSON-RPC line either way, the time it crossed and what it was, so that a benchmark can
// see when a client (tacp's runner, or a direct ACP client) wrote a prompt to the agent and
// when the agent wrote its first agent_message_chunk back, on the machine's clock:
//
//	stdiotap LOG COMMAND [ARG...]
//
// Each line of LOG is "UNIXNANO in|out TAG", TAG the method (a request's with its id,
// "session/prompt#3"; a session/update's with its kind, "session/update:agent_message_chunk")
// or "result:ID" for an answer. A line is
// forwarded before it is parsed or logged, so the tap adds a copy, not a parse, to the
// path; the benchmark runs it on both sides of a comparison.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: stdiotap LOG COMMAND [ARG...]")
		os.Exit(2)
	}
	log, err := os.OpenFile(os.Args[1], os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stdiotap:", err)
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[2], os.Args[3:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "stdiotap:", err)
		os.Exit(2)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "stdiotap:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "stdiotap:", err)
		os.Exit(2)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	var mu sync.Mutex
	record := func(at time.Time, dir string, line []byte) {
		tag := tagOf(line)
		if tag == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		_, _ = fmt.Fprintf(log, "%d %s %s\n", at.UnixNano(), dir, tag)
	}
	go func() {
		pipe(os.Stdin, in, func(at time.Time, l []byte) { record(at, "in", l) })
		_ = in.Close()
	}()
	pipe(out, os.Stdout, func(at time.Time, l []byte) { record(at, "out", l) })
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		os.Exit(exit.ExitCode())
	}
}

// pipe copies r to w line by line, calling seen with each whole line after it is written.
func pipe(r io.Reader, w io.Writer, seen func(time.Time, []byte)) {
	br := bufio.NewReaderSize(r, 1<<20)
	var partial []byte
	for {
		chunk, err := br.ReadSlice('\n')
		at := time.Now()
		if len(chunk) > 0 {
			if _, werr := w.Write(chunk); werr != nil {
				return
			}
		}
		switch {
		case err == nil:
			if partial != nil {
				seen(at, append(partial, chunk...))
				partial = nil
			} else {
				seen(at, chunk)
			}
		case errors.Is(err, bufio.ErrBufferFull):
			partial = append(partial, chunk...)
		default:
			return
		}
	}
}

// tagOf names one JSON-RPC line: its method (and session/update's kind), or result:ID.
func tagOf(line []byte) string {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Update struct {
				Kind string `json:"sessionUpdate"`
			} `json:"update"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil {
		return ""
	}
	id := string(m.ID)
	if s, err := strconv.Unquote(id); err == nil {
		id = s
	}
	switch {
	case m.Method == "session/update":
		return m.Method + ":" + m.Params.Update.Kind
	case m.Method != "" && id != "":
		return m.Method + "#" + id
	case m.Method != "":
		return m.Method
	case id != "":
		return "result:" + id
	}
	return ""
}

package activities

// An agent process: the ACP agent as a subprocess on real stdio pipes, with tacp as its ACP
// client. The agent's stdout passes through a line tap before it reaches the SDK, so every
// session/update is captured as the raw JSON the agent wrote (the SDK's typed decoding
// drops kinds it does not know) and in wire order, without ever blocking the SDK.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/internal/sandbox"
)

// maxLineBytes bounds one JSON-RPC line from the agent: the ACP SDK's own limit, so a line
// the SDK would refuse is refused here first.
const maxLineBytes = 10 << 20

// agentProc is a running agent subprocess and the client side of its ACP connection.
type agentProc struct {
	cmd   *exec.Cmd
	stdin *agentStdin
	conn  *acp.ClientSideConnection
	caps  acp.InitializeResponse

	// tap receives the params of every session/update line; nil drops them.
	tap atomic.Pointer[func(json.RawMessage)]
	// replay, while set, receives the session/update params in place of tap, until the
	// agent's next JSON-RPC answer (the answer to session/load: see replayUntilAnswer).
	replay atomic.Pointer[func(json.RawMessage)]
	exited chan struct{}
	// env is the environment it started with, its sandbox policy among it
	// (sandbox.PolicyEnv), which starting a sandboxed agent takes out of cmd.Env.
	env    []string
	waitMu sync.Mutex
	err    error
	log    *slog.Logger
	stderr *logWriter
	// offerFS: initialize offers the client's files (the session's workspace).
	offerFS bool
	// noTypedFailures: initialize does not ask for typed failures (Profile.TypedFailures).
	noTypedFailures bool
}

// startAgent starts argv in dir with env (nil: the worker's) and connects to it over stdio.
// client answers the agent's requests (permissions, files).
func startAgent(argv, env []string, dir string, client acp.Client, log *slog.Logger) (*agentProc, error) {
	if len(argv) == 0 {
		return nil, errors.New("no agent command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	stderr := &logWriter{log: log}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sandbox.ForkAttr(cmd.SysProcAttr, env) // the namespaces a sandboxed start needs (internal/sandbox)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	nice := 0
	if hc, ok := client.(*hostClient); ok {
		nice = hc.nice
	}
	if err := sandbox.Start(cmd); err != nil { // confined to its session when env says (internal/sandbox)
		return nil, fmt.Errorf("start agent %q: %w", argv[0], err)
	}
	// The agent's group dies with this worker, however the worker dies (reaper.go).
	pgid := cmd.Process.Pid
	if nice != 0 {
		// Every thread of the group, now, a moment after the exec and before the agent's
		// runtime starts its own threads, which inherit it, as its tools do; the worker's
		// threads keep theirs (a thread's nice is what a fork inherits).
		if err := syscall.Setpriority(syscall.PRIO_PGRP, pgid, nice); err != nil {
			log.Warn("the agent runs at the worker's CPU priority", "nice", nice, "error", err)
		}
	}
	reap := theReaper(log)
	reap.watch(pgid)
	p := &agentProc{cmd: cmd, stdin: &agentStdin{WriteCloser: stdin}, exited: make(chan struct{}), env: env, log: log, offerFS: true, stderr: stderr}
	if hc, ok := client.(*hostClient); ok && hc.sandbox == nil {
		p.offerFS = false // a profile that keeps the agent on its own files (Profile.ClientFS)
	}
	if hc, ok := client.(*hostClient); ok && hc.noTypedFailures {
		p.noTypedFailures = true
	}
	pr, pw := io.Pipe()
	go p.pump(stdout, pw)
	// The SDK's logger is not set: its receive loop is already running and reads it
	// unguarded. Its diagnostics go to slog's default logger.
	p.conn = acp.NewClientSideConnection(client, p.stdin, pr)
	go func() {
		// When the SDK stops reading (a line it refuses, a closed connection), unblock pump.
		<-p.conn.Done()
		_ = pr.CloseWithError(errors.New("acp connection closed"))
	}()
	go func() {
		err := cmd.Wait()
		// What the agent left in its group (node children, tool processes) goes with it.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		reap.forget(pgid)
		p.waitMu.Lock()
		p.err = err
		p.waitMu.Unlock()
		close(p.exited)
	}()
	return p, nil
}

// agentStdin is the agent's stdin as the ACP SDK writes it, one JSON-RPC message per Write:
// it tells the turn waiting for it that its session/prompt request is on the pipe, so the
// attempt records PromptSent after the prompt went out, never before (runner.go), and off
// the prompt's path.
type agentStdin struct {
	io.WriteCloser
	prompted atomic.Pointer[func()]
}

// promptMethod is how a session/prompt request reads on the wire. Inside a JSON string a
// quote is escaped, so no text a message carries can read so: only a message's own method.
var promptMethod = []byte(`"method":"session/prompt"`)

func (w *agentStdin) Write(b []byte) (int, error) {
	n, err := w.WriteCloser.Write(b)
	if err == nil && w.prompted.Load() != nil && bytes.Contains(b[:min(len(b), 128)], promptMethod) {
		if f := w.prompted.Swap(nil); f != nil {
			(*f)()
		}
	}
	return n, err
}

// onPrompt calls f once, after the next session/prompt request is written; nil forgets an
// f not called yet (the turn ended before its prompt went out).
func (w *agentStdin) onPrompt(f func()) {
	if f == nil {
		w.prompted.Store(nil)
		return
	}
	w.prompted.Store(&f)
}

// pump copies the agent's stdout to the SDK line by line, tapping session/update params.
func (p *agentProc) pump(stdout io.Reader, to *io.PipeWriter) {
	r := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, err := readLine(r)
		if len(line) > 0 {
			p.inspect(line)
			if _, werr := to.Write(line); werr != nil {
				_ = to.CloseWithError(werr)
				return
			}
		}
		if err != nil {
			_ = to.CloseWithError(err)
			return
		}
	}
}

// readLine reads one newline-terminated line, refusing lines past maxLineBytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxLineBytes {
			return nil, fmt.Errorf("agent wrote a line over %d bytes", maxLineBytes)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return buf, err
		}
	}
}

func (p *agentProc) inspect(line []byte) {
	replay := p.replay.Load()
	// A cheap filter before decoding; "update" survives any JSON escaping of the method name.
	// While a replay runs every line is decoded: its end is an answer.
	if replay == nil && !bytes.Contains(line, []byte("update")) {
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &msg) != nil {
		return // garbage: the SDK deals with it
	}
	if replay != nil && msg.Method == "" && len(msg.ID) > 0 {
		// The agent's answer to session/load ends its replay, in wire order: what it says
		// next is live again.
		p.replay.CompareAndSwap(replay, nil)
		return
	}
	if msg.Method != acp.ClientMethodSessionUpdate || len(msg.ID) > 0 {
		return // not a notification: the SDK deals with it
	}
	if replay != nil {
		(*replay)(msg.Params)
	} else if fn := p.tap.Load(); fn != nil {
		(*fn)(msg.Params)
	}
}

// setTap directs session/update params to fn (nil: drop them).
func (p *agentProc) setTap(fn func(json.RawMessage)) {
	if fn == nil {
		p.tap.Store(nil)
		return
	}
	p.tap.Store(&fn)
}

// replayUntilAnswer diverts session/update params to fn until the agent's next JSON-RPC
// answer: called just before session/load, it separates the load's replay of history from
// what the agent says after answering, on the wire itself (a switch after LoadSession
// returns would race the lines that follow the answer). Nothing else may be asked of the
// agent meanwhile. The returned func ends the diversion if no answer came (a timeout).
func (p *agentProc) replayUntilAnswer(fn func(json.RawMessage)) (end func()) {
	ptr := &fn
	p.replay.Store(ptr)
	return func() { p.replay.CompareAndSwap(ptr, nil) }
}

// clientCapabilities is what tacp offers an agent as its ACP client: the workspace's files
// (fs/read_text_file, fs/write_text_file through the Sandbox, inside the session's
// workspace only), and no terminal.
//
// terminal/* is not offered on purpose. A client terminal runs any command the agent names
// as a process of the worker, outside whatever sandbox and permission flow the agent applies
// to its own shell tool, with the worker's privileges: the worker is the trust boundary
// (contract §10), and a terminal would make it a remote shell for every agent. The agents tacp
// runs execute commands with their own shell tool whether a client terminal is offered or not
// (claude-agent-acp and codex-acp use one to show a command's output), and report them as tool
// calls that the session's permissions govern; serving one would add a second process tree
// per command whose output bounds and lifetime (killed with the turn) tacp would have to get
// right for every agent. Revisit with an operator's command policy (like the MCP stdio
// policy), not before.
var clientCapabilities = acp.ClientCapabilities{
	Fs:       acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
	Terminal: false,
	// The AIR extension's typed failures: how an agent says a turn was limited (limits.go).
	Meta: airCapabilities(),
	// Questions to a person, relayed to every channel (elicitation.go).
	Elicitation: elicitationCapabilities,
}

// ClientCapabilities is what tacp's runner offers every agent in initialize (less the
// client's files for a profile that keeps its agent on its own): what a direct ACP client
// must offer too for an agent to behave as it does behind tacp (elicitation, for one, adds
// Claude Code's AskUserQuestion).
func ClientCapabilities() acp.ClientCapabilities { return clientCapabilities }

// ProtocolVersion is the ACP version tacp asks its agents for: 1, the stable protocol. An
// agent that also speaks a draft of 2 answers 1 to a client that asks for 1. It is written
// out, not taken from the SDK's constant, so a newer SDK cannot move it unseen
// (TestAgentIsAskedForProtocolOne).
const ProtocolVersion = 1

// initialize runs the ACP handshake.
func (p *agentProc) initialize(ctx context.Context) error {
	caps := clientCapabilities
	if !p.offerFS {
		caps.Fs = acp.FileSystemCapabilities{}
	}
	if p.noTypedFailures {
		caps.Meta = nil
	}
	resp, err := p.conn.Initialize(ctx, acp.InitializeRequest{
		ProtocolVersion:    ProtocolVersion,
		ClientCapabilities: caps,
		ClientInfo:         &acp.Implementation{Name: "tacp", Version: "0.1.0"},
	})
	if err != nil {
		return fmt.Errorf("agent initialize: %w", err)
	}
	p.caps = resp
	return nil
}

// alive reports whether the process is still running.
func (p *agentProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// exitErr describes how the process ended.
func (p *agentProc) exitErr() error {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	if p.err == nil {
		return errors.New("agent exited")
	}
	return fmt.Errorf("agent exited: %w", p.err)
}

// withPrinted adds what the agent last printed on stderr to err and, when that names a path
// its kernel sandbox refused, the path and the settings that grant it: an agent that cannot
// write where it keeps its files dies at start, and its exit status alone does not say why.
func (p *agentProc) withPrinted(err error) error {
	out := p.stderr.printed()
	if out == "" {
		return err
	}
	if path := sandbox.Refused(p.env, out); path != "" {
		return fmt.Errorf("%w; it printed: %s; the kernel sandbox of its session refuses %s: grant it with "+
			`"read_write": [%q] in the agent's profile (-agent.profiles), or run the agent unsandboxed `+
			`with "sandbox": "off" in its profile or -agent.sandbox=off`, err, out, path, path)
	}
	return fmt.Errorf("%w; it printed: %s", err, out)
}

// stop ends the process: it closes stdin (a polite agent exits), then kills its process
// group after grace.
func (p *agentProc) stop(grace time.Duration) {
	_ = p.stdin.Close()
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// logWriter sends the agent's stderr to the worker's log, a line per record, and keeps its
// last lines: an agent that dies or never answers initialize is reported with what it
// printed (a missing key, a crash), not only with its exit status.
type logWriter struct {
	log  *slog.Logger
	buf  []byte
	mu   sync.Mutex
	tail []string // the last stderrTailLines lines, each at most stderrTailLine bytes
}

const (
	stderrTailLines = 8
	stderrTailLine  = 512
)

func (w *logWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 8<<10 {
		w.line(w.buf)
		w.buf = nil
	}
	return len(b), nil
}

func (w *logWriter) line(b []byte) {
	w.log.Debug("agent stderr", "line", string(b))
	line := string(bytes.TrimSpace(b))
	if line == "" {
		return
	}
	if len(line) > stderrTailLine {
		line = line[:stderrTailLine] + "…"
	}
	w.mu.Lock()
	w.tail = append(w.tail, line)
	if len(w.tail) > stderrTailLines {
		w.tail = w.tail[len(w.tail)-stderrTailLines:]
	}
	w.mu.Unlock()
}

// printed is the agent's last lines on stderr, joined ("" when it printed nothing).
func (w *logWriter) printed() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.tail, " | ")
}

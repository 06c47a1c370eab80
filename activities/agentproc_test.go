package activities

// Tests of the agent process and its stdout tap: the real testagent binary over stdio for
// the session/update capture (in wire order, before the prompt answers, unknown kinds byte
// for byte), the fail-closed permission answer and stop; inspect, pump and readLine on
// hand-made lines; and the test binary itself as a misbehaving agent.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/internal/proctree"
)

// testagentBin is the testagent binary built once by TestMain.
var testagentBin string

// helperEnv makes the test binary act as a misbehaving agent (see runHelper).
const helperEnv = "TACP_ACTIVITIES_TEST_AGENT"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "tacp-activities-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	testagentBin = filepath.Join(tmp, "testagent")
	build := exec.Command("go", "build", "-o", testagentBin, "../testagent")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build testagent:", err)
		return 1
	}
	return m.Run()
}

// runHelper is the test binary run as an agent subprocess.
func runHelper(mode string) int {
	switch mode {
	case "stubborn": // answers initialize, then ignores SIGINT and the end of stdin
		signal.Ignore(os.Interrupt)
		in := bufio.NewReader(os.Stdin)
		line, _ := in.ReadBytes('\n')
		var req struct{ ID json.RawMessage }
		if json.Unmarshal(line, &req) == nil {
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1}}`+"\n", req.ID)
		}
		_, _ = io.Copy(io.Discard, in)
		untilKilled()
		return 0
	case "record": // writes its first line (initialize) to TACP_TEST_RECORD, answers it, then waits
		in := bufio.NewReader(os.Stdin)
		line, _ := in.ReadBytes('\n')
		_ = os.WriteFile(os.Getenv("TACP_TEST_RECORD"), line, 0o644)
		var req struct{ ID json.RawMessage }
		if json.Unmarshal(line, &req) == nil {
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1}}`+"\n", req.ID)
		}
		_, _ = io.Copy(io.Discard, in)
		return 0
	case "garbage": // a line that is not JSON-RPC as soon as it starts
		fmt.Println("this is not json")
		_, _ = io.Copy(io.Discard, os.Stdin)
		return 0
	case "bigline": // one session/update line longer than the SDK reads, then waits
		text := strings.Repeat("x", 11<<20)
		fmt.Printf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}}`+"\n", text)
		_, _ = io.Copy(io.Discard, os.Stdin)
		return 0
	case "worker": // a worker with one agent (and its helper child), killed by the test
		return runWorkerHelper()
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	return 2
}

// runWorkerHelper starts the testagent named by TACP_ACTIVITIES_TESTAGENT with a child in
// its group, prints "pids AGENT CHILD", and waits to be killed.
func runWorkerHelper() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dir, err := os.MkdirTemp("", "tacp-worker-helper-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var tap tapRecorder
	proc, err := startAgent([]string{os.Getenv("TACP_ACTIVITIES_TESTAGENT"), "-spawn-child", "-transcripts", dir}, nil, dir, &hostClient{log: log}, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	proc.setTap(tap.tap)
	ctx := context.Background()
	if err := proc.initialize(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sess, err := proc.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: dir, McpServers: []acp.McpServer{}})
	if err == nil {
		_, err = proc.conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("/pids")}})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, p := range tap.snapshot() {
		var u update
		if json.Unmarshal(p, &u) == nil && strings.HasPrefix(u.Update.Content.Text, "pids ") {
			fmt.Println(u.Update.Content.Text)
		}
	}
	untilKilled()
	return 0
}

// untilKilled blocks a helper process until it is killed. It waits on a signal nobody
// sends: with a signal channel the runtime does not take the wait for a deadlock, and
// SIGKILL, which ends it, is not caught.
func untilKilled() {
	never := make(chan os.Signal, 1)
	signal.Notify(never, syscall.SIGUSR2)
	<-never
}

// syncBuffer is a log sink safe to write after the test has returned (SDK goroutines may
// log while the connection winds down).
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func testLogger(t *testing.T) (*slog.Logger, *syncBuffer) {
	t.Helper()
	var out syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", out.String())
		}
	})
	return slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})), &out
}

// tapRecorder collects the params the tap hands over.
type tapRecorder struct {
	mu     sync.Mutex
	params []json.RawMessage
}

func (r *tapRecorder) tap(p json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.params = append(r.params, p)
}

func (r *tapRecorder) snapshot() []json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]json.RawMessage(nil), r.params...)
}

// update is the part of session/update params the tests look at.
type update struct {
	SessionID string `json:"sessionId"`
	Update    struct {
		Kind    string `json:"sessionUpdate"`
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
		Status string `json:"status"`
	} `json:"update"`
}

func decodeUpdates(t *testing.T, params []json.RawMessage) []update {
	t.Helper()
	out := make([]update, len(params))
	for i, p := range params {
		require.NoError(t, json.Unmarshal(p, &out[i]), "params %s", p)
	}
	return out
}

func messageTexts(ups []update) []string {
	var out []string
	for _, u := range ups {
		if u.Update.Kind == "agent_message_chunk" {
			out = append(out, u.Update.Content.Text)
		}
	}
	return out
}

// liveAgent is a started and initialized testagent with one session whose updates go to tap.
type liveAgent struct {
	proc        *agentProc
	sid         acp.SessionId
	transcripts string
	tap         *tapRecorder
	log         *syncBuffer
}

func startTestAgent(t *testing.T, flags ...string) *liveAgent {
	t.Helper()
	logger, logs := testLogger(t)
	transcripts, dir := t.TempDir(), t.TempDir()
	argv := append([]string{testagentBin, "-transcripts", transcripts}, flags...)
	proc, err := startAgent(argv, nil, dir, &hostClient{log: logger}, logger)
	require.NoError(t, err)
	t.Cleanup(func() { proc.stop(5 * time.Second) })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, proc.initialize(ctx))
	require.True(t, proc.caps.AgentCapabilities.LoadSession, "testagent advertises loadSession")
	require.NotNil(t, proc.caps.AgentInfo)
	require.Equal(t, "tacp-testagent", proc.caps.AgentInfo.Name)

	sess, err := proc.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: dir, McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	rec := &tapRecorder{}
	proc.setTap(rec.tap)
	return &liveAgent{proc: proc, sid: sess.SessionId, transcripts: transcripts, tap: rec, log: logs}
}

func (a *liveAgent) prompt(t *testing.T, text string) acp.PromptResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := a.proc.conn.Prompt(ctx, acp.PromptRequest{SessionId: a.sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
	require.NoError(t, err)
	return resp
}

func TestAgentProcTapSeesUpdatesInOrderBeforePromptReturns(t *testing.T) {
	a := startTestAgent(t)
	resp := a.prompt(t, "/chunks 5 every 1ms")
	seen := a.tap.snapshot() // no waiting: the tap runs before the SDK sees a line
	require.Equal(t, acp.StopReasonEndTurn, resp.StopReason)

	ups := decodeUpdates(t, seen)
	require.Len(t, ups, 5)
	for i, u := range ups {
		require.Equal(t, string(a.sid), u.SessionID)
		require.Equal(t, "agent_message_chunk", u.Update.Kind)
		require.Equal(t, fmt.Sprintf("chunk %d\n", i+1), u.Update.Content.Text)
	}
}

func TestAgentProcTapRelaysUnknownKindsByteForByte(t *testing.T) {
	a := startTestAgent(t)
	resp := a.prompt(t, "/unknown")
	require.Equal(t, acp.StopReasonEndTurn, resp.StopReason)

	seen := a.tap.snapshot()
	require.Len(t, seen, 1)
	want := `{"sessionId":"` + string(a.sid) + `","update":{"payload":{"x":1},"sessionUpdate":"tacp_custom_kind"}}`
	require.Equal(t, want, string(seen[0]), "the raw params, unchanged")

	// The agent journals exactly the params it wrote on the wire.
	transcript, err := os.ReadFile(filepath.Join(a.transcripts, string(a.sid)+".jsonl"))
	require.NoError(t, err)
	var written string
	for line := range strings.Lines(string(transcript)) {
		if strings.Contains(line, "tacp_custom_kind") {
			written = strings.TrimSuffix(line, "\n")
		}
	}
	require.Equal(t, written, string(seen[0]))
}

func TestAgentProcPermissionFailsClosed(t *testing.T) {
	a := startTestAgent(t)
	resp := a.prompt(t, "/permission edit")
	require.Equal(t, acp.StopReasonEndTurn, resp.StopReason)

	ups := decodeUpdates(t, a.tap.snapshot())
	var kinds []string
	for _, u := range ups {
		kinds = append(kinds, u.Update.Kind)
	}
	require.Equal(t, []string{"tool_call", "tool_call_update", "agent_message_chunk"}, kinds)
	require.Equal(t, "failed", ups[1].Update.Status, "a rejected tool call fails")
	require.Equal(t, []string{"permission: selected reject"}, messageTexts(ups))
	require.Contains(t, a.log.String(), "rejecting")
}

func TestAgentProcTapOffDropsUpdates(t *testing.T) {
	a := startTestAgent(t)
	a.proc.setTap(nil)
	a.prompt(t, "/chunks 3 every 1ms")
	require.Empty(t, a.tap.snapshot())

	a.proc.setTap(a.tap.tap)
	a.prompt(t, "/chunks 2 every 1ms")
	require.Equal(t, []string{"chunk 1\n", "chunk 2\n"}, messageTexts(decodeUpdates(t, a.tap.snapshot())))
}

func TestAgentProcStopEndsTheProcess(t *testing.T) {
	a := startTestAgent(t)
	require.True(t, a.proc.alive())
	a.proc.stop(5 * time.Second)
	require.False(t, a.proc.alive())
	require.Error(t, a.proc.exitErr())
	select {
	case <-a.proc.conn.Done():
	case <-time.After(patience):
		t.Fatal("the ACP connection is still open after stop")
	}
}

func TestAgentProcStopKillsAnAgentThatIgnoresIt(t *testing.T) {
	t.Setenv(helperEnv, "stubborn")
	logger, _ := testLogger(t)
	proc, err := startAgent([]string{os.Args[0]}, nil, t.TempDir(), &hostClient{log: logger}, logger)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	require.NoError(t, proc.initialize(ctx)) // it has ignored SIGINT once it answers
	require.True(t, proc.alive())

	proc.stop(200 * time.Millisecond)
	require.False(t, proc.alive())
	require.ErrorContains(t, proc.exitErr(), "killed")
}

// The SDK starts reading the agent's stdout inside NewClientSideConnection and logs from
// that goroutine through a logger field it reads unguarded, so startAgent must not set it
// afterwards: under -race, an agent writing garbage must not trip the detector.
func TestStartAgentGarbageOutputHasNoRace(t *testing.T) {
	t.Setenv(helperEnv, "garbage")
	logger, _ := testLogger(t)
	proc, err := startAgent([]string{os.Args[0]}, nil, t.TempDir(), &hostClient{log: logger}, logger)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = proc.initialize(ctx) // garbage never answers
	proc.stop(5 * time.Second)
	require.False(t, proc.alive())
}

func TestStartAgentErrors(t *testing.T) {
	logger, _ := testLogger(t)
	_, err := startAgent(nil, nil, t.TempDir(), &hostClient{log: logger}, logger)
	require.Error(t, err)

	_, err = startAgent([]string{filepath.Join(t.TempDir(), "no-such-agent")}, nil, t.TempDir(), &hostClient{log: logger}, logger)
	require.ErrorContains(t, err, "no-such-agent")
}

func TestAgentProcInspect(t *testing.T) {
	const params = `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}`
	tests := []struct {
		name string
		line string
		want string // the params tapped; "" means none
	}{
		{"notification", `{"jsonrpc":"2.0","method":"session/update","params":` + params + "}\n", params},
		{"notification without newline", `{"jsonrpc":"2.0","method":"session/update","params":` + params + "}", params},
		{"params keep their spacing and key order", `{"method" : "session/update", "params" : { "z" : 1 , "a" : [ 2 ] } }` + "\n", `{ "z" : 1 , "a" : [ 2 ] }`},
		{"params before method", `{"params":{"k":"v"},"method":"session/update","jsonrpc":"2.0"}`, `{"k":"v"}`},
		{"garbage", "not json at all\n", ""},
		{"garbage naming the method", `"session/update" but not json` + "\n", ""},
		{"truncated", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":`, ""},
		{"empty line", "\n", ""},
		{"request with a numeric id", `{"jsonrpc":"2.0","id":7,"method":"session/update","params":` + params + "}\n", ""},
		{"request with a string id", `{"jsonrpc":"2.0","id":"a","method":"session/update","params":` + params + "}\n", ""},
		{"other method mentioning it in a string", `{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"note":"session/update"}}` + "\n", ""},
		{"other notification mentioning it in a string", `{"jsonrpc":"2.0","method":"session/cancel","params":{"note":"session/update"}}` + "\n", ""},
		{"response whose result names it", `{"jsonrpc":"2.0","id":1,"result":{"method":"session/update","params":{}}}` + "\n", ""},
		{"method in another case", `{"jsonrpc":"2.0","method":"Session/Update","params":{}}` + "\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &agentProc{}
			var rec tapRecorder
			p.setTap(rec.tap)
			p.inspect([]byte(tt.line))
			got := rec.snapshot()
			if tt.want == "" {
				require.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			require.Equal(t, tt.want, string(got[0]))
		})
	}
}

func TestAgentProcInspectWithoutTap(t *testing.T) {
	p := &agentProc{}
	require.NotPanics(t, func() { p.inspect([]byte(`{"method":"session/update","params":{}}`)) })
	var rec tapRecorder
	p.setTap(rec.tap)
	p.setTap(nil)
	p.inspect([]byte(`{"method":"session/update","params":{}}`))
	require.Empty(t, rec.snapshot())
}

// A session/load's replay goes to the replay sink up to the agent's answer, and the tap gets
// what follows it, line by line in wire order.
func TestAgentProcReplayEndsAtTheAgentsAnswer(t *testing.T) {
	p := &agentProc{}
	var live, replay tapRecorder
	p.setTap(live.tap)
	end := p.replayUntilAnswer(replay.tap)
	for _, line := range []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"n":1}}`,
		`{"jsonrpc":"2.0","id":4,"method":"session/request_permission","params":{}}`, // a request, not an answer
		`{"jsonrpc":"2.0","method":"session/update","params":{"n":2}}`,
		`{"jsonrpc":"2.0","id":3,"result":{}}`, // the answer to session/load
		`{"jsonrpc":"2.0","method":"session/update","params":{"n":3}}`,
	} {
		p.inspect([]byte(line))
	}
	require.Equal(t, []json.RawMessage{json.RawMessage(`{"n":1}`), json.RawMessage(`{"n":2}`)}, replay.snapshot())
	require.Equal(t, []json.RawMessage{json.RawMessage(`{"n":3}`)}, live.snapshot())
	end() // after the answer: a no-op

	// An error answer ends it too, and so does end when no answer came.
	end = p.replayUntilAnswer(replay.tap)
	p.inspect([]byte(`{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"no"}}`))
	p.inspect([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"n":4}}`))
	end()
	end = p.replayUntilAnswer(replay.tap)
	end()
	p.inspect([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"n":5}}`))
	require.Len(t, replay.snapshot(), 2)
	require.Len(t, live.snapshot(), 3)
}

// The method name is a JSON string, which an encoder may legally write with escapes (PHP's
// json_encode writes "session\/update" by default). The SDK decodes such a line as a
// session/update; the tap must capture it too, or every update of that agent is lost.
func TestAgentProcInspectEscapedMethodName(t *testing.T) {
	for _, method := range []string{`session\/update`, `session\u002fupdate`, `\u0073ession/update`} {
		line := `{"jsonrpc":"2.0","method":"` + method + `","params":{"k":1}}` + "\n"
		var m struct{ Method string }
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		require.Equal(t, acp.ClientMethodSessionUpdate, m.Method, "the line is a session/update")

		p := &agentProc{}
		var rec tapRecorder
		p.setTap(rec.tap)
		p.inspect([]byte(line))
		require.Len(t, rec.snapshot(), 1, "method %s", method)
	}
}

func TestAgentProcPumpForwardsEveryLineUnchanged(t *testing.T) {
	lines := []string{
		`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}` + "\n",
		`{"jsonrpc":"2.0","method":"session/update","params":{"n":1}}` + "\n",
		"garbage\n",
		`{"jsonrpc":"2.0","method":"session/update","params":{"n":"` + strings.Repeat("y", 200<<10) + `"}}` + "\n",
		"\n",
		`{"jsonrpc":"2.0","method":"session/update","params":{"n":3}}`, // no newline at EOF
	}
	p := &agentProc{}
	var rec tapRecorder
	p.setTap(rec.tap)
	pr, pw := io.Pipe()
	go p.pump(strings.NewReader(strings.Join(lines, "")), pw)

	got, err := io.ReadAll(pr)
	require.NoError(t, err, "EOF from the agent is a clean EOF to the SDK")
	require.Equal(t, strings.Join(lines, ""), string(got))
	tapped := rec.snapshot()
	require.Len(t, tapped, 3)
	require.Equal(t, `{"n":1}`, string(tapped[0]))
	require.Len(t, tapped[1], len(`{"n":""}`)+200<<10)
	require.Equal(t, `{"n":3}`, string(tapped[2]))
}

func TestAgentProcPumpStopsWhenTheSDKStopsReading(t *testing.T) {
	p := &agentProc{}
	pr, pw := io.Pipe()
	stdout, agent := io.Pipe()
	done := make(chan struct{})
	go func() { defer close(done); p.pump(stdout, pw) }()
	go func() { _, _ = agent.Write([]byte("{}\n{}\n")) }()

	require.NoError(t, pr.Close()) // the SDK side goes away
	select {
	case <-done:
	case <-time.After(patience):
		t.Fatal("pump kept running after its reader closed")
	}
	_ = agent.Close()
}

func TestReadLine(t *testing.T) {
	long := strings.Repeat("z", 100)
	r := bufio.NewReaderSize(strings.NewReader("a\n"+long+"\n\nlast"), 16) // lines longer than the buffer
	var got []string
	for {
		line, err := readLine(r)
		if len(line) > 0 {
			got = append(got, string(line))
		}
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
	}
	require.Equal(t, []string{"a\n", long + "\n", "\n", "last"}, got)
}

func TestReadLineRefusesLinesOverMaxLineBytes(t *testing.T) {
	in := strings.Repeat("w", maxLineBytes+1) + "\nnext\n"
	r := bufio.NewReaderSize(strings.NewReader(in), 64<<10)
	line, err := readLine(r)
	require.ErrorContains(t, err, "over")
	require.Nil(t, line)

	at := strings.Repeat("w", maxLineBytes-1) + "\n"
	line, err = readLine(bufio.NewReaderSize(strings.NewReader(at), 64<<10))
	require.NoError(t, err)
	require.Len(t, line, maxLineBytes, "a line of exactly maxLineBytes is read")
}

// pumpRunning reports whether a pump goroutine is alive.
func pumpRunning() bool {
	buf := make([]byte, 1<<20)
	return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("(*agentProc).pump"))
}

// A line the SDK cannot read (over its 10 MiB scanner limit) ends the ACP connection. Once
// the agent is stopped nothing of it may be left running, whichever side refused the line.
func TestAgentProcLineOverTheSDKLimit(t *testing.T) {
	require.Eventually(t, func() bool { return !pumpRunning() }, patience, 10*time.Millisecond,
		"no pump left over from earlier tests")
	t.Setenv(helperEnv, "bigline")
	logger, _ := testLogger(t)
	proc, err := startAgent([]string{os.Args[0]}, nil, t.TempDir(), &hostClient{log: logger}, logger)
	require.NoError(t, err)
	defer proc.stop(5 * time.Second)
	var rec tapRecorder
	proc.setTap(rec.tap)

	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	err = proc.initialize(ctx) // the helper never answers: the line ends the connection
	require.Error(t, err)
	select {
	case <-proc.conn.Done():
	case <-time.After(patience):
		t.Fatal("the connection survived the line")
	}

	proc.stop(5 * time.Second)
	require.False(t, proc.alive())
	require.Eventually(t, func() bool { return !pumpRunning() }, patience, 10*time.Millisecond,
		"pump outlived the agent process")
}

// An agent started with Host.AgentNice runs at it, every thread, and its children with it;
// the worker's threads keep their own.
func TestStartAgentWithANiceLowersTheAgentsGroupOnly(t *testing.T) {
	logger, _ := testLogger(t)
	dir := t.TempDir()
	proc, err := startAgent([]string{testagentBin, "-spawn-child", "-transcripts", dir}, nil, dir, &hostClient{log: logger, nice: 7}, logger)
	require.NoError(t, err)
	defer proc.stop(5 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	require.NoError(t, proc.initialize(ctx))
	pid := proc.cmd.Process.Pid
	require.Eventually(t, func() bool { return len(proctree.Descendants(pid)) > 0 }, patience, 10*time.Millisecond, "the agent's child")
	require.NotEmpty(t, proctree.ThreadNices(pid))
	for _, p := range append([]int{pid}, proctree.Descendants(pid)...) {
		for _, n := range proctree.ThreadNices(p) {
			require.Equal(t, 7, n, "a thread of the agent's group")
		}
	}
	for _, n := range proctree.ThreadNices(os.Getpid()) {
		require.Equal(t, 0, n, "a thread of the worker")
	}
}

// tacp asks every agent for ACP protocol 1, whatever the SDK's newest is: claude-agent-acp
// and codex-acp speak a draft 2 to a client that asks for it.
func TestAgentIsAskedForProtocolOne(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "initialize.json")
	t.Setenv(helperEnv, "record")
	t.Setenv("TACP_TEST_RECORD", rec)
	logger, _ := testLogger(t)
	proc, err := startAgent([]string{os.Args[0]}, nil, t.TempDir(), &hostClient{log: logger}, logger)
	require.NoError(t, err)
	defer proc.stop(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	require.NoError(t, proc.initialize(ctx))
	b, err := os.ReadFile(rec)
	require.NoError(t, err)
	var req struct {
		Method string `json:"method"`
		Params struct {
			ProtocolVersion int `json:"protocolVersion"`
		} `json:"params"`
	}
	require.NoError(t, json.Unmarshal(b, &req), "%s", b)
	require.Equal(t, "initialize", req.Method)
	require.Equal(t, 1, req.Params.ProtocolVersion)
}

// A worker's probe learns the agent's offer in a new session (modes, config options) by
// opening one, so an editor's session/new has a mode picker before any agent has run; a
// profile whose mode table asks puts the offer in its asking mode first.
func TestProbeLearnsTheAgentsOfferInANewSession(t *testing.T) {
	plain, err := ParseProfileFlag("plain=" + testagentBin + " -settings")
	require.NoError(t, err)
	asking, err := ParseProfileFlag("asking=" + testagentBin + " -settings")
	require.NoError(t, err)
	asking.Modes = &ModeTable{Ask: "plan", Asking: []string{"plan"}}
	profiles, err := NewProfiles([]Profile{plain, asking}, "plain")
	require.NoError(t, err)
	logger, _ := testLogger(t)
	r := &Runner{Trust: &Trust{Profiles: profiles}, Logger: logger}
	require.Empty(t, r.ProbeProfiles(context.Background(), t.TempDir()))
	for _, info := range profiles.Infos() {
		require.NotNil(t, info.Settings, info.Name)
		require.Len(t, info.Settings.Modes, 3, info.Name)
		require.Len(t, info.Settings.ConfigOptions, 2, info.Name)
		want := map[string]string{"plain": "default", "asking": "plan"}[info.Name]
		require.Equal(t, want, info.Settings.CurrentModeID, info.Name)
	}
}

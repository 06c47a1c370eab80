// Package e2e runs tacp end to end: the real Temporal server in-process (devserver), the
// real worker wiring, the real testagent binary over stdio, and the real starter CLI. It is
// the one test package besides bench/ that links the server.
package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/devserver"
	"github.com/tacp-dev/tacp/internal/freeport"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/testagent/agent"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

// Shared by every test: one server, one worker, the built binaries.
var (
	srv        *devserver.Server
	tc         client.Client
	sc         *tacpclient.Client
	binDir     string
	testagent  string
	starterBin string
	dataDir    string
	worker     *tacpworker.Worker
)

func TestMain(m *testing.M) {
	if os.Getenv(workerProcessEnv) != "" {
		os.Exit(runWorkerProcess())
	}
	os.Exit(runMain(m))
}

// starterSchemaLogEnv is starter/cli's SchemaLogEnv (a schemacheck build's only).
const starterSchemaLogEnv = "STARTER_ACP_SCHEMA_LOG"

func runMain(m *testing.M) (code int) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped under -short (the embedded server, the real agents and a browser); go test ./e2e runs it")
		return 0
	}
	ctx := context.Background()
	var err error
	if binDir, err = os.MkdirTemp("", "tacp-e2e-"); err != nil {
		panic(err)
	}
	defer os.RemoveAll(binDir)
	dataDir = filepath.Join(binDir, "data")
	testagent = filepath.Join(binDir, "testagent")
	starterBin = filepath.Join(binDir, "starter")
	// The starter with the schemacheck tag: `starter acp` holds what it sends editors to the
	// ACP schema (starter/cli/acp_schemacheck.go); the tests' editors are held below.
	if out, err := exec.Command("go", "build", "-tags", "schemacheck", "-o", binDir, "../testagent", "../testagent/mcpask", "../starter").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build binaries: %v\n%s", err, out)
		return 1
	}
	// TACP_E2E_STARTER runs the tests against another starter binary, e.g. one built with
	// -race to check the gateway and the deck under the real clients.
	if bin := os.Getenv("TACP_E2E_STARTER"); bin != "" {
		starterBin = bin
	}
	// With the Temporal Web UI: the operators' browser test reads it (e2e/operators_test.go).
	uiPort, err := freeport.Take("127.0.0.1", 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ui port:", err)
		return 1
	}
	if srv, err = devserver.Start(ctx, devserver.Options{UIPort: uiPort[0]}); err != nil {
		fmt.Fprintln(os.Stderr, "start server:", err)
		return 1
	}
	defer func() { _ = srv.Stop() }()
	if tc, err = srv.NewClient(ctx, client.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	defer tc.Close()
	sc = tacpclient.NewClient(tc, signals.DefaultTaskQueue)
	// Every test agent of the suite, in this process's workers and in the worker processes
	// tests start, holds what it is sent to the ACP schema (agent.SchemaLogEnv).
	// So does every `starter acp` the tests start, for what it sends its editor.
	agentLog := filepath.Join(binDir, "agent-schema-violations.log")
	editorLog := filepath.Join(binDir, "editor-schema-violations.log")
	if err := errors.Join(os.Setenv(agent.SchemaLogEnv, agentLog), os.Setenv(starterSchemaLogEnv, editorLog)); err != nil {
		panic(err)
	}
	defer func() {
		for log, to := range map[string]string{agentLog: "a test agent", editorLog: "an editor"} {
			if b, err := os.ReadFile(log); err == nil && len(b) > 0 {
				fmt.Fprintf(os.Stderr, "FAIL: what tacp sent %s does not hold to the ACP v1 schema:\n%s", to, b)
				code = 1
			}
		}
	}()
	worker, err = tacpworker.Start(tc, tacpworker.Options{
		Profiles:       suiteProfiles(),
		WorkspaceRoots: suiteRoots(),
		DataDir:        dataDir,
		// A short grace keeps the kill backstop inside the tests' patience.
		CancelGrace: 5 * time.Second,
		// The suite's parallel sessions each keep a test agent (~5 MiB): the default cap,
		// sized for real agents, would evict them between a test's turns.
		MaxAgents: 64,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	defer worker.Stop()
	return m.Run()
}

// session returns a fresh session id for t.
func session(t *testing.T) string {
	return fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "."), time.Now().UnixNano())
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// prompt sends text to session id, creating it with cfg.
func prompt(t *testing.T, cfg signals.SessionConfig, text string) signals.PromptResult {
	t.Helper()
	res, err := sc.Prompt(ctxFor(t, 30*time.Second), cfg, signals.PromptRequest{Text: text, ClientMessageID: signals.NewID()})
	require.NoError(t, err)
	return res
}

// waitFor polls the journal until a event satisfies match and returns all events so far.
func waitFor(t *testing.T, id string, match func(signals.Event) bool) []signals.Event {
	t.Helper()
	var all []signals.Event
	found := false
	err := sc.Watch(ctxFor(t, 90*time.Second), id, 0, func(ev signals.Event) bool {
		all = append(all, ev)
		found = match(ev)
		return !found
	})
	require.NoError(t, err)
	require.True(t, found)
	return all
}

// turnEnd waits for the terminal event of turn and returns the whole journal up to it.
func turnEnd(t *testing.T, id string, turn int64) []signals.Event {
	return waitFor(t, id, func(ev signals.Event) bool { return ev.TurnID == turn && signals.IsTerminal(ev.Kind) })
}

// waitRunning waits until turn is the live, running turn and returns the status.
func waitRunning(t *testing.T, id string, turn int64) signals.Status {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	for {
		st, err := sc.Status(ctx, id)
		require.NoError(t, err)
		if st.State == signals.StateRunning && st.TurnID == turn && st.AgentSessionID != "" {
			return st
		}
		if st.TurnID > turn {
			t.Fatalf("turn %d ended before it was seen running (the test's turn is too short): %+v", turn, st)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("turn %d never ran: %+v", turn, st)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func allEvents(t *testing.T, id string) []signals.Event {
	t.Helper()
	var out []signals.Event
	var after int64
	for {
		res, err := sc.Events(ctxFor(t, 10*time.Second), id, after, 0)
		require.NoError(t, err)
		out = append(out, res.Events...)
		if len(res.Events) == 0 {
			return out
		}
		after = res.Events[len(res.Events)-1].Seq
	}
}

// checkInvariants asserts the journal invariants of contract §5: seq contiguous from 1 and
// exactly one terminal event per turn.started, after it.
func checkInvariants(t *testing.T, evs []signals.Event) {
	t.Helper()
	started := map[int64]int{}
	terminal := map[int64]int{}
	for i, ev := range evs {
		require.Equal(t, int64(i+1), ev.Seq, "seq is contiguous from 1")
		switch {
		case ev.Kind == signals.EventTurnStarted:
			started[ev.TurnID]++
		case signals.IsTerminal(ev.Kind):
			require.Equal(t, 1, started[ev.TurnID], "terminal event of turn %d follows its turn.started", ev.TurnID)
			terminal[ev.TurnID]++
		}
	}
	for turn, n := range started {
		require.Equal(t, 1, n, "turn %d started once", turn)
		require.LessOrEqual(t, terminal[turn], 1, "turn %d has at most one terminal event", turn)
	}
}

// agentTexts returns the text of every agent_message_chunk of turn, in order.
func agentTexts(t *testing.T, evs []signals.Event, turn int64) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		if ev.Kind != signals.EventAgentUpdate || ev.TurnID != turn {
			continue
		}
		var n struct {
			Update struct {
				Kind    string          `json:"sessionUpdate"`
				Content json.RawMessage `json:"content"`
			} `json:"update"`
		}
		require.NoError(t, json.Unmarshal(ev.Data, &n))
		if n.Update.Kind == "agent_message_chunk" {
			var c struct {
				Text string `json:"text"`
			}
			require.NoError(t, json.Unmarshal(n.Update.Content, &c))
			out = append(out, c.Text)
		}
	}
	return out
}

func terminalData(t *testing.T, evs []signals.Event) (string, map[string]any) {
	t.Helper()
	last := evs[len(evs)-1]
	var d map[string]any
	require.NoError(t, json.Unmarshal(last.Data, &d))
	return last.Kind, d
}

func withoutAgentUpdates(evs []signals.Event) []signals.Event {
	var out []signals.Event
	for _, ev := range evs {
		if ev.Kind != signals.EventAgentUpdate {
			out = append(out, ev)
		}
	}
	return out
}

// updatesInHistory counts the update events in a session's history whose payload mentions
// text: a rejected update must have none.
func updatesInHistory(t *testing.T, id, text string) int {
	t.Helper()
	iter := tc.GetWorkflowHistory(ctxFor(t, 10*time.Second), signals.SessionWorkflowID(id), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		if a := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil && strings.Contains(a.String(), text) {
			n++
		}
		if a := ev.GetWorkflowExecutionUpdateAdmittedEventAttributes(); a != nil && strings.Contains(a.String(), text) {
			n++
		}
	}
	return n
}

// testAgentCmd is the testagent command line sharing the suite's transcripts, with extra
// flags (e.g. "-steering").
// Agent profiles of the suite's workers (contract §10: a session names one, never a command).
const (
	profileSteering = "steering"
	// profileSettings offers claude-agent-acp's modes, config options and slash commands.
	profileSettings = "settings"
	// Misbehaving agents (e2e/host_test.go).
	profileHangs   = "hangs"
	profileGarbage = "garbage"
	profileExits   = "exits"
	profileMissing = "missing"
)

// suiteProfiles are the agents the suite's workers may run: the test agent as the default
// and with the steering extension, and the misbehaving agents of host_test.go.
func suiteProfiles() []activities.Profile {
	return []activities.Profile{
		{Name: activities.DefaultProfile, Command: testAgentCmd()},
		{Name: profileSteering, Command: testAgentCmd("-steering")},
		{Name: profileSettings, Command: testAgentCmd("-settings", "-commands")},
		{Name: profileHangs, Command: "sleep 600"},
		{Name: profileGarbage, Command: `sh -c 'while true; do echo garbage; sleep 0.1; done'`},
		{Name: profileExits, Command: "sh -c 'exit 3'"},
		{Name: profileMissing, Command: "/nonexistent/agent"},
	}
}

// suiteRoots are the workspace roots of the suite's workers: the per-session folders, and
// the folder where the tests' editors and ACP clients open their projects (projectDir).
func suiteRoots() []string {
	return []string{filepath.Join(dataDir, "workspaces"), filepath.Join(binDir, "projects")}
}

// projectDir is a fresh project folder inside the suite's editor root: the cwd an ACP
// client (acpx, the SDK's example client) opens, which the gateway passes as the workspace.
func projectDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(filepath.Join(binDir, "projects"), "p-")
	require.NoError(t, err)
	return dir
}

// editorCwd is the cwd the acp-go-sdk clients of gateway_test.go send: one shared project.
func editorCwd() string { return filepath.Join(binDir, "projects", "editor") }

func testAgentCmd(flags ...string) string {
	cmd := testagent
	for _, f := range flags {
		cmd += " " + f
	}
	return fmt.Sprintf("%s -transcripts %s", cmd, filepath.Join(dataDir, "transcripts"))
}

// extraWorker starts an in-process worker on a task queue of its own, polling with c, and
// returns it with a session client on that queue. opts.TaskQueue, DataDir and Agent default
// to a fresh queue, the suite's data dir and the testagent.
func extraWorker(t *testing.T, c client.Client, opts tacpworker.Options) (*tacpworker.Worker, *tacpclient.Client) {
	t.Helper()
	if opts.TaskQueue == "" {
		opts.TaskQueue = "tacp-extra-" + signals.NewID()[:8]
	}
	if opts.DataDir == "" {
		opts.DataDir = dataDir
	}
	if opts.Agent == "" && opts.Profiles == nil {
		opts.Profiles = suiteProfiles()
	}
	if opts.WorkspaceRoots == nil {
		opts.WorkspaceRoots = suiteRoots()
	}
	w, err := tacpworker.Start(c, opts)
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	return w, tacpclient.NewClient(c, opts.TaskQueue)
}

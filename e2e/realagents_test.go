package e2e

// The real coding agents behind tacp (issue 17): claude-agent-acp, codex-acp, Gemini CLI
// and OpenCode, installed by .ci/peers, each run by a worker of its own that the operator configured with the
// agent's command line and environment (the session names no agent), each agent's model a
// fake one (internal/testkit/fakemodel) scripted by the prompt. Each agent gets the same flows the
// test agent is held to: a reply streams; a write is asked, and performed only when
// approved; allow_all lets it through unasked; cancel mid-stream, then a prompt answered in
// its own turn; two turns in one conversation; usage summed; a steer delivered into the
// running turn. What the agents do without tacp is pinned in realagents_direct_test.go.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/internal/proctree"
	"github.com/tacp-dev/tacp/internal/testkit/fakemodel"
	"github.com/tacp-dev/tacp/internal/testkit/seaweedfs"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

// realAgentWorker is one real agent behind a tacp worker of its own.
type realAgentWorker struct {
	agent   fakemodel.Agent
	fm      *fakemodel.Server
	sc      *tacpclient.Client
	dataDir string
	// cmdline is the agent's command line, for worker processes of the same agent; bin and
	// env the same, for a direct pipe.
	cmdline string
	bin     string
	env     []string
}

// startRealAgentWorker starts a's fake model and a worker on a queue of its own whose default
// profile is a's well-known profile (the README's `-agent.profile claude`, …), its
// executable the one .ci/peers installed and its environment the fake model's on top.
func startRealAgentWorker(t *testing.T, a fakemodel.Agent) *realAgentWorker {
	t.Helper()
	return startRealAgentWorkerWith(t, a, nil)
}

// startRealAgentWorkerWith is startRealAgentWorker with the worker's options changed by more.
func startRealAgentWorkerWith(t *testing.T, a fakemodel.Agent, more func(*tacpworker.Options)) *realAgentWorker {
	t.Helper()
	fm, bin, env := realAgentEnv(t, a)
	dataDir := t.TempDir()
	cmdline := a.CommandLine(filepath.Dir(bin), env) // for worker processes (TACP_E2E_AGENT)
	profile, ok := activities.WellKnownProfile(a.Name)
	require.True(t, ok, "a well-known profile for %s", a.Name)
	profile.Command = strings.Join(append([]string{strconv.Quote(bin)}, a.Args...), " ")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		profile.Env[k] = v
	}
	opts := tacpworker.Options{
		// The worker's own account of the agents it runs (starts, evictions, kills).
		Logger:         slog.New(slog.NewTextHandler(&testLog{t: t, prefix: "worker: "}, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Profiles:       []activities.Profile{profile},
		WorkspaceRoots: []string{filepath.Join(dataDir, "workspaces")},
		DataDir:        dataDir,
		// Real agents cost ~100-300 MiB each: the sessions of this test keep two alive.
		MaxAgents:   2,
		CancelGrace: 5 * time.Second,
		InitTimeout: 2 * time.Minute,
	}
	if more != nil {
		more(&opts)
	}
	_, qc := extraWorker(t, tc, opts)
	return &realAgentWorker{agent: a, fm: fm, sc: qc, dataDir: dataDir, cmdline: cmdline, bin: bin, env: env}
}

// workspace is where the worker runs session id's agent: its default workspace.
func (w *realAgentWorker) workspace(id string) string {
	return filepath.Join(w.dataDir, "workspaces", id)
}

// prompt sends text to session cfg on the agent's queue and returns the turn id.
func (w *realAgentWorker) prompt(t *testing.T, cfg signals.SessionConfig, text string) int64 {
	t.Helper()
	res, err := w.sc.Prompt(ctxFor(t, time.Minute), cfg, signals.PromptRequest{Text: text, ClientMessageID: signals.NewID()})
	require.NoError(t, err)
	return res.TurnID
}

// endedWith waits for turn's terminal event and requires it to be turn.ended with one of
// reasons; it returns the journal so far.
func endedWith(t *testing.T, id string, turn int64, reasons ...string) []signals.Event {
	t.Helper()
	evs := turnEnd(t, id, turn)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind, "turn %d: %v", turn, data)
	require.Contains(t, reasons, data["stop_reason"], "turn %d", turn)
	return evs
}

// optionOf returns the id of req's option of kind.
func optionOf(t *testing.T, req signals.PermissionRequestedData, kind string) string {
	t.Helper()
	for _, o := range req.Options {
		if o.Kind == kind {
			return o.OptionID
		}
	}
	t.Fatalf("no %s option in %+v", kind, req.Options)
	return ""
}

// resolutions returns the permission.resolved events of turn.
func resolutions(t *testing.T, evs []signals.Event, turn int64) []signals.PermissionResolution {
	t.Helper()
	var out []signals.PermissionResolution
	for _, ev := range evs {
		if ev.Kind == signals.EventPermissionResolved && ev.TurnID == turn {
			var r signals.PermissionResolution
			require.NoError(t, json.Unmarshal(ev.Data, &r))
			out = append(out, r)
		}
	}
	return out
}

func countKindIn(evs []signals.Event, kind string, turn int64) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind && ev.TurnID == turn {
			n++
		}
	}
	return n
}

func TestRealAgent(t *testing.T) {
	for _, a := range realAgents {
		t.Run(a.Name, func(t *testing.T) {
			// One agent at a time: under the load of two, a turn attempt's heartbeat can be
			// late, the retry on the same worker shuts down the agent the late attempt still
			// holds, and that attempt's release shuts it down again: the batcher's second
			// close panics and takes the test binary down (the known double close).
			w := startRealAgentWorker(t, a)
			t.Run("ReplyStreamsAndEndsEndTurn", func(t *testing.T) { realReply(t, w) })
			t.Run("EveryUpdateOfTheFirstTurnIsJournaled", func(t *testing.T) { realUpdatesJournaled(t, w) })
			t.Run("WriteIsAskedApprovedPerformedDeniedNot", func(t *testing.T) { realPermission(t, w) })
			t.Run("AllowAllPerformsWithoutAsking", func(t *testing.T) { realAllowAll(t, w) })
			t.Run("ASelfDecidingModeIsThePolicysToAllow", func(t *testing.T) { realModes(t, w) })
			t.Run("CancelMidStreamThenTheNextPromptInItsOwnTurn", func(t *testing.T) { realCancel(t, w) })
			t.Run("TwoTurnsShareTheConversationAndUsageIsSummed", func(t *testing.T) { realConversation(t, w) })
			t.Run("SteerIsDeliveredIntoTheRunningTurn", func(t *testing.T) { realSteer(t, w) })
			t.Run("WorkerKilledMidTurnTheTurnFinishesOnAnotherWorker", func(t *testing.T) { realFailover(t, w) })
			t.Run("WorkerStoppedMidTurnShutsDownCleanly", func(t *testing.T) { realSIGTERM(t, w) })
			if a.Name == fakemodel.Claude.Name || a.Name == fakemodel.Codex.Name {
				// Files follow whatever wrote them; two agents' edit and shell tools show it.
				t.Run("FilesFollowTheSessionToAWorkerWithAnotherDisk", func(t *testing.T) { realFilesFollow(t, w) })
			}
		})
	}
}

func realReply(t *testing.T, w *realAgentWorker) {
	id := session(t)
	turn := w.prompt(t, signals.SessionConfig{SessionID: id}, "reply: the quick brown fox jumps over the lazy dog")
	evs := endedWith(t, id, turn, "end_turn")
	chunks := agentTexts(t, evs, turn)
	require.Equal(t, "the quick brown fox jumps over the lazy dog", strings.Join(chunks, ""))
	require.GreaterOrEqual(t, len(chunks), 3, "the reply streamed in chunks")
	checkInvariants(t, allEvents(t, id))
}

func realPermission(t *testing.T, w *realAgentWorker) {
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	ctx := ctxFor(t, 3*time.Minute)
	ws := w.workspace(id)

	approved := filepath.Join(ws, "approved.txt")
	turn := w.prompt(t, cfg, "tool: write "+approved+" approved content")
	req := permissionRequestedIn(t, id, turn)
	require.NoFileExists(t, approved, "nothing written before the answer")
	_, err := w.sc.PermissionRespond(ctx, id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: optionOf(t, req, "allow_once")})
	require.NoError(t, err)
	evs := endedWith(t, id, turn, "end_turn")
	got, err := os.ReadFile(approved)
	require.NoError(t, err, "the approved write happened")
	require.Equal(t, "approved content", strings.TrimSpace(string(got)))
	require.Equal(t, []signals.PermissionResolution{{RequestID: req.RequestID, Outcome: "selected", OptionID: optionOf(t, req, "allow_once"), DecidedBy: "user"}}, resolutions(t, evs, turn))
	require.Contains(t, strings.Join(agentTexts(t, evs, turn), ""), "tool result: ")

	denied := filepath.Join(ws, "denied.txt")
	turn = w.prompt(t, cfg, "tool: write "+denied+" denied content")
	req = permissionRequestedIn(t, id, turn)
	_, err = w.sc.PermissionRespond(ctx, id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: optionOf(t, req, "reject_once")})
	require.NoError(t, err)
	// Codex's reject option ("No, and tell Codex what to do differently") ends the turn
	// cancelled; Claude Code tells the model and goes on.
	endedWith(t, id, turn, "end_turn", "cancelled")
	require.NoFileExists(t, denied, "the denied write did not happen")

	// A command is asked too, and denied it does not run.
	ran := filepath.Join(ws, "ran.txt")
	turn = w.prompt(t, cfg, "tool: bash echo ran > "+ran)
	req = permissionRequestedIn(t, id, turn)
	_, err = w.sc.PermissionRespond(ctx, id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: optionOf(t, req, "reject_once")})
	require.NoError(t, err)
	endedWith(t, id, turn, "end_turn", "cancelled")
	require.NoFileExists(t, ran, "the denied command did not run")
	checkInvariants(t, allEvents(t, id))
}

func realAllowAll(t *testing.T, w *realAgentWorker) {
	id := session(t)
	path := filepath.Join(w.workspace(id), "allowed.txt")
	turn := w.prompt(t, signals.SessionConfig{SessionID: id, Policy: signals.PolicyAllowAll}, "tool: write "+path+" allowed content")
	evs := endedWith(t, id, turn, "end_turn")
	got, err := os.ReadFile(path)
	require.NoError(t, err, "allow_all performed the write")
	require.Equal(t, "allowed content", strings.TrimSpace(string(got)))
	// The agent is in its asking mode under allow_all too (the session chose none of its
	// own): it asks, the policy answers at once, and the decision is in the journal.
	res := resolutions(t, evs, turn)
	require.Len(t, res, 1, "the agent asked once and the policy answered")
	require.Equal(t, signals.DecidedByPolicy, res[0].DecidedBy)
	require.Equal(t, 1, countKindIn(evs, signals.EventPermissionRequested, turn), "the request is journaled")
}

// selfDecidingMode is, per agent with modes, one in which it decides everything by itself.
var selfDecidingMode = map[string]string{"claude": "bypassPermissions", "codex": "agent-full-access", "gemini": "yolo"}

// realModes: the agent runs in its asking mode with no settings of its own; its
// self-deciding mode is refused under ask_for_risky, naming allow_all; after allow_all it is
// taken, and a write is performed with nobody asked.
func realModes(t *testing.T, w *realAgentWorker) {
	mode := selfDecidingMode[w.agent.Name]
	if mode == "" {
		t.Skipf("%s offers no modes: its profile's permission configuration asks (realPermission)", w.agent.Name)
	}
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	ctx := ctxFor(t, 3*time.Minute)
	endedWith(t, id, w.prompt(t, cfg, "reply: ready"), "end_turn")
	st, err := w.sc.Status(ctx, id)
	require.NoError(t, err)
	require.Equal(t, w.agent.AskingMode, st.AgentSettings.CurrentModeID)
	_, err = w.sc.SetMode(ctx, id, signals.SetModeRequest{ModeID: mode})
	rej, ok := rejection.As(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, signals.RejectForbidden, rej.Type)
	require.Contains(t, rej.Message, "allow_all")

	_, err = w.sc.SetPolicy(ctx, id, signals.SetPolicyRequest{Level: signals.PolicyAllowAll, By: "e2e"})
	require.NoError(t, err)
	_, err = w.sc.SetMode(ctx, id, signals.SetModeRequest{ModeID: mode})
	require.NoError(t, err)
	path := filepath.Join(w.workspace(id), "self-decided.txt")
	turn := w.prompt(t, cfg, "tool: write "+path+" decided")
	evs := endedWith(t, id, turn, "end_turn")
	require.FileExists(t, path)
	st, err = w.sc.Status(ctx, id)
	require.NoError(t, err)
	if w.agent.Name == fakemodel.GeminiCLI.Name {
		// Gemini CLI refuses its yolo and autoEdit in a folder it does not trust ("Cannot
		// enable privileged approval modes in an untrusted folder"): it stays in default,
		// asks, and the policy answers.
		require.Equal(t, w.agent.AskingMode, st.AgentSettings.CurrentModeID)
		for _, r := range resolutions(t, evs, turn) {
			require.Equal(t, signals.DecidedByPolicy, r.DecidedBy)
		}
		return
	}
	require.Zero(t, countKindIn(evs, signals.EventPermissionRequested, turn), "in %s nobody is asked", mode)
	require.Equal(t, mode, st.AgentSettings.CurrentModeID)
}

func realCancel(t *testing.T, w *realAgentWorker) {
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	turn := w.prompt(t, cfg, "slow: 600 tick")
	// Mid-stream: wait for the third chunk to reach the journal.
	chunks := 0
	waitFor(t, id, func(ev signals.Event) bool {
		if ev.Kind == signals.EventAgentUpdate && ev.TurnID == turn && strings.Contains(string(ev.Data), `"agent_message_chunk"`) {
			chunks++
		}
		return chunks >= 3
	})
	_, err := w.sc.Cancel(ctxFor(t, 30*time.Second), id, signals.CancelRequest{})
	require.NoError(t, err)
	evs := endedWith(t, id, turn, "cancelled")
	require.Less(t, len(agentTexts(t, evs, turn)), 600, "the stream was cut short")

	next := w.prompt(t, cfg, "reply: answered after the cancel")
	require.Equal(t, turn+1, next)
	evs = endedWith(t, id, next, "end_turn")
	require.Equal(t, "answered after the cancel", strings.Join(agentTexts(t, evs, next), ""), "the next turn has its own answer and nothing of the cancelled one")
	checkInvariants(t, allEvents(t, id))
}

func realConversation(t *testing.T, w *realAgentWorker) {
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	first := "reply: remember the word " + id
	t1 := w.prompt(t, cfg, first)
	endedWith(t, id, t1, "end_turn")
	t2 := w.prompt(t, cfg, "reply: second answer")
	evs := endedWith(t, id, t2, "end_turn")
	require.Equal(t, "second answer", strings.Join(agentTexts(t, evs, t2), ""))

	// The model's request for the second turn carried the first exchange.
	var second *fakemodel.Request
	var reported int
	for _, r := range w.fm.MainRequests() {
		if !r.Contains("user", first) {
			continue // another session's
		}
		reported += r.Usage.Input + r.Usage.Output
		if r.Contains("user", "reply: second answer") {
			second = &r
		}
	}
	require.NotNil(t, second, "the second prompt reached the model")
	require.True(t, second.Contains("assistant", "remember the word "+id), "the first reply is in the second request's history")

	if !w.agent.ReportsUsage {
		return // Gemini CLI reports usage only in _meta.quota: there is nothing to sum
	}
	// Usage: the session's total is the sum of its turns' usage, and of what the model
	// reported for them.
	var sum float64
	for _, ev := range evs {
		if ev.Kind == signals.EventUsageUpdated {
			var u struct {
				// Counters are numbers; the agent's usage_update gauges (context, cost) objects.
				Turn map[string]any `json:"turn"`
			}
			require.NoError(t, json.Unmarshal(ev.Data, &u))
			total, _ := u.Turn["totalTokens"].(float64)
			sum += total
		}
	}
	st, err := w.sc.Status(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	require.Positive(t, sum, "usage.updated journaled")
	require.EqualValues(t, sum, st.Usage["totalTokens"], "status.usage sums the turns")
	require.EqualValues(t, reported, st.Usage["totalTokens"], "the turns' usage is what the model reported")
}

func realSteer(t *testing.T, w *realAgentWorker) {
	id := session(t)
	turn := w.prompt(t, signals.SessionConfig{SessionID: id}, "slow: 50 tick")
	chunks := 0
	waitFor(t, id, func(ev signals.Event) bool {
		if ev.Kind == signals.EventAgentUpdate && ev.TurnID == turn && strings.Contains(string(ev.Data), `"agent_message_chunk"`) {
			chunks++
		}
		return chunks >= 2
	})
	st, err := w.sc.Status(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	_, err = w.sc.Steer(ctxFor(t, 30*time.Second), id, signals.SteerRequest{Text: "reply: steered answer", ExpectedTurnID: st.SteerToken})
	require.NoError(t, err)
	d := delivered(t, id, 1)[0]
	evs := turnEnd(t, id, turn)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind, "%v", data)
	require.Contains(t, strings.Join(agentTexts(t, evs, turn), ""), "steered answer", "the steer was answered inside the turn")
	steered := false
	for _, r := range w.fm.MainRequests() {
		steered = steered || r.Contains("user", "reply: steered answer")
	}
	require.True(t, steered, "the steer's text reached the model")
	if !w.agent.Steering {
		require.Equal(t, signals.HowInterrupted, d.How, "%s has no steering extension: tacp interrupts and continues", w.agent.Name)
		return
	}
	// Both agents take the steer's prompt as content blocks (and refuse a string with -32602:
	// TestRealAgentDirect), so it is injected into the running turn.
	require.Equal(t, signals.HowInjected, d.How, "%+v", d)
}

// alive returns the pids of pids that still run (zombies count as gone).
func alive(pids []int) []int {
	var out []int
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && !strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z") {
			out = append(out, p)
		}
	}
	return out
}

// realWorkerProcess starts a worker process of w's agent on queue.
func (w *realAgentWorker) realWorkerProcess(t *testing.T, queue string) *exec.Cmd {
	return startWorkerProcess(t, queue, "TACP_E2E_AGENT="+w.cmdline, "TACP_E2E_DATA="+w.dataDir)
}

func realFailover(t *testing.T, w *realAgentWorker) {
	queue := "tacp-real-failover-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	first := w.realWorkerProcess(t, queue)
	id := session(t)
	_, err := qc.Prompt(ctxFor(t, time.Minute), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "slow: 60 tick", ClientMessageID: "turn-1"})
	require.NoError(t, err)
	chunks := 0
	waitFor(t, id, func(ev signals.Event) bool {
		if ev.Kind == signals.EventAgentUpdate && strings.Contains(string(ev.Data), `"agent_message_chunk"`) {
			chunks++
		}
		return chunks >= 3
	})
	before := waitRunning(t, id, 1)
	agents := proctree.Descendants(first.Process.Pid)
	require.NotEmpty(t, agents, "the first worker runs the agent")
	w.realWorkerProcess(t, queue)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	// Whatever the dead worker left is killed when the test ends, checked or not.
	t.Cleanup(func() {
		for _, p := range alive(agents) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})

	evs := turnEndAcrossFailover(t, id, 1)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind, "%v", data)
	require.Equal(t, "end_turn", data["stop_reason"])
	require.Positive(t, countKindIn(evs, signals.EventTurnRestarted, 1), "the turn restarted on the other worker")
	st, err := qc.Status(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	if w.agent.Name == fakemodel.GeminiCLI.Name {
		// Gemini CLI writes a session for session/load only at moments of its own (after a
		// turn has ended, or once enough of one is written): the other worker's load may
		// fail ("No previous sessions found for this project"), and then tacp starts a new
		// agent session and says so in the journal, never silently.
		if before.AgentSessionID != st.AgentSessionID {
			require.Positive(t, countKindIn(allEvents(t, id), signals.EventAgentContextLost, 1), "a new agent session is journaled as agent.context_lost")
		}
	} else {
		require.Equal(t, before.AgentSessionID, st.AgentSessionID, "the other worker loaded (session/load) the same agent session")
	}
	if w.agent.AskingMode != "" {
		require.Equal(t, w.agent.AskingMode, st.AgentSettings.CurrentModeID, "the other worker's agent process is in the asking mode")
	}
	// The other worker's agent process asks before it writes, as the first one did.
	path := filepath.Join(w.workspace(id), "after-failover.txt")
	_, err = qc.Prompt(ctxFor(t, time.Minute), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "tool: write " + path + " x", ClientMessageID: "turn-2"})
	require.NoError(t, err)
	req := permissionRequestedIn(t, id, 2)
	_, err = qc.PermissionRespond(ctxFor(t, time.Minute), id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: optionOf(t, req, "reject_once")})
	require.NoError(t, err)
	endedWith(t, id, 2, "end_turn", "cancelled")
	require.NoFileExists(t, path)
	checkInvariants(t, allEvents(t, id))

	// The agents exit when the dead worker's end of their stdin closes: tacp itself has no
	// way to stop them (issue 17, "Lifecycle").
	agentsGone(t, agents, "the dead worker's agent")
}

func realSIGTERM(t *testing.T, w *realAgentWorker) {
	queue := "tacp-real-sigterm-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerProcessEnv+"="+queue,
		"TEMPORAL_ADDRESS="+srv.HostPort(), "TEMPORAL_NAMESPACE="+srv.Namespace(),
		"TACP_E2E_AGENT="+w.cmdline, "TACP_E2E_DATA="+w.dataDir)
	var stderr lockedBuffer
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "%s", stderr.String())
	require.True(t, strings.HasPrefix(line, "ready"), line)

	id := session(t)
	_, err = qc.Prompt(ctxFor(t, time.Minute), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "slow: 600 tick", ClientMessageID: "turn-1"})
	require.NoError(t, err)
	chunks := 0
	waitFor(t, id, func(ev signals.Event) bool {
		if ev.Kind == signals.EventAgentUpdate && strings.Contains(string(ev.Data), `"agent_message_chunk"`) {
			chunks++
		}
		return chunks >= 3
	})
	agents := proctree.Descendants(cmd.Process.Pid)
	require.NotEmpty(t, agents)
	t.Cleanup(func() {
		for _, p := range alive(agents) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err = <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("the worker did not exit within a minute of SIGTERM:\n%s", stderr.String())
	}
	if strings.Contains(stderr.String(), "panic:") {
		t.Fatalf("SIGTERM of a worker mid-turn panicked: %s", firstLines(stderr.String(), "panic:", 12))
	}
	require.NoError(t, err, "the worker exits cleanly:\n%s", stderr.String())
	agentsGone(t, agents, "the worker stopped its agent")
}

// agentsGone waits (bounded) until none of pids runs: an agent's whole process group dies
// with it or with its worker (Claude Code's native binary under claude-agent-acp included).
func agentsGone(t *testing.T, pids []int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(alive(pids)) > 0 && time.Now().Before(deadline) {
		select {
		case <-ctxFor(t, time.Minute).Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	if left := alive(pids); len(left) > 0 {
		t.Fatalf("%s: %d of its processes still run 10 s later (pids %v, %s)", what, len(left), left, commands(left))
	}
}

// commands names the executables of pids.
func commands(pids []int) string {
	var out []string
	for _, p := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		name, _, _ := strings.Cut(string(b), "\x00")
		out = append(out, filepath.Base(name))
	}
	return strings.Join(out, ", ")
}

// turnEndAcrossFailover waits for turn's terminal event like turnEnd, retrying the events
// query when it fails: right after a worker is killed, a query routed to its sticky queue
// can fail (tacpclient.Client.Watch gives up at the first failed query).
func turnEndAcrossFailover(t *testing.T, id string, turn int64) []signals.Event {
	t.Helper()
	ctx := ctxFor(t, 3*time.Minute)
	var evs []signals.Event
	var after int64
	for {
		res, err := sc.Events(ctx, id, after, 0)
		if err != nil {
			t.Logf("events query failed, retrying: %v", err)
		}
		for _, ev := range res.Events {
			evs = append(evs, ev)
			after = ev.Seq
			if ev.TurnID == turn && signals.IsTerminal(ev.Kind) {
				return evs
			}
		}
		if err == nil && len(res.Events) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			t.Fatalf("turn %d of %s never ended: %v", turn, id, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// firstLines returns n lines of s from the first that contains marker.
func firstLines(s, marker string, n int) string {
	i := strings.Index(s, marker)
	if i < 0 {
		return ""
	}
	lines := strings.SplitN(s[i:], "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], " | ")
}

// updateKinds counts the sessionUpdate kinds of agent.update events.
func updateKinds(t *testing.T, evs []signals.Event) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, ev := range evs {
		if ev.Kind != signals.EventAgentUpdate {
			continue
		}
		var n struct {
			Update struct {
				Kind string `json:"sessionUpdate"`
			} `json:"update"`
		}
		require.NoError(t, json.Unmarshal(ev.Data, &n))
		out[n.Update.Kind]++
	}
	return out
}

// realUpdatesJournaled compares the updates the agent sends around session/new and its
// first prompt over a direct pipe with what the session journals for the same prompt:
// contract §7, updates are never dropped.
func realUpdatesJournaled(t *testing.T, w *realAgentWorker) {
	const text = "reply: count the updates"
	conn, client := startDirect(t, w.bin, w.agent.Args, append(w.env, w.agent.AskingEnv...), t.TempDir())
	ctx := ctxFor(t, 2*time.Minute)
	// Offered what the runner offers, in the mode the runner puts it in, the agent sends
	// what it sends behind tacp (Claude Code in auto mode adds a notice to its reply).
	_, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber, ClientCapabilities: activities.ClientCapabilities()})
	require.NoError(t, err)
	sess, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	direct := map[string]int{}
	if w.agent.AskingMode != "" && string(sess.Modes.CurrentModeId) != w.agent.AskingMode {
		_, err = conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: sess.SessionId, ModeId: acp.SessionModeId(w.agent.AskingMode)})
		require.NoError(t, err)
	}
	_, err = conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
	require.NoError(t, err)
	takeDirect := func() {
		updates, _ := client.take()
		for _, u := range updates {
			b, err := json.Marshal(u.Update)
			require.NoError(t, err)
			var k struct {
				Kind string `json:"sessionUpdate"`
			}
			require.NoError(t, json.Unmarshal(b, &k))
			direct[k.Kind]++
		}
	}

	id := session(t)
	turn := w.prompt(t, signals.SessionConfig{SessionID: id}, text)
	endedWith(t, id, turn, "end_turn")
	// Updates sent after the prompt's answer (claude-agent-acp's commands) reach either side
	// when they do: both are given time to settle, and then must agree.
	var journaled map[string]int
	agree := func() bool {
		takeDirect()
		journaled = updateKinds(t, allEvents(t, id))
		return journaled["available_commands_update"] == direct["available_commands_update"] &&
			journaled["agent_message_chunk"] == direct["agent_message_chunk"]
	}
	deadline := time.Now().Add(10 * time.Second)
	for !agree() && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Logf("%s: updates over a direct pipe %v, journaled %v", w.agent.Name, direct, journaled)
	require.Equal(t, direct["agent_message_chunk"], journaled["agent_message_chunk"])
	require.Equal(t, direct["available_commands_update"], journaled["available_commands_update"])
}

// realFilesFollow is issue 37 with a real agent: two workers with data dirs of their own and
// one S3-compatible store (SeaweedFS). Turn 1 writes a file with the agent's edit tool,
// turn 2 one with a shell command; the first worker is killed -9; turn 3 lands on the
// second, whose workspace was restored from the store, and its shell command reads both.
func realFilesFollow(t *testing.T, w *realAgentWorker) {
	s3 := seaweedfs.Start(t)
	store := s3.URL("tacp-real", w.agent.Name)
	queue := "tacp-real-files-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	start := func() (*exec.Cmd, string) {
		data := t.TempDir()
		env := append([]string{"TACP_E2E_AGENT=" + w.cmdline, "TACP_E2E_DATA=" + data, "TACP_E2E_CHECKPOINT_STORE=" + store}, s3.Env()...)
		return startWorkerProcess(t, queue, env...), filepath.Join(data, "workspaces")
	}
	first, roots1 := start()
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id, Policy: signals.PolicyAllowAll}
	prompt := func(text string) int64 {
		res, err := qc.Prompt(ctxFor(t, time.Minute), cfg, signals.PromptRequest{Text: text, ClientMessageID: signals.NewID()})
		require.NoError(t, err)
		return res.TurnID
	}
	ws1 := filepath.Join(roots1, id)
	endedWith(t, id, prompt("tool: write "+filepath.Join(ws1, "edited.txt")+" written by the edit tool"), "end_turn")
	endedWith(t, id, prompt("tool: bash printf 'written by sh' > "+filepath.Join(ws1, "shelled.txt")), "end_turn")
	require.FileExists(t, filepath.Join(ws1, "edited.txt"))
	require.FileExists(t, filepath.Join(ws1, "shelled.txt"))

	agents := proctree.Descendants(first.Process.Pid)
	_, roots2 := start()
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	for _, p := range agents {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	ws2 := filepath.Join(roots2, id)
	both := filepath.Join(ws2, "both.txt")
	turn := prompt("tool: bash cat " + filepath.Join(ws2, "edited.txt") + " " + filepath.Join(ws2, "shelled.txt") + " > " + both)
	evs := endedWith(t, id, turn, "end_turn")
	got, err := os.ReadFile(both)
	require.NoError(t, err, "turn 3 ran on the second worker, in its own workspace")
	require.Contains(t, string(got), "written by the edit tool")
	require.Contains(t, string(got), "written by sh")

	checkpoints, restored := filesFollowed(t, evs)
	require.Len(t, checkpoints, 3, "one checkpoint a turn")
	require.Len(t, restored, 1)
	require.Equal(t, turn, restored[0].turnID, "turn 3 restored the workspace")
	checkInvariants(t, allEvents(t, id))
}

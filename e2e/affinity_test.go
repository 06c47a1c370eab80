package e2e

// Affinity and failover across worker processes with data directories of their own, as
// separate machines have (contract §10): one agent process per session while its worker lives,
// agent.context_lost and the conversation carried over when the agent's session cannot be
// loaded elsewhere, and no prompt sent twice when it can.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/testagent/agent"
	sessioncore "github.com/tacp-dev/tacp/workflows/session"
)

// affinityCluster is three worker processes on one queue, each with its own data directory,
// sharing the workspace roots and (when shared is set) the test agent's transcripts.
type affinityCluster struct {
	queue  string
	qc     *tacpclient.Client
	starts string
	procs  map[string]*exec.Cmd // by host queue
}

func startAffinityCluster(t *testing.T, n int, sharedTranscripts bool) *affinityCluster {
	t.Helper()
	base := t.TempDir()
	c := &affinityCluster{queue: "tacp-affinity-" + signals.NewID()[:8], starts: filepath.Join(base, "starts"), procs: map[string]*exec.Cmd{}}
	c.qc = tacpclient.NewClient(tc, c.queue)
	for i := range n {
		data := filepath.Join(base, fmt.Sprintf("worker-%d", i))
		transcripts := filepath.Join(data, "transcripts")
		if sharedTranscripts {
			transcripts = filepath.Join(base, "transcripts")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(),
			workerProcessEnv+"="+c.queue,
			"TEMPORAL_ADDRESS="+srv.HostPort(),
			"TEMPORAL_NAMESPACE="+srv.Namespace(),
			"TACP_E2E_AGENT="+fmt.Sprintf("%s -transcripts %s", testagent, transcripts),
			"TACP_E2E_DATA="+data,
			"TACP_E2E_WORKSPACES="+filepath.Join(base, "workspaces"),
			agent.StartsDirEnv+"="+c.starts,
		)
		c.procs[startReady(t, cmd)] = cmd
	}
	return c
}

// agentStarts counts the test agent processes started so far.
func (c *affinityCluster) agentStarts(t *testing.T) int {
	entries, err := os.ReadDir(c.starts)
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	return len(entries)
}

// run sends text as turn n of session cfg and waits for its terminal event.
func (c *affinityCluster) run(t *testing.T, cfg signals.SessionConfig, n int64, text string) []signals.Event {
	t.Helper()
	res, err := c.qc.Prompt(ctxFor(t, 30*time.Second), cfg, signals.PromptRequest{Text: text, ClientMessageID: fmt.Sprintf("turn-%d", n)})
	require.NoError(t, err)
	require.Equal(t, n, res.TurnID)
	return turnEnd(t, cfg.SessionID, n)
}

// killHolder kills -9 the worker holding the session's agent and returns its host queue.
func (c *affinityCluster) killHolder(t *testing.T, id string) string {
	t.Helper()
	st, err := c.qc.Status(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	holder := c.procs[st.AgentHost]
	require.NotNil(t, holder, "the agent's host %q is one of the workers", st.AgentHost)
	require.NoError(t, holder.Process.Signal(syscall.SIGKILL))
	_ = holder.Wait()
	delete(c.procs, st.AgentHost)
	return st.AgentHost
}

func eventsOf(evs []signals.Event, kind string, turn int64) []signals.Event {
	var out []signals.Event
	for _, ev := range evs {
		if ev.Kind == kind && ev.TurnID == turn {
			out = append(out, ev)
		}
	}
	return out
}

func TestAffinityOneAgentPerSessionAndTheConversationCarriedOverWhenTheLoadFails(t *testing.T) {
	t.Parallel()
	c := startAffinityCluster(t, 3, false)
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	for i := int64(1); i <= 10; i++ {
		evs := c.run(t, cfg, i, fmt.Sprintf("remember the word number %d: w%02d", i, i))
		_, d := terminalData(t, evs)
		require.Equal(t, "end_turn", d["stop_reason"])
	}
	require.Equal(t, 1, c.agentStarts(t), "ten turns of one session start one agent process")
	all := allEvents(t, id)
	require.Empty(t, eventsOf(all, signals.EventAgentContextLost, 0))
	for i := int64(1); i <= 10; i++ {
		require.Empty(t, eventsOf(all, signals.EventAgentContextLost, i), "turn %d kept the agent's context", i)
	}

	lost := c.killHolder(t, id)
	begin := time.Now()
	evs := c.run(t, cfg, 11, "/received")
	took := time.Since(begin)
	t.Logf("the turn after the holder's kill -9 ended %s after its prompt", took.Round(time.Millisecond))
	_, d := terminalData(t, evs)
	require.Equal(t, "end_turn", d["stop_reason"])
	st, err := c.qc.Status(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	require.NotEqual(t, lost, st.AgentHost, "the turn ran on another worker")
	require.Contains(t, c.procs, st.AgentHost)

	// Never forget silently: journaled, in status, and the conversation carried over.
	cl := eventsOf(evs, signals.EventAgentContextLost, 11)
	require.Len(t, cl, 1)
	var data signals.AgentContextLostData
	require.NoError(t, json.Unmarshal(cl[0].Data, &data))
	require.Contains(t, data.Reason, "session/load failed")
	require.Positive(t, data.Carried)
	require.NotNil(t, st.ContextLost)
	require.Equal(t, int64(11), st.ContextLost.TurnID)
	received := strings.Join(agentTexts(t, evs, 11), "")
	require.Contains(t, received, sessioncore.TranscriptHeader)
	for i := 1; i <= 10; i++ {
		require.Contains(t, received, fmt.Sprintf("w%02d", i), "the new agent was told turn %d", i)
	}
	require.True(t, strings.HasSuffix(strings.TrimSpace(received), "/received"), "the prompt itself comes last")
	require.Equal(t, 2, c.agentStarts(t))
	checkInvariants(t, allEvents(t, id))
}

func TestAffinityFailoverWithASharedTranscriptLoadsAndDoesNotRepeatThePrompt(t *testing.T) {
	t.Parallel()
	c := startAffinityCluster(t, 3, true)
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	c.run(t, cfg, 1, "hello")
	c.run(t, cfg, 2, "again")
	require.Equal(t, 1, c.agentStarts(t))

	// Kill the holder mid-turn: the retry loads the agent session, which holds the prompt.
	const long = "/chunks 60 every 100ms"
	_, err := c.qc.Prompt(ctxFor(t, 30*time.Second), cfg, signals.PromptRequest{Text: long, ClientMessageID: "turn-3"})
	require.NoError(t, err)
	waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventAgentUpdate && ev.TurnID == 3 })
	before, err := c.qc.Status(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	c.killHolder(t, id)
	evs := turnEnd(t, id, 3)
	_, d := terminalData(t, evs)
	require.Equal(t, "end_turn", d["stop_reason"])
	require.Empty(t, eventsOf(evs, signals.EventAgentContextLost, 3), "the load succeeded: nothing was lost")
	restarted := eventsOf(evs, signals.EventTurnRestarted, 3)
	require.NotEmpty(t, restarted)
	var rd signals.TurnStartedData
	require.NoError(t, json.Unmarshal(restarted[len(restarted)-1].Data, &rd))
	require.True(t, rd.Resumed, "turn.restarted says the prompt was not sent again")
	st, err := c.qc.Status(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	require.Equal(t, before.AgentSessionID, st.AgentSessionID, "loaded, not replaced")
	require.Nil(t, st.ContextLost)

	// The agent's own record of the conversation holds the prompt once.
	dir := filepath.Join(filepath.Dir(c.starts), "transcripts")
	raw, err := os.ReadFile(filepath.Join(dir, st.AgentSessionID+".jsonl"))
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(raw), long), "the agent was prompted once")
	checkInvariants(t, allEvents(t, id))
}

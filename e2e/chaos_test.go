package e2e

// Chaos (issue 7): what tacp promises is that nothing acknowledged is ever lost. Two runs
// prove it against failures a laptop or a server room sees:
//
//   - TestChaosWorkerKilledMidTurn kills -9 the worker process that hosts a live turn,
//     TACP_CHAOS_KILLS times (default 3 so CI stays fast; run it with 20 by hand), while
//     another worker process keeps polling. Between kills it sends prompts, steers and
//     permission answers and records every one the session acknowledged. Afterwards each is
//     in the journal, the journal invariants hold, every turn ended, and a prompt sent right
//     after a kill was acknowledged within the turn heartbeat timeout + 5 s.
//   - TestChaosServerRestartedFromItsDatabase stops the embedded Temporal server (devserver,
//     a SQLite file of its own, in a child process so that stopping it cannot touch the
//     suite's shared server) in the middle of a streaming turn and starts it again from the
//     file on the same address: the session goes on, everything a viewer saw before the stop
//     is still the journal's prefix, and the acknowledged prompts run.
//
// Each prints one summary line (kills, recovery time per kill p50/max) that the README quotes:
//
//	TACP_CHAOS_KILLS=20 go test ./e2e -run 'TestChaos' -count=1 -v

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/tacp-dev/tacp/devserver"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
	sessioncore "github.com/tacp-dev/tacp/workflows/session"
)

// serverProcessEnv makes the test binary a devserver process on the SQLite file it names
// (TACP_E2E_SERVER_PORT: the frontend port, 0 for any): stopping a Temporal server inside
// the test process disturbs the suite's shared server, so the server that is stopped and
// started again runs in a process of its own.
const serverProcessEnv = "TACP_E2E_SERVER_DB"

func init() {
	if db := os.Getenv(serverProcessEnv); db != "" {
		os.Exit(runServerProcess(db))
	}
}

func runServerProcess(db string) int {
	port, _ := strconv.Atoi(os.Getenv("TACP_E2E_SERVER_PORT"))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	srv, err := devserver.Start(ctx, devserver.Options{DBPath: db, Port: port})
	if err != nil {
		fmt.Fprintln(os.Stderr, "server process:", err)
		return 1
	}
	fmt.Println("ready", srv.HostPort())
	<-ctx.Done()
	if err := srv.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "server process: stop:", err)
		return 1
	}
	return 0
}

// startServerProcess runs a devserver on db in a child process and returns it with its
// frontend address.
func startServerProcess(t *testing.T, db string, port int) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serverProcessEnv+"="+db, fmt.Sprintf("TACP_E2E_SERVER_PORT=%d", port))
	return cmd, startReady(t, cmd)
}

func chaosKills(t *testing.T) int {
	n := 3
	if s := os.Getenv("TACP_CHAOS_KILLS"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err, "TACP_CHAOS_KILLS")
	}
	return n
}

// acked is what the session acknowledged during a chaos run: each must be in the journal.
type acked struct {
	prompts []string                                // client_message_ids
	steers  []signals.SteerRef                      // refs of accepted steers
	answers map[string]signals.PermissionResolution // by request id
}

// turnHost waits until the turn's activity runs on one of the worker processes in procs and
// returns that process. The worker identity is the SDK's default, "<pid>@<host>@".
func turnHost(t *testing.T, id string, turn int64, procs []*exec.Cmd) *exec.Cmd {
	t.Helper()
	var host *exec.Cmd
	require.Eventually(t, func() bool {
		// The session runs the turn's activity itself.
		d, err := tc.DescribeWorkflowExecution(ctxFor(t, 10*time.Second), signals.SessionWorkflowID(id), "")
		if err != nil {
			return false
		}
		for _, pa := range d.GetPendingActivities() {
			if pa.GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED || pa.GetActivityType().GetName() != signals.ActivityRunTurn {
				continue
			}
			pid, _ := strconv.Atoi(strings.SplitN(pa.GetLastWorkerIdentity(), "@", 2)[0])
			for _, p := range procs {
				if p.Process.Pid == pid {
					host = p
					return true
				}
			}
		}
		return false
	}, 60*time.Second, 50*time.Millisecond, "turn %d never ran on a live worker process", turn)
	return host
}

// countKind counts the events of kind for turn.
func countKind(evs []signals.Event, kind string, turn int64) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind && ev.TurnID == turn {
			n++
		}
	}
	return n
}

func durationsSummary(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n/a"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("p50 %v max %v", s[len(s)/2].Round(10*time.Millisecond), s[len(s)-1].Round(10*time.Millisecond))
}

func TestChaosWorkerKilledMidTurn(t *testing.T) {
	t.Parallel()
	kills := chaosKills(t)
	queue := "tacp-chaos-" + signals.NewID()[:8]
	qc := tacpclient.NewClient(tc, queue)
	agentEnv := "TACP_E2E_AGENT=" + testAgentCmd("-steering")
	procs := []*exec.Cmd{startWorkerProcess(t, queue, agentEnv), startWorkerProcess(t, queue, agentEnv)}

	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	ack := acked{answers: map[string]signals.PermissionResolution{}}
	var recovery, promptAck []time.Duration
	sendPrompt := func(ctx context.Context, text string) int64 {
		msgID := fmt.Sprintf("p%d", len(ack.prompts)+1)
		res, err := qc.Prompt(ctx, cfg, signals.PromptRequest{Text: text, ClientMessageID: msgID})
		require.NoError(t, err, "prompt %q", text)
		ack.prompts = append(ack.prompts, msgID)
		return res.TurnID
	}

	for round := 1; round <= kills; round++ {
		// Odd rounds kill a turn that streams, even rounds one that waits on a person.
		streaming := round%2 == 1
		var turn int64
		var asked signals.PermissionRequestedData
		if streaming {
			turn = sendPrompt(ctxFor(t, 30*time.Second), "/chunks 60 every 100ms")
			waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventAgentUpdate && ev.TurnID == turn })
		} else {
			turn = sendPrompt(ctxFor(t, 30*time.Second), "/permission edit")
			asked = permissionRequestedIn(t, id, turn)
		}
		st := waitRunningOrSuspended(t, qc, id, turn)
		res, err := qc.Steer(ctxFor(t, 30*time.Second), id, signals.SteerRequest{
			Text: fmt.Sprintf("steer in round %d", round), ExpectedTurnID: st.SteerToken, ClientMsgID: fmt.Sprintf("s%d", round),
		})
		require.NoError(t, err, "the live turn takes a steer")
		require.Equal(t, signals.SteerAccepted, res.Outcome)
		ack.steers = append(ack.steers, res.Ref)

		host := turnHost(t, id, turn, procs)
		restartedBefore := countKind(allEvents(t, id), signals.EventTurnRestarted, turn)
		killedAt := time.Now()
		require.NoError(t, host.Process.Signal(syscall.SIGKILL))
		_ = host.Wait()
		procs = slices.DeleteFunc(procs, func(p *exec.Cmd) bool { return p == host })

		// Acknowledged while the turn's worker is gone, within heartbeat timeout + 5 s.
		sent := time.Now()
		pctx, cancel := context.WithTimeout(context.Background(), sessioncore.TurnHeartbeat+5*time.Second)
		next := sendPrompt(pctx, fmt.Sprintf("/echo\nafter kill %d", round))
		cancel()
		promptAck = append(promptAck, time.Since(sent))
		procs = append(procs, startWorkerProcess(t, queue, agentEnv)) // two poll again

		require.Eventually(t, func() bool {
			return countKind(allEvents(t, id), signals.EventTurnRestarted, turn) > restartedBefore
		}, 2*time.Minute, 20*time.Millisecond, "turn %d never restarted after kill %d", turn, round)
		recovery = append(recovery, time.Since(killedAt))

		if !streaming {
			// The lost attempt's request was resolved cancelled; the new attempt asks again.
			var again signals.PermissionRequestedData
			waitFor(t, id, func(ev signals.Event) bool {
				if ev.Kind != signals.EventPermissionRequested || ev.TurnID != turn {
					return false
				}
				require.NoError(t, json.Unmarshal(ev.Data, &again))
				return again.RequestID != asked.RequestID
			})
			ans, err := qc.PermissionRespond(ctxFor(t, 30*time.Second), id, signals.PermissionRespondRequest{RequestID: again.RequestID, OptionID: "allow"})
			require.NoError(t, err)
			ack.answers[again.RequestID] = ans.Resolution
		}
		evs := turnEnd(t, id, next)
		require.Equal(t, fmt.Sprintf("after kill %d", round), strings.Join(agentTexts(t, evs, next), ""))
	}

	// A session that lived through the kills still works.
	last := sendPrompt(ctxFor(t, 30*time.Second), "/chunks 3")
	evs := turnEnd(t, id, last)
	require.Len(t, agentTexts(t, evs, last), 3)

	evs = allEvents(t, id)
	checkInvariants(t, evs)
	started, ended := map[int64]bool{}, map[int64]bool{}
	prompts := map[string]bool{}
	var steers []signals.SteerRef
	answers := map[string]signals.PermissionResolution{}
	for _, ev := range evs {
		switch ev.Kind {
		case signals.EventTurnStarted:
			started[ev.TurnID] = true
		case signals.EventTurnEnded, signals.EventTurnFailed:
			ended[ev.TurnID] = true
		case signals.EventPromptAccepted:
			var d signals.PromptAcceptedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			prompts[d.ClientMessageID] = true
		case signals.EventSteerAccepted:
			var d signals.SteerAcceptedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			steers = append(steers, d.Ref)
		case signals.EventPermissionResolved:
			var d signals.PermissionResolution
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			answers[d.RequestID] = d
		}
	}
	require.Equal(t, started, ended, "every turn ended")
	for _, p := range ack.prompts {
		require.True(t, prompts[p], "acknowledged prompt %s is in the journal", p)
	}
	require.Equal(t, ack.steers, steers, "every acknowledged steer is in the journal, once, in order")
	for rid, res := range ack.answers {
		require.Equal(t, res, answers[rid], "acknowledged answer to %s is in the journal", rid)
		require.Equal(t, signals.DecidedByUser, res.DecidedBy)
	}
	t.Logf("chaos worker kills: %d kills, recovery (kill to turn.restarted) %s, prompt acknowledged after a kill %s; acknowledged %d prompts, %d steers, %d permission answers, all journaled",
		kills, durationsSummary(recovery), durationsSummary(promptAck), len(ack.prompts), len(ack.steers), len(ack.answers))
}

// waitRunningOrSuspended waits until turn is live and steerable (running, or suspended on a
// permission) with its agent session known.
func waitRunningOrSuspended(t *testing.T, qc *tacpclient.Client, id string, turn int64) signals.Status {
	t.Helper()
	var st signals.Status
	require.Eventually(t, func() bool {
		var err error
		st, err = qc.Status(ctxFor(t, 10*time.Second), id)
		require.NoError(t, err)
		return st.TurnID == turn && st.SteerToken != "" && st.AgentSessionID != "" &&
			(st.State == signals.StateRunning || st.State == signals.StateSuspended)
	}, 60*time.Second, 20*time.Millisecond)
	return st
}

func TestChaosServerRestartedFromItsDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "tacp.db")
	first, addr := startServerProcess(t, db, 0)
	_, portStr, _ := strings.Cut(addr, ":")
	port, err := strconv.Atoi(portStr)
	require.NoError(t, err)

	// One client and one worker for the whole run: they reconnect to the same address.
	c, err := client.DialContext(ctx, client.Options{HostPort: addr, Namespace: "default", Logger: quietLog{}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	queue := "tacp-restart-" + signals.NewID()[:8]
	_, rc := extraWorker(t, c, tacpworker.Options{TaskQueue: queue})

	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	events := func() []signals.Event {
		var out []signals.Event
		var after int64
		for {
			res, err := rc.Events(ctxFor(t, 60*time.Second), id, after, 0)
			require.NoError(t, err)
			out = append(out, res.Events...)
			if len(res.Events) == 0 {
				return out
			}
			after = res.Events[len(res.Events)-1].Seq
		}
	}
	_, err = rc.Prompt(ctxFor(t, 30*time.Second), cfg, signals.PromptRequest{Text: "/chunks 80 every 100ms", ClientMessageID: "before-1"})
	require.NoError(t, err)
	_, err = rc.Prompt(ctxFor(t, 30*time.Second), cfg, signals.PromptRequest{Text: "/echo\nqueued before the stop", ClientMessageID: "before-2"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return countKind(events(), signals.EventAgentUpdate, 1) >= 5 }, 60*time.Second, 50*time.Millisecond)
	seen := events()

	stopped := time.Now()
	require.NoError(t, first.Process.Signal(syscall.SIGTERM))
	require.NoError(t, first.Wait(), "the server stops cleanly")
	_, again := startServerProcess(t, db, port)
	require.Equal(t, addr, again)
	downtime := time.Since(stopped)

	// Acknowledged after the restart too.
	// The restarted server answers within seconds (it forgets the old process's cluster
	// members, which otherwise stalled it for ~50 s); the patience is for a loaded machine.
	_, err = rc.Prompt(ctxFor(t, 2*time.Minute), cfg, signals.PromptRequest{Text: "/echo\nafter the restart", ClientMessageID: "after-1"})
	require.NoError(t, err)
	back := time.Since(stopped)

	var evs []signals.Event
	require.Eventually(t, func() bool {
		evs = events()
		return countKind(evs, signals.EventTurnEnded, 3)+countKind(evs, signals.EventTurnFailed, 3) == 1
	}, 3*time.Minute, 100*time.Millisecond, "turn 3 never ended")
	require.GreaterOrEqual(t, len(evs), len(seen))
	require.Equal(t, seen, evs[:len(seen)], "everything seen before the stop is still the journal's prefix")
	checkInvariants(t, evs)
	var accepted []string
	for _, ev := range evs {
		if ev.Kind == signals.EventPromptAccepted {
			var d signals.PromptAcceptedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			accepted = append(accepted, d.ClientMessageID)
		}
	}
	require.Equal(t, []string{"before-1", "before-2", "after-1"}, accepted)
	for turn := int64(1); turn <= 3; turn++ {
		require.Equal(t, 1, countKind(evs, signals.EventTurnEnded, turn), "turn %d ended", turn)
	}
	require.Equal(t, "queued before the stop", strings.Join(agentTexts(t, evs, 2), ""))
	require.Equal(t, "after the restart", strings.Join(agentTexts(t, evs, 3), ""))
	// Turn 1 streamed across the stop. Nobody cancelled it: it went on, or its attempt was
	// lost with the server and the next one ran it again from session/load; either way it
	// ended end_turn with every chunk of its last attempt.
	var stop1 string
	for _, ev := range evs {
		if ev.TurnID == 1 && signals.IsTerminal(ev.Kind) {
			stop1 = ev.Kind + " " + string(ev.Data)
		}
	}
	require.Equal(t, signals.EventTurnEnded+` {"stop_reason":"end_turn"}`, stop1, "a server restart does not cancel the turn")
	chunks1 := len(agentTexts(t, evs[lastRestart(evs, 1):], 1))
	t.Logf("chaos server restart: server down %v, first prompt acknowledged %v after the stop; no acknowledged prompt or seen event lost; the turn streaming across the stop: %s after %d of 80 chunks, restarted %d times",
		downtime.Round(10*time.Millisecond), back.Round(10*time.Millisecond), stop1, chunks1, countKind(evs, signals.EventTurnRestarted, 1))
}

// lastRestart is the index of the last turn.restarted of turn in evs (0 if none).
func lastRestart(evs []signals.Event, turn int64) int {
	at := 0
	for i, ev := range evs {
		if ev.Kind == signals.EventTurnRestarted && ev.TurnID == turn {
			at = i
		}
	}
	return at
}

// quietLog drops the SDK client's logs (the server going away is expected here).
type quietLog struct{}

func (quietLog) Debug(string, ...any) {}
func (quietLog) Info(string, ...any)  {}
func (quietLog) Warn(string, ...any)  {}
func (quietLog) Error(string, ...any) {}

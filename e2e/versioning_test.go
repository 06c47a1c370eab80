package e2e

// Worker Versioning end to end (README, "Upgrading workers while sessions run"): two builds
// of the worker whose sessions issue their commands in different orders (build B records a
// marker before each turn: a history of one replays on the other only with a
// non-determinism error), on one embedded server, one Worker Deployment. Sessions busy and
// idle on A; B made current; every turn that started on A ends on A, every session moves to B
// at its next idle moment, no history has a failed workflow task, A drains and is stopped,
// and B alone serves. Then the same back to A (rollback).
//
// TACP_E2E_BREAK_UPGRADE=1 runs it with builds that never continue as new onto a new
// version: the test must fail (sessions stay on the old build, which never drains).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
	sessioncore "github.com/tacp-dev/tacp/workflows/session"
)

// versioned is one deployment on its own task queue, with the builds running on it.
type versioned struct {
	t          *testing.T
	queue      string
	deployment string
	c          *tacpclient.Client
	broken     bool
	builds     map[string]*tacpworker.Worker
}

func newVersioned(t *testing.T) *versioned {
	u := time.Now().UnixNano()
	v := &versioned{
		t: t, queue: fmt.Sprintf("tacp-versioning-%d", u), deployment: fmt.Sprintf("tacp-e2e-%d", u),
		broken: os.Getenv("TACP_E2E_BREAK_UPGRADE") == "1", builds: map[string]*tacpworker.Worker{},
	}
	v.c = tacpclient.NewClient(tc, v.queue)
	t.Cleanup(func() {
		for _, w := range v.builds {
			w.Stop()
		}
	})
	return v
}

// start starts a worker of build id (B: the other command order).
func (v *versioned) start(id string) {
	w, err := tacpworker.Start(tc, tacpworker.Options{
		TaskQueue:      v.queue,
		Profiles:       suiteProfiles(),
		WorkspaceRoots: suiteRoots(),
		DataDir:        dataDir,
		CancelGrace:    5 * time.Second,
		MaxAgents:      64,
		Deployment:     tacpworker.Deployment{Name: v.deployment, BuildID: id, WakeInterval: time.Second},
		Build:          sessioncore.Build{TurnMarkerForTest: id == "B", NoUpgradeForTest: v.broken},
	})
	require.NoError(v.t, err)
	v.builds[id] = w
}

func (v *versioned) stop(id string) {
	v.builds[id].Stop()
	delete(v.builds, id)
}

func (v *versioned) version(id string) string { return signals.DeploymentVersion(v.deployment, id) }

func (v *versioned) makeCurrent(id string) time.Time {
	_, err := v.c.SetCurrentVersion(ctxFor(v.t, 60*time.Second), v.deployment, id)
	require.NoError(v.t, err)
	return time.Now()
}

// runOn is the build the current run of workflow wid is on, and its start.
func (v *versioned) runOn(wid string) (build string, behavior enumspb.VersioningBehavior, started time.Time) {
	d, err := tc.DescribeWorkflowExecution(ctxFor(v.t, 10*time.Second), wid, "")
	require.NoError(v.t, err)
	info := d.GetWorkflowExecutionInfo()
	vi := info.GetVersioningInfo()
	return vi.GetDeploymentVersion().GetBuildId(), vi.GetBehavior(), info.GetStartTime().AsTime()
}

// history is every event of one run.
func history(t *testing.T, wid, rid string) []*historypb.HistoryEvent {
	var out []*historypb.HistoryEvent
	it := tc.GetWorkflowHistory(ctxFor(t, 30*time.Second), wid, rid, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		out = append(out, ev)
	}
	return out
}

// runs lists every run (sessions' and turns') on the deployment's queue.
func (v *versioned) runs() []*workflowservice.ListWorkflowExecutionsResponse {
	var pages []*workflowservice.ListWorkflowExecutionsResponse
	var token []byte
	for {
		resp, err := tc.ListWorkflow(ctxFor(v.t, 30*time.Second), &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("TaskQueue = '%s'", v.queue), NextPageToken: token, PageSize: 1000,
		})
		require.NoError(v.t, err)
		pages = append(pages, resp)
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return pages
		}
	}
}

// turnKey names turn turnID of session sessionID in checkHistories' answer.
func turnKey(sessionID string, turnID int64) string {
	return sessionID + "/" + strconv.FormatInt(turnID, 10)
}

// checkHistories asserts that no workflow task of any run on the queue failed with a
// non-determinism error (nor for any reason but UnhandledCommand: a continue-as-new that
// raced a new signal, which the server refuses and the SDK retries with the signal), and
// that every turn ran on one build: its RunTurn activities all scheduled by the workflow
// tasks of one build; it returns the build of each turn by turnKey.
func (v *versioned) checkHistories() map[string]string {
	t := v.t
	turns := map[string]string{}
	turnBuilds := map[string]map[string]bool{}
	n, raced := 0, 0
	for _, page := range v.runs() {
		for _, e := range page.GetExecutions() {
			ex := e.GetExecution()
			n++
			last := ""
			for _, ev := range history(t, ex.GetWorkflowId(), ex.GetRunId()) {
				if a := ev.GetWorkflowTaskFailedEventAttributes(); a != nil {
					if a.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND {
						raced++
						continue
					}
					t.Errorf("%s run %s: workflow task failed (%s): %s", ex.GetWorkflowId(), ex.GetRunId(), a.GetCause(), a.GetFailure().GetMessage())
				}
				if a := ev.GetWorkflowTaskCompletedEventAttributes(); a != nil {
					last = a.GetDeploymentVersion().GetBuildId()
				}
				if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == signals.ActivityRunTurn {
					var in signals.RunTurnInput
					require.NoError(t, json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &in))
					key := turnKey(in.SessionID, in.TurnID)
					if turnBuilds[key] == nil {
						turnBuilds[key] = map[string]bool{}
					}
					turnBuilds[key][last] = true
				}
			}
		}
	}
	for key, builds := range turnBuilds {
		require.Len(t, builds, 1, "turn %s ran on one build: %v", key, builds)
		for b := range builds {
			turns[key] = b
		}
	}
	t.Logf("%d runs checked: no workflow task failed but %d continue-as-new that raced a signal", n, raced)
	return turns
}

// waitAllOn waits until every session's current run is pinned to build id and returns when
// each run started.
func (v *versioned) waitAllOn(ids []string, id string) map[string]time.Time {
	started := map[string]time.Time{}
	defer func() {
		for _, sid := range ids {
			if _, ok := started[sid]; !ok {
				b, beh, _ := v.runOn(signals.SessionWorkflowID(sid))
				st := v.statusOf(sid)
				v.t.Logf("%s still on %q (%s): state %s turn %d queue %d run %d", sid, b, beh, st.State, st.TurnID, len(st.Queue), st.Run)
			}
		}
	}()
	require.Eventually(v.t, func() bool {
		for _, sid := range ids {
			if _, ok := started[sid]; ok {
				continue
			}
			b, beh, at := v.runOn(signals.SessionWorkflowID(sid))
			if b == id && beh == enumspb.VERSIONING_BEHAVIOR_PINNED {
				started[sid] = at
			}
		}
		return len(started) == len(ids)
	}, 180*time.Second, 250*time.Millisecond, "every session moves to build %s", id)
	return started
}

func (v *versioned) waitDrained(id string) {
	var last signals.VersionRuns
	require.Eventually(v.t, func() bool {
		r, err := v.c.CountVersionRuns(ctxFor(v.t, 10*time.Second), v.version(id))
		require.NoError(v.t, err)
		last = r
		return r.Drained
	}, 60*time.Second, 250*time.Millisecond, "build %s drains: %+v", id, last)
}

// sessionLog is what the test knows a session was told: the turns its prompts got.
type sessionLog struct {
	id    string
	kind  string
	cfg   signals.SessionConfig
	mu    sync.Mutex
	turns []int64
}

func (s *sessionLog) prompt(t *testing.T, c *tacpclient.Client, text string) int64 {
	res, err := c.Prompt(ctxFor(t, 30*time.Second), s.cfg, signals.PromptRequest{Text: text, ClientMessageID: signals.NewID()})
	require.NoError(t, err)
	require.False(t, res.Duplicate)
	s.mu.Lock()
	s.turns = append(s.turns, res.TurnID)
	s.mu.Unlock()
	return res.TurnID
}

// idleSince is when the session last became idle: the last terminal event of its journal.
func idleSince(evs []signals.Event) time.Time {
	var at time.Time
	for _, ev := range evs {
		if signals.IsTerminal(ev.Kind) {
			at = ev.At
		}
	}
	return at
}

// statusOf is the session's status; a failed query is a zero status (conditions poll it).
func (v *versioned) statusOf(id string) signals.Status {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := v.c.Status(ctx, id)
	if err != nil {
		v.t.Logf("status of %s: %v", id, err)
	}
	return st
}

func (v *versioned) events(id string) []signals.Event {
	var out []signals.Event
	var after int64
	for {
		res, err := v.c.Events(ctxFor(v.t, 10*time.Second), id, after, 0)
		require.NoError(v.t, err)
		out = append(out, res.Events...)
		if len(res.Events) == 0 {
			return out
		}
		after = res.Events[len(res.Events)-1].Seq
	}
}

// checkSessions asserts every acknowledged prompt ran exactly once and the journal's seq is
// contiguous, and that every session is idle.
func (v *versioned) checkSessions(logs []*sessionLog) {
	for _, s := range logs {
		evs := v.events(s.id)
		checkInvariants(v.t, evs)
		ended := map[int64]int{}
		for _, ev := range evs {
			if signals.IsTerminal(ev.Kind) {
				ended[ev.TurnID]++
			}
		}
		for _, turn := range s.turns {
			require.Equal(v.t, 1, ended[turn], "%s (%s): acknowledged turn %d ran once", s.id, s.kind, turn)
		}
		require.Len(v.t, ended, len(s.turns), "%s (%s): no turn but the acknowledged ones", s.id, s.kind)
	}
}

func (v *versioned) waitIdle(logs []*sessionLog) {
	for _, s := range logs {
		require.Eventually(v.t, func() bool {
			st := v.statusOf(s.id)
			return st.State == signals.StateIdle && len(st.Queue) == 0 && st.TurnID == 0
		}, 90*time.Second, 100*time.Millisecond, "%s (%s) becomes idle", s.id, s.kind)
	}
}

func TestWorkerVersioningMovesSessionsAtIdleAndBack(t *testing.T) {
	v := newVersioned(t)
	v.start("A")
	v.makeCurrent("A")

	// 20 sessions on A, four of each: idle, streaming, waiting for an approval, with queued
	// prompts, and continued as new in the middle of a streaming turn.
	var logs []*sessionLog
	for i := range 20 {
		kind := []string{"idle", "streaming", "approval", "queued", "can-mid-turn"}[i%5]
		s := &sessionLog{id: fmt.Sprintf("%s-%d-%s", session(t), i, kind), kind: kind}
		s.cfg = signals.SessionConfig{SessionID: s.id, Policy: signals.PolicyAskAlways}
		if kind == "can-mid-turn" {
			s.cfg.MaxRunEvents = 60
		}
		logs = append(logs, s)
	}
	for _, s := range logs {
		switch s.kind {
		case "idle":
			s.prompt(t, v.c, "/chunks 2")
		case "streaming":
			s.prompt(t, v.c, "/chunks 200 every 100ms")
		case "approval":
			s.prompt(t, v.c, "/permission execute")
		case "queued":
			s.prompt(t, v.c, "/permission execute") // held until after the switch
			s.prompt(t, v.c, "/chunks 3")
			s.prompt(t, v.c, "/chunks 3")
		case "can-mid-turn":
			s.prompt(t, v.c, "/chunks 300 every 60ms")
		}
	}
	// Each session in its state before B is made current.
	for _, s := range logs {
		require.Eventually(t, func() bool {
			st := v.statusOf(s.id)
			switch s.kind {
			case "idle":
				return st.State == signals.StateIdle && st.Journal.LastSeq > 3
			case "approval":
				return len(st.PendingPermissions) == 1
			case "can-mid-turn":
				return st.TurnID == 1 && st.Run >= 2
			case "queued":
				return st.TurnID == 1 && len(st.Queue) == 2 && len(st.PendingPermissions) == 1
			default:
				return st.TurnID == 1
			}
		}, 60*time.Second, 50*time.Millisecond, "%s reaches its state on A", s.id)
	}

	// Still in those states (the turns are long enough to outlast the checks).
	for _, s := range logs {
		if st := v.statusOf(s.id); s.kind != "idle" {
			require.Equal(t, int64(1), st.TurnID, "%s (%s) still runs its first turn", s.id, s.kind)
		}
	}
	v.start("B")
	switched := v.makeCurrent("B")
	t.Logf("B current at %s", switched.Format(time.RFC3339Nano))
	// The approvals are answered after the switch: their turns go on, and end, on A, and so
	// do the prompts queued behind them.
	for _, s := range logs {
		if s.kind != "approval" && s.kind != "queued" {
			continue
		}
		st := v.statusOf(s.id)
		require.Len(t, st.PendingPermissions, 1, "%s still waits for its approval on A", s.id)
		_, err := v.c.PermissionRespond(ctxFor(t, 10*time.Second), s.id, signals.PermissionRespondRequest{RequestID: st.PendingPermissions[0].RequestID, OptionID: "allow"})
		require.NoError(t, err)
	}
	ids := make([]string, len(logs))
	for i, s := range logs {
		ids[i] = s.id
	}
	onB := v.waitAllOn(ids, "B")
	var worst time.Duration
	for _, s := range logs {
		idle := idleSince(v.events(s.id))
		if idle.Before(switched) {
			idle = switched
		}
		if d := onB[s.id].Sub(idle); d > worst {
			worst = d
		}
	}
	t.Logf("every session on B; the slowest moved %s after it was idle with B current", worst.Round(time.Millisecond))
	v.waitIdle(logs)
	turns := v.checkHistories()
	for _, s := range logs {
		for _, turn := range s.turns {
			require.Equal(t, "A", turns[turnKey(s.id, turn)], "%s turn %d started on A and ended there", s.id, turn)
		}
	}
	v.checkSessions(logs)
	v.waitDrained("A")
	v.stop("A")

	// B alone serves the next turns.
	var wg sync.WaitGroup
	for _, s := range logs {
		turn := s.prompt(t, v.c, "/chunks 2")
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.Eventually(t, func() bool {
				st, err := v.c.Status(context.Background(), s.id)
				return err == nil && st.State == signals.StateIdle && st.Journal.LastSeq > 0 && st.TurnID == 0 && len(st.Queue) == 0
			}, 90*time.Second, 100*time.Millisecond)
			_ = turn
		}()
	}
	wg.Wait()
	turns = v.checkHistories()
	for _, s := range logs {
		last := s.turns[len(s.turns)-1]
		require.Equal(t, "B", turns[turnKey(s.id, last)], "%s turn %d ran on B", s.id, last)
	}
	v.checkSessions(logs)

	// Roll back: A (the same build id) current again, with turns running on B.
	v.start("A")
	busy := logs[:5]
	for _, s := range busy {
		s.prompt(t, v.c, "/chunks 50 every 100ms")
	}
	for _, s := range busy {
		require.Eventually(t, func() bool { return v.statusOf(s.id).TurnID == s.turns[len(s.turns)-1] }, 60*time.Second, 50*time.Millisecond)
	}
	switched = v.makeCurrent("A")
	back := v.waitAllOn(ids, "A")
	worst = 0
	for _, s := range logs {
		idle := idleSince(v.events(s.id))
		if idle.Before(switched) {
			idle = switched
		}
		if d := back[s.id].Sub(idle); d > worst {
			worst = d
		}
	}
	t.Logf("rolled back: every session on A; the slowest moved %s after it was idle with A current", worst.Round(time.Millisecond))
	v.waitIdle(logs)
	turns = v.checkHistories()
	for _, s := range busy {
		last := s.turns[len(s.turns)-1]
		require.Equal(t, "B", turns[turnKey(s.id, last)], "%s turn %d started on B and ended there", s.id, last)
	}
	v.checkSessions(logs)
	v.waitDrained("B")
	v.stop("B")
	for _, s := range logs[:4] {
		turnEndOn(t, v, s.id, s.prompt(t, v.c, "/chunks 2"))
	}
	turns = v.checkHistories()
	for _, s := range logs[:4] {
		last := s.turns[len(s.turns)-1]
		require.Equal(t, "A", turns[turnKey(s.id, last)], "%s turn %d ran on A", s.id, last)
	}
	v.checkSessions(logs)
}

// turnEndOn waits for the terminal event of turn in v's session id.
func turnEndOn(t *testing.T, v *versioned, id string, turn int64) {
	require.Eventually(t, func() bool {
		for _, ev := range v.events(id) {
			if ev.TurnID == turn && signals.IsTerminal(ev.Kind) {
				return true
			}
		}
		return false
	}, 90*time.Second, 100*time.Millisecond, "turn %d of %s ends", turn, id)
}

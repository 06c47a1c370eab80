package bench

// The turn path: what tacp adds between an agent and the people watching it, each figure
// set against the same testagent binary spoken to directly over its stdio by an ACP client
// this file starts itself (acp-go-sdk's ClientSideConnection, the SDK tacp's turn runner
// uses), in the same run and under the same load.
//
//   - Event path latency. The agent streams `/chunks N every 20ms stamp`: each chunk carries
//     the wall-clock time the agent sent it, so a chunk's latency is the time it was seen
//     minus its stamp, on one machine's clock. The baseline sees it in its SessionUpdate
//     callback; tacp's viewer sees it in the events query, which it runs when the session's
//     history grows (tacpclient.Follower, one per session, as the gateway and the deck have). History timestamps split tacp's latency into its parts.
//   - Warm-turn overhead. A zero-work turn (`/chunks 0`: the agent answers end_turn at
//     once) on a session whose agent is already running: tacp's Prompt until turn.ended is
//     visible to the viewer, against the direct session/prompt round trip.
//   - History. The session workflow's history events for one streaming turn (every run of
//     the session, following continue-as-new), per chunk and projected to an hour. The
//     session schedules the turn's RunTurn activity itself, so the activity's events, and
//     its times, are in that history too.
//
// The fixture's worker flushes events every 100 ms (the default). The table also starts a
// second worker with a 1 s flush on a task queue of its own, to show what the flush
// interval trades: latency against history.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	acp "github.com/coder/acp-go-sdk"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

const (
	// chunkEvery is the streaming rate: 50 chunks a second.
	chunkEvery = 20 * time.Millisecond
	// zeroWork is the shortest turn the testagent has: no updates, end_turn at once.
	zeroWork = "/chunks 0"
	// hourChunks is a 60-minute streaming turn at chunkEvery.
	hourChunks = int(time.Hour / chunkEvery)
	// slowFlush is the second worker's flush interval.
	slowFlush = time.Second
)

// streamPrompt streams n stamped chunks at chunkEvery.
func streamPrompt(n int) string { return fmt.Sprintf("/chunks %d every %s stamp", n, chunkEvery) }

// --- the baseline: the agent over a direct ACP pipe ---

// acpPeer is an ACP client on one ACP session, timing the stamped chunks it is sent: on
// the stdio of a child process (the baseline's peer is the testagent binary itself, with
// nothing in between; the gateway benchmark's is `starter acp`), or on a WebSocket to the
// deck's /acp (closer set).
type acpPeer struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	closer func() // instead of stdin and cmd
	conn   *acp.ClientSideConnection
	sid    acp.SessionId
	client *stampClient
}

// startPeer starts cmd, initializes the ACP peer on its stdio, opens a session in cwd and
// runs one zero-work turn, so that the agent behind it is warm.
func startPeer(ctx context.Context, name string, cmd *exec.Cmd, cwd string) (*acpPeer, error) {
	return startPeerWarm(ctx, name, cmd, cwd, zeroWork)
}

// startPeerWarm is startPeer with the prompt of the warm-up turn.
func startPeerWarm(ctx context.Context, name string, cmd *exec.Cmd, cwd, warm string) (*acpPeer, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &acpPeer{name: name, cmd: cmd, stdin: stdin}
	return p.open(ctx, stdin, stdout, &stampClient{}, cwd, warm)
}

// open makes p an ACP client over w and r (as the client of c), initializes it, opens a
// session in cwd and runs the turn warm (zeroWork: one that does nothing).
func (p *acpPeer) open(ctx context.Context, w io.Writer, r io.Reader, c *stampClient, cwd, warm string) (*acpPeer, error) {
	p.client = c
	p.conn = newClientConn(c, w, r)
	if _, err := p.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		p.close()
		return nil, fmt.Errorf("%s: initialize: %w", p.name, err)
	}
	resp, err := p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		p.close()
		return nil, fmt.Errorf("%s: session/new: %w", p.name, err)
	}
	p.sid = resp.SessionId
	if _, err := p.prompt(ctx, warm); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// newClientConn is an acp-go-sdk client connection for c over w and r. The SDK's receive
// loop starts inside NewClientSideConnection and reads its logger unguarded, so it waits at
// the gate until SetLogger is done. Quiet: its "connection closed" at the end would break a
// benchmark's output line.
func newClientConn(c acp.Client, w io.Writer, r io.Reader) *acp.ClientSideConnection {
	gate := make(chan struct{})
	conn := acp.NewClientSideConnection(c, w, gatedReader{r: r, open: gate})
	conn.SetLogger(slog.New(slog.DiscardHandler))
	close(gate)
	return conn
}

// startDirect starts the baseline: the testagent binary over a direct ACP pipe.
func startDirect(ctx context.Context) (*acpPeer, error) {
	dir, err := os.MkdirTemp(env.tmp, "direct-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(env.agentBinary, "-transcripts", filepath.Join(dir, "transcripts"))
	cmd.Dir = dir
	return startPeer(ctx, "direct", cmd, dir)
}

// prompt runs one session/prompt and returns its round trip.
func (p *acpPeer) prompt(ctx context.Context, text string) (time.Duration, error) {
	start := time.Now()
	resp, err := p.conn.Prompt(ctx, acp.PromptRequest{SessionId: p.sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
	took := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%s prompt %q: %w", p.name, text, err)
	}
	if resp.StopReason != acp.StopReasonEndTurn {
		return 0, fmt.Errorf("%s prompt %q: stop reason %q", p.name, text, resp.StopReason)
	}
	return took, nil
}

// stream runs a stamped n-chunk turn and returns each chunk's latency, in order.
func (p *acpPeer) stream(ctx context.Context, n int) ([]time.Duration, error) {
	p.client.take()
	if _, err := p.prompt(ctx, streamPrompt(n)); err != nil {
		return nil, err
	}
	lat := p.client.take()
	if len(lat) != n {
		return nil, fmt.Errorf("%s stream: %d stamped chunks seen, want %d", p.name, len(lat), n)
	}
	return lat, nil
}

// close hangs up (a polite peer exits) and kills the process if it lingers.
func (p *acpPeer) close() {
	if p.closer != nil {
		p.closer()
		return
	}
	_ = p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// gatedReader blocks reads until open is closed.
type gatedReader struct {
	r    io.Reader
	open <-chan struct{}
}

func (g gatedReader) Read(p []byte) (int, error) {
	<-g.open
	return g.r.Read(p)
}

// stampClient is the baseline's ACP client: it records the latency of every stamped chunk
// the moment the SDK hands it over, and offers nothing else.
type stampClient struct {
	mu  sync.Mutex
	lat []time.Duration
	// first is when the first agent_message_chunk since takeFirst came (stamped or not: a
	// real agent's first token).
	first time.Time
}

var errNotOffered = errors.New("bench client: not offered")

func (c *stampClient) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	now := time.Now()
	if n.Update.AgentMessageChunk != nil {
		c.mu.Lock()
		if c.first.IsZero() {
			c.first = now
		}
		c.mu.Unlock()
	}
	if _, at, ok := parseStamp(chunkText(n)); ok {
		c.mu.Lock()
		c.lat = append(c.lat, now.Sub(at))
		c.mu.Unlock()
	}
	return nil
}

// takeFirst returns when the first agent_message_chunk since the last call came (zero: none)
// and starts watching for the next.
func (c *stampClient) takeFirst() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := c.first
	c.first = time.Time{}
	return at
}

// take returns and clears the latencies recorded so far.
func (c *stampClient) take() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	lat := c.lat
	c.lat = nil
	return lat
}

func (c *stampClient) RequestPermission(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	return acp.RequestPermissionResponse{}, errNotOffered
}

func (c *stampClient) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, errNotOffered
}

func (c *stampClient) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, errNotOffered
}

func (c *stampClient) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, errNotOffered
}

func (c *stampClient) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, errNotOffered
}

func (c *stampClient) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, errNotOffered
}

func (c *stampClient) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, errNotOffered
}

func (c *stampClient) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, errNotOffered
}

// chunkText is the text of an agent_message_chunk ("" for any other update).
func chunkText(n acp.SessionNotification) string {
	if m := n.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
		return m.Content.Text.Text
	}
	return ""
}

// parseStamp reads "chunk i @<unix nanos>\n", the text of `/chunks ... stamp`.
func parseStamp(text string) (int, time.Time, bool) {
	rest, ok := strings.CutPrefix(text, "chunk ")
	if !ok {
		return 0, time.Time{}, false
	}
	num, ns, ok := strings.Cut(strings.TrimSuffix(rest, "\n"), " @")
	if !ok {
		return 0, time.Time{}, false
	}
	i, err1 := strconv.Atoi(num)
	at, err2 := strconv.ParseInt(ns, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, time.Time{}, false
	}
	return i, time.Unix(0, at), true
}

// stampOf reads the stamp of a journaled agent.update (raw session/update params).
func stampOf(raw json.RawMessage) (int, time.Time, bool) {
	var n acp.SessionNotification
	if json.Unmarshal(raw, &n) != nil {
		return 0, time.Time{}, false
	}
	return parseStamp(chunkText(n))
}

// --- tacp: a session and its viewer ---

// tacpSession is a tacp session whose agent is warm, and a viewer that has read its journal
// up to lastSeq.
type tacpSession struct {
	sc       *tacpclient.Client
	id       string
	lastSeq  int64
	lastTurn int64
	// fl follows the session's history for its viewer from the first prompt on (as a
	// gateway's or a deck's viewer does, one per session), until close.
	fl     *tacpclient.Follower
	stopFl context.CancelFunc
}

// newTacpSession starts a session on sc's task queue with one zero-work turn, which starts
// its agent. close must be called before sc's worker stops.
func newTacpSession(ctx context.Context, sc *tacpclient.Client) (*tacpSession, error) {
	s := &tacpSession{sc: sc, id: "bench-turn-" + signals.NewID()}
	if _, err := s.turn(ctx, zeroWork); err != nil {
		_ = s.close()
		return nil, fmt.Errorf("warm session %s: %w", s.id, err)
	}
	return s, nil
}

func (s *tacpSession) close() error {
	if s.stopFl != nil {
		defer s.stopFl()
	}
	return env.closeSession(context.Background(), s.id)
}

// seenTurn is one turn as its viewer saw it. Times from the journal (`at`) are the
// workflow's clock: the start of the workflow task that journaled the event.
type seenTurn struct {
	turnID    int64
	start     time.Time // before Prompt
	startedAt time.Time // turn.started `at`
	endedAt   time.Time // turn.ended `at`
	visible   time.Time // turn.ended seen by the viewer
	chunks    []seenChunk
}

// seenChunk is one stamped chunk on tacp's event path.
type seenChunk struct {
	index     int
	stamp     time.Time // the agent sent it
	journaled time.Time // agent.update `at`
	visible   time.Time // the viewer's events query returned it
}

func (c seenChunk) latency() time.Duration { return c.visible.Sub(c.stamp) }

// turn sends a prompt and watches the journal, woken by the session's history, until the turn's terminal event is visible.
func (s *tacpSession) turn(ctx context.Context, text string) (seenTurn, error) {
	r := seenTurn{start: time.Now()}
	res, err := s.sc.Prompt(ctx, signals.SessionConfig{SessionID: s.id}, signals.PromptRequest{Text: text})
	if err != nil {
		return r, fmt.Errorf("prompt %q: %w", text, err)
	}
	r.turnID = res.TurnID
	if s.fl == nil {
		var fctx context.Context
		fctx, s.stopFl = context.WithCancel(context.Background())
		s.fl = s.sc.Follow(fctx, s.id)
	}
	var failure error
	err = s.fl.Watch(ctx, s.lastSeq, func(ev signals.Event) bool {
		now := time.Now()
		if ev.Kind == "gap" {
			failure = fmt.Errorf("journal gap after seq %d: the viewer fell behind retention", s.lastSeq)
			return false
		}
		s.lastSeq = ev.Seq
		if ev.TurnID != r.turnID {
			return true
		}
		switch ev.Kind {
		case signals.EventTurnStarted:
			r.startedAt = ev.At
		case signals.EventAgentUpdate:
			if i, at, ok := stampOf(ev.Data); ok {
				r.chunks = append(r.chunks, seenChunk{index: i, stamp: at, journaled: ev.At, visible: now})
			}
		case signals.EventTurnEnded:
			r.endedAt, r.visible = ev.At, now
			return false
		case signals.EventTurnFailed:
			failure = fmt.Errorf("turn %d failed: %s", r.turnID, ev.Data)
			return false
		}
		return true
	})
	if err == nil {
		err = failure
	}
	if err != nil {
		return r, fmt.Errorf("watch turn %d of %s: %w", r.turnID, s.id, err)
	}
	s.lastTurn = r.turnID
	return r, nil
}

// runMark is a point in a session's history: a run and how many events it had.
type runMark struct {
	runID  string
	length int64
}

// settle waits until the session's last turn is over for the server too (its RunTurn
// activity closed, the session's history no longer growing, nothing pending) and marks
// where its history stands. The viewer sees turn.ended as soon as the runner's
// turn_finished is journaled, before the activity's completion reaches the session.
func (s *tacpSession) settle(ctx context.Context) (runMark, error) {
	if s.lastTurn > 0 {
		if err := awaitRunTurn(ctx, env.c, s.id); err != nil {
			return runMark{}, fmt.Errorf("turn %d: %w", s.lastTurn, err)
		}
	}
	var prev runMark
	for {
		d, err := env.c.DescribeWorkflowExecution(ctx, signals.SessionWorkflowID(s.id), "")
		if err != nil {
			return runMark{}, err
		}
		info := d.GetWorkflowExecutionInfo()
		m := runMark{runID: info.GetExecution().GetRunId(), length: info.GetHistoryLength()}
		if m == prev && quiet(d) {
			return m, nil
		}
		prev = m
		select {
		case <-ctx.Done():
			return runMark{}, fmt.Errorf("session %s did not settle: %w", s.id, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// quiet says a described workflow has nothing pending: no workflow task, no activity, no
// child.
func quiet(d *workflowservice.DescribeWorkflowExecutionResponse) bool {
	return d.GetPendingWorkflowTask() == nil && len(d.GetPendingActivities()) == 0 && len(d.GetPendingChildren()) == 0
}

// awaitRunTurn waits until the RunTurn activity pending in session id's current run (a
// run drives one turn at a time) has closed, or that run has (it continued as new: the next
// run adopts the attempt): one long poll of the run's history instead of describing the
// session over and over. It returns at once when no RunTurn is pending.
func awaitRunTurn(ctx context.Context, c client.Client, id string) error {
	d, err := c.DescribeWorkflowExecution(ctx, signals.SessionWorkflowID(id), "")
	if err != nil {
		return err
	}
	pending := map[string]bool{} // by activity id
	for _, a := range d.GetPendingActivities() {
		if a.GetActivityType().GetName() == signals.ActivityRunTurn {
			pending[a.GetActivityId()] = true
		}
	}
	if len(pending) == 0 {
		return nil
	}
	mine := map[int64]bool{} // the pending activities by their scheduled event's id
	run := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	it := c.GetWorkflowHistory(ctx, signals.SessionWorkflowID(id), run, true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return fmt.Errorf("history of %s: %w", id, err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && pending[a.GetActivityId()] {
			mine[ev.GetEventId()] = true
			continue
		}
		if sid, ok := activityClosed(ev); ok && mine[sid] {
			return nil
		}
	}
	return nil // the run closed
}

// runTurnOf is the turn id of a RunTurn activity's ActivityTaskScheduled event (ok false:
// another event, or another activity).
func runTurnOf(dc converter.DataConverter, ev *historypb.HistoryEvent) (int64, bool) {
	a := ev.GetActivityTaskScheduledEventAttributes()
	if a == nil || a.GetActivityType().GetName() != signals.ActivityRunTurn {
		return 0, false
	}
	var in signals.RunTurnInput
	if err := dc.FromPayloads(a.GetInput(), &in); err != nil {
		return 0, false
	}
	return in.TurnID, true
}

// activityClosed is the scheduled event id of the activity an event closes (ok false: the
// event closes none).
func activityClosed(ev *historypb.HistoryEvent) (int64, bool) {
	switch {
	case ev.GetActivityTaskCompletedEventAttributes() != nil:
		return ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId(), true
	case ev.GetActivityTaskFailedEventAttributes() != nil:
		return ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId(), true
	case ev.GetActivityTaskTimedOutEventAttributes() != nil:
		return ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId(), true
	case ev.GetActivityTaskCanceledEventAttributes() != nil:
		return ev.GetActivityTaskCanceledEventAttributes().GetScheduledEventId(), true
	}
	return 0, false
}

// sessionHistory is the part of a session's history written between two marks.
type sessionHistory struct {
	events  int
	runs    int // runs it spans (more than 1 after a continue-as-new)
	byType  map[string]int
	batches int // turn_events signals
	// turns is each turn's RunTurn activity, by turn id.
	turns map[int64]*turnActivity
	// signaled is when the server recorded the turn_events signal carrying each stamped
	// chunk, by chunk index.
	signaled map[int]time.Time
	// firstChunkSignal is when the server recorded each turn's first turn_events signal that
	// carried an agent_message_chunk, by turn id.
	firstChunkSignal map[int64]time.Time
	// finished is when the server recorded each turn's turn_finished signal (the runner's
	// own report of an answered turn), by turn id.
	finished map[int64]time.Time
}

// turn is turn turnID's RunTurn activity with its turn_finished time, or an error when the
// history holds no RunTurn of it.
func (h sessionHistory) turn(turnID int64) (turnActivity, error) {
	t := h.turns[turnID]
	if t == nil {
		return turnActivity{}, fmt.Errorf("no RunTurn activity of turn %d in the session's history", turnID)
	}
	a := *t
	a.finished = h.finished[turnID]
	return a, nil
}

// historySince counts the session's history events after from, following the
// continue-as-new chain to the current run.
func (s *tacpSession) historySince(ctx context.Context, from runMark) (sessionHistory, error) {
	h := sessionHistory{byType: map[string]int{}, turns: map[int64]*turnActivity{}, finished: map[int64]time.Time{}, signaled: map[int]time.Time{}, firstChunkSignal: map[int64]time.Time{}}
	dc := converter.GetDefaultDataConverter()
	for runID := from.runID; runID != ""; {
		h.runs++
		next := ""
		// This run's RunTurn activities by their scheduled event's id (event ids are the run's).
		// A run after a continue-as-new starts with none: its activities are scheduled in it.
		byScheduled := map[int64]*turnActivity{}
		it := env.c.GetWorkflowHistory(ctx, signals.SessionWorkflowID(s.id), runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return h, fmt.Errorf("history of %s run %s: %w", s.id, runID, err)
			}
			if runID == from.runID && ev.GetEventId() <= from.length {
				continue
			}
			h.events++
			h.byType[ev.GetEventType().String()]++
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
			at := ev.GetEventTime().AsTime()
			if id, ok := runTurnOf(dc, ev); ok {
				t := h.turns[id]
				if t == nil {
					t = &turnActivity{scheduled: at}
					h.turns[id] = t
				}
				t.activities++
				t.events++
				byScheduled[ev.GetEventId()] = t
				continue
			}
			if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
				if t := byScheduled[a.GetScheduledEventId()]; t != nil {
					t.events++
					if t.started.IsZero() {
						t.started = at
					}
				}
				continue
			}
			if sid, ok := activityClosed(ev); ok {
				if t := byScheduled[sid]; t != nil {
					t.events++
					t.closed = at
				}
				continue
			}
			a := ev.GetWorkflowExecutionSignaledEventAttributes()
			if a != nil && a.GetSignalName() == signals.SignalTurnFinished {
				var fin signals.TurnFinishedSignal
				if err := dc.FromPayloads(a.GetInput(), &fin); err != nil {
					return h, fmt.Errorf("decode turn_finished: %w", err)
				}
				if _, seen := h.finished[fin.TurnID]; !seen {
					h.finished[fin.TurnID] = at
				}
				continue
			}
			if a == nil || a.GetSignalName() != signals.SignalTurnEvents {
				continue
			}
			h.batches++
			var sig signals.TurnEventsSignal
			if err := dc.FromPayloads(a.GetInput(), &sig); err != nil {
				return h, fmt.Errorf("decode turn_events: %w", err)
			}
			for _, raw := range sig.Events {
				if _, seen := h.firstChunkSignal[sig.TurnID]; !seen && strings.Contains(string(raw), `"agent_message_chunk"`) {
					h.firstChunkSignal[sig.TurnID] = ev.GetEventTime().AsTime()
				}
				if i, _, ok := stampOf(raw); ok {
					h.signaled[i] = ev.GetEventTime().AsTime()
				}
			}
		}
		runID = next
	}
	return h, nil
}

// turnActivity is one turn's RunTurn activity as the session's history has it: when the
// session first scheduled it (its workflow task completed), when that activity started
// (for an activity with a retry policy the Started event is written when it closes, but
// with the real start as its time), when the last of the turn's activities closed, and
// when the runner's turn_finished report was recorded.
type turnActivity struct {
	scheduled, started, closed time.Time
	// finished is the turn_finished signal's time; zero when the runner's report did not go
	// out and the session reported the turn itself when the activity closed.
	finished time.Time
	// activities is the RunTurn activities of the turn (more than one when its host did not
	// take it and it moved, or a new run adopted it); events their history events.
	activities, events int
}

// reported is when the session had the turn's outcome: the runner's turn_finished, or the
// activity's close.
func (a turnActivity) reported() time.Time {
	if !a.finished.IsZero() {
		return a.finished
	}
	return a.closed
}

// measuredTurn is a turn with the history it wrote.
type measuredTurn struct {
	seen    seenTurn
	session sessionHistory
	run     turnActivity // the turn's RunTurn, from the session's history
}

// measureTurn runs one turn between two settled points of the session's history (so that
// the count holds exactly this turn's events) and reads that history. Only the turn itself
// is timed, by the viewer.
func (s *tacpSession) measureTurn(ctx context.Context, text string) (measuredTurn, error) {
	var m measuredTurn
	from, err := s.settle(ctx)
	if err != nil {
		return m, err
	}
	if m.seen, err = s.turn(ctx, text); err != nil {
		return m, err
	}
	if _, err := s.settle(ctx); err != nil {
		return m, err
	}
	if m.session, err = s.historySince(ctx, from); err != nil {
		return m, err
	}
	m.run, err = m.session.turn(m.seen.turnID)
	return m, err
}

// --- figures ---

// ms is a duration in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// stats is p50, p99 and max of a sample, in milliseconds.
type stats struct {
	n             int
	p50, p99, max float64
}

func statsOf(lat []time.Duration) stats {
	if len(lat) == 0 {
		return stats{}
	}
	return stats{n: len(lat), p50: percentile(lat, 0.50), p99: percentile(lat, 0.99), max: percentile(lat, 1)}
}

// streamFigures is one streaming turn through one worker, with the baseline streamed
// alongside it.
type streamFigures struct {
	flush    time.Duration
	chunks   int
	direct   []time.Duration
	turn     measuredTurn
	fixed    int // session history events of a zero-work turn on the same worker (median)
	fixedRun int // of which its RunTurn activity's
	// second is each chunk's latency to a second viewer of the same session (a Watch of its
	// own), which asks its queries at the same moments as the first.
	second []time.Duration
}

func (f streamFigures) latencies() (total, toSignal, toJournal, toViewer []time.Duration) {
	for _, c := range f.turn.seen.chunks {
		total = append(total, c.latency())
		if sig, ok := f.turn.session.signaled[c.index]; ok {
			toSignal = append(toSignal, sig.Sub(c.stamp))
			toJournal = append(toJournal, c.journaled.Sub(sig))
		}
		toViewer = append(toViewer, c.visible.Sub(c.journaled))
	}
	return total, toSignal, toJournal, toViewer
}

// perChunk is the history events a streamed chunk adds beyond a zero-work turn's.
func (f streamFigures) perChunk() float64 {
	return float64(f.turn.session.events-f.fixed) / float64(f.chunks)
}

// measureStream measures the fixed history cost of a zero-work turn on s (median of
// three), then streams chunks through s while d streams the same prompt directly.
func measureStream(ctx context.Context, s *tacpSession, d *acpPeer, flush time.Duration, chunks int) (streamFigures, error) {
	f := streamFigures{flush: flush, chunks: chunks}
	var fixed, fixedRun []int
	for range 3 {
		m, err := s.measureTurn(ctx, zeroWork)
		if err != nil {
			return f, err
		}
		fixed, fixedRun = append(fixed, m.session.events), append(fixedRun, m.run.events)
	}
	f.fixed, f.fixedRun = median(fixed), median(fixedRun)

	var (
		wg        sync.WaitGroup
		directErr error
	)
	wg.Go(func() { f.direct, directErr = d.stream(ctx, chunks) })
	after := s.lastSeq
	wctx, stopSecond := context.WithCancel(ctx)
	defer stopSecond()
	wg.Go(func() {
		_ = s.sc.Watch(wctx, s.id, after, func(ev signals.Event) bool {
			if _, at, ok := stampOf(ev.Data); ok && ev.Kind == signals.EventAgentUpdate {
				f.second = append(f.second, time.Since(at))
			}
			return !signals.IsTerminal(ev.Kind)
		})
	})
	m, err := s.measureTurn(ctx, streamPrompt(chunks))
	if err != nil {
		stopSecond()
	}
	wg.Wait()
	if err == nil {
		err = directErr
	}
	if err == nil && len(m.seen.chunks) != chunks {
		err = fmt.Errorf("tacp stream: %d stamped chunks seen, want %d", len(m.seen.chunks), chunks)
	}
	f.turn = m
	return f, err
}

// warmRound is one zero-work turn each way.
type warmRound struct {
	direct time.Duration
	tacp   measuredTurn
}

func (r warmRound) total() time.Duration { return r.tacp.seen.visible.Sub(r.tacp.seen.start) }

// segments splits tacp's warm turn on one clock (the viewer's and the server's are the
// machine's): client → the session task that starts the turn and schedules its RunTurn;
// → RunTurn started (the task's completion, the activity's dispatch); → the runner's
// turn_finished recorded (the agent, the final flush, the report); → the session task
// that journals turn.ended; → viewer sees it.
func (r warmRound) segments() [5]time.Duration {
	st, a := r.tacp.seen, r.tacp.run
	return [5]time.Duration{
		st.startedAt.Sub(st.start),
		a.started.Sub(st.startedAt),
		a.reported().Sub(a.started),
		st.endedAt.Sub(a.reported()),
		st.visible.Sub(st.endedAt),
	}
}

// scheduling is part 2's first half: turn.started → RunTurn scheduled (the session task
// that journaled turn.started completes with the activity's command); dispatch the rest.
func (r warmRound) scheduling() time.Duration { return r.tacp.run.scheduled.Sub(r.tacp.seen.startedAt) }

var segmentNames = [5]string{
	"prompt → turn.started (update, session task)",
	"turn.started → RunTurn started (the activity's scheduling and dispatch)",
	"RunTurn started → turn_finished recorded (agent, flush, the runner's report)",
	"turn_finished recorded → turn.ended (session task)",
	"turn.ended journaled → visible to the viewer",
}

// median is the lower median of counts.
func median(counts []int) int {
	s := slices.Clone(counts)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func envInt(t testing.TB, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

// benchFlush is the fixture worker's first flush interval: TACP_BENCH_FLUSH (a duration, to
// weigh another -events.flush against the default side by side with the direct pipe), or
// the worker's default.
func benchFlush() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("TACP_BENCH_FLUSH")); err == nil && d > 0 {
		return d
	}
	return activities.DefaultFlushInterval
}

// startSlowWorker starts a second tacp worker flushing every slowFlush on its own task
// queue, stopped when t ends (after sessions registered later have closed).
func startSlowWorker(t testing.TB) *tacpclient.Client {
	_, sc := startBenchWorker(t, "slow", tacpworker.Options{FlushInterval: slowFlush})
	return sc
}

// startBenchWorker starts another tacp worker in this process on a task queue of its own,
// with its own data and transcript directories and the testagent binary (unless opts.Agent
// names another agent), stopped when t ends; opts sets the rest.
func startBenchWorker(t testing.TB, name string, opts tacpworker.Options) (*tacpworker.Worker, *tacpclient.Client) {
	opts.TaskQueue = "tacp-bench-" + name + "-" + signals.NewID()[:8]
	opts.DataDir = filepath.Join(env.tmp, "data-"+name)
	if opts.Agent == "" {
		opts.Agent = strconv.Quote(env.agentBinary) + " -transcripts " + strconv.Quote(filepath.Join(env.tmp, "transcripts-"+name))
	}
	w, err := tacpworker.Start(env.c, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w, tacpclient.NewClient(env.c, opts.TaskQueue)
}

// TestTurnTable prints the turn-path figures the README quotes:
//
//	TACP_BENCH=1 go test ./bench -run TestTurnTable -v
//
// TACP_BENCH_TURNS (default 100) sets the warm-turn rounds, TACP_BENCH_CHUNKS (default
// 1000) the chunks of each streaming turn.
func TestTurnTable(t *testing.T) {
	if os.Getenv("TACP_BENCH") != "1" {
		t.Skip("set TACP_BENCH=1 to measure the turn path")
	}
	rounds := envInt(t, "TACP_BENCH_TURNS", 100)
	chunks := envInt(t, "TACP_BENCH_CHUNKS", 1000)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	slow := startSlowWorker(t)
	d, err := startDirect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.close)
	open := func(sc *tacpclient.Client) *tacpSession {
		s, err := newTacpSession(ctx, sc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.close(); err != nil {
				t.Error(err)
			}
		})
		return s
	}
	fast, slowSession := open(env.sc), open(slow)

	// Warm turns, each way in turn, round by round.
	const warmup = 5
	var warm []warmRound
	for i := range warmup + rounds {
		var r warmRound
		if r.direct, err = d.prompt(ctx, zeroWork); err != nil {
			t.Fatal(err)
		}
		if r.tacp, err = fast.measureTurn(ctx, zeroWork); err != nil {
			t.Fatal(err)
		}
		if i >= warmup {
			warm = append(warm, r)
		}
	}

	// The first chunk of a turn (the first token a person waits for), each way in turn.
	var firstDirect []time.Duration
	var firsts []measuredTurn
	for range rounds / 2 {
		lat, err := d.stream(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		m, err := fast.measureTurn(ctx, streamPrompt(1))
		if err != nil {
			t.Fatal(err)
		}
		if len(m.seen.chunks) != 1 {
			t.Fatalf("first chunk: %d stamped chunks seen", len(m.seen.chunks))
		}
		firstDirect, firsts = append(firstDirect, lat[0]), append(firsts, m)
	}

	// Streaming turns, the baseline streaming alongside each.
	var streams []streamFigures
	for _, w := range []struct {
		s     *tacpSession
		flush time.Duration
	}{{fast, benchFlush()}, {slowSession, slowFlush}} {
		f, err := measureStream(ctx, w.s, d, w.flush, chunks)
		if err != nil {
			t.Fatalf("stream (flush %s): %v", w.flush, err)
		}
		streams = append(streams, f)
	}

	printEventTable(t, streams)
	printFirstChunkTable(t, firstDirect, firsts)
	printWarmTable(t, warm)
	printHistoryTable(t, streams)
}

func flushTable(t testing.TB, tw *tabwriter.Writer) {
	t.Helper()
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	fmt.Println()
}

func printEventTable(t testing.TB, streams []streamFigures) {
	var direct []time.Duration
	for _, f := range streams {
		direct = append(direct, f.direct...)
	}
	base := statsOf(direct)
	fmt.Printf("Event path: agent writes a chunk → a viewer sees it (%d chunks per turn at %d/s; targets p50 ≤ 100 ms, p99 ≤ 300 ms)\n",
		streams[0].chunks, int(time.Second/chunkEvery))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "path\tn\tp50 ms\tp99 ms\tmax ms\tp50 − baseline ms")
	fmt.Fprintf(tw, "direct ACP pipe (baseline, alongside each stream)\t%d\t%.2f\t%.2f\t%.2f\t\n", base.n, base.p50, base.p99, base.max)
	recordFigure(t, "event/direct", base.n, base.p50, base.p99)
	for _, f := range streams {
		total, _, _, _ := f.latencies()
		s := statsOf(total)
		recordFigure(t, "event/flush_"+f.flush.String(), s.n, s.p50, s.p99)
		fmt.Fprintf(tw, "tacp viewer woken by history (flush %s)\t%d\t%.2f\t%.2f\t%.2f\t%.2f\n",
			f.flush, s.n, s.p50, s.p99, s.max, s.p50-base.p50)
		s2 := statsOf(f.second)
		fmt.Fprintf(tw, "  a second viewer of the same session\t%d\t%.2f\t%.2f\t%.2f\t%.2f\n",
			s2.n, s2.p50, s2.p99, s2.max, s2.p50-base.p50)
	}
	flushTable(t, tw)

	fmt.Println("Where tacp's event latency goes (p50 / p99 ms per chunk; server and viewer share the machine's clock)")
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "segment")
	for _, f := range streams {
		fmt.Fprintf(tw, "\tflush %s", f.flush)
	}
	fmt.Fprintln(tw)
	rows := []string{
		"agent → turn_events signal recorded (flush wait, signal RPC)",
		"signal recorded → journaled (session workflow task starts)",
		"journaled → visible (task completes, history wake-up, query)",
	}
	for i, name := range rows {
		fmt.Fprint(tw, name)
		for _, f := range streams {
			_, a, b, c := f.latencies()
			s := statsOf([][]time.Duration{a, b, c}[i])
			fmt.Fprintf(tw, "\t%.1f / %.1f", s.p50, s.p99)
		}
		fmt.Fprintln(tw)
	}
	flushTable(t, tw)
}

// printFirstChunkTable prints the first chunk of a turn (flushed at once: the batcher's
// first event after a quiet spell) against the direct pipe, and where its time goes.
func printFirstChunkTable(t testing.TB, direct []time.Duration, firsts []measuredTurn) {
	var total, toSignal, toJournal, toViewer []time.Duration
	for _, m := range firsts {
		c := m.seen.chunks[0]
		total = append(total, c.latency())
		if sig, ok := m.session.signaled[c.index]; ok {
			toSignal = append(toSignal, sig.Sub(c.stamp))
			toJournal = append(toJournal, c.journaled.Sub(sig))
		}
		toViewer = append(toViewer, c.visible.Sub(c.journaled))
	}
	b, s := statsOf(direct), statsOf(total)
	recordFigure(t, "event/first_chunk", s.n, s.p50, s.p99)
	fmt.Println("First chunk of a turn (`/chunks 1 stamp` on a warm session: the first token a person waits for)")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "path\tn\tp50 ms\tp99 ms\tmax ms")
	fmt.Fprintf(tw, "direct ACP pipe (baseline)\t%d\t%.2f\t%.2f\t%.2f\n", b.n, b.p50, b.p99, b.max)
	fmt.Fprintf(tw, "tacp viewer woken by history\t%d\t%.2f\t%.2f\t%.2f\n", s.n, s.p50, s.p99, s.max)
	for _, seg := range []struct {
		name string
		lat  []time.Duration
	}{
		{"  agent → turn_events signal recorded (flush, signal RPC)", toSignal},
		{"  signal recorded → journaled (session workflow task starts)", toJournal},
		{"  journaled → visible (task completes, history wake-up, query)", toViewer},
	} {
		st := statsOf(seg.lat)
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\n", seg.name, st.n, st.p50, st.p99, st.max)
	}
	flushTable(t, tw)
}

func printWarmTable(t testing.TB, warm []warmRound) {
	var direct, tacp []time.Duration
	var segs [5][]time.Duration
	var scheduling, dispatch []time.Duration
	var events, runEvents []int
	for _, r := range warm {
		direct = append(direct, r.direct)
		tacp = append(tacp, r.total())
		for i, s := range r.segments() {
			segs[i] = append(segs[i], s)
		}
		scheduling = append(scheduling, r.scheduling())
		dispatch = append(dispatch, r.tacp.run.started.Sub(r.tacp.run.scheduled))
		events = append(events, r.tacp.session.events)
		runEvents = append(runEvents, r.tacp.run.events)
	}
	b, s := statsOf(direct), statsOf(tacp)
	recordFigure(t, "warm/direct", b.n, b.p50, b.p99)
	recordFigure(t, "warm/tacp", s.n, s.p50, s.p99)
	fmt.Println("Warm zero-work turn (`/chunks 0`, agent already running; target: tacp − direct ≤ 50 ms)")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "path\tn\tp50 ms\tp99 ms\tmax ms")
	fmt.Fprintf(tw, "direct ACP session/prompt round trip (baseline)\t%d\t%.2f\t%.2f\t%.2f\n", b.n, b.p50, b.p99, b.max)
	fmt.Fprintf(tw, "tacp Prompt → turn.ended visible to the viewer\t%d\t%.2f\t%.2f\t%.2f\n", s.n, s.p50, s.p99, s.max)
	fmt.Fprintf(tw, "difference (tacp − direct)\t\t%.2f\t%.2f\t\n", s.p50-b.p50, s.p99-b.p99)
	flushTable(t, tw)

	fmt.Println("Where tacp's warm turn goes (p50 / p99 ms; the segments add up to the total)")
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	for i, name := range segmentNames {
		st := statsOf(segs[i])
		fmt.Fprintf(tw, "%s\t%.1f / %.1f\n", name, st.p50, st.p99)
		if i == 1 {
			a, b := statsOf(scheduling), statsOf(dispatch)
			fmt.Fprintf(tw, "  of which → RunTurn scheduled (the session task completes)\t%.1f / %.1f\n", a.p50, a.p99)
			fmt.Fprintf(tw, "  → RunTurn started (dispatch)\t%.1f / %.1f\n", b.p50, b.p99)
		}
	}
	fmt.Fprintf(tw, "history events per zero-work turn: session (median)\t%d\n", median(events))
	fmt.Fprintf(tw, "  of which the RunTurn activity's (median)\t%d\n", median(runEvents))
	flushTable(t, tw)
}

func printHistoryTable(t testing.TB, streams []streamFigures) {
	fmt.Printf("History of one streaming turn (%d chunks at %d/s; target ≤ 1 event per 20 chunks, a 60-min turn under 10,240 events in one run)\n",
		streams[0].chunks, int(time.Second/chunkEvery))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "worker flush\tsession events\truns\tturn_events signals\tzero-work turn events\tevents/chunk (beyond zero-work)\tchunks/event\t60-min turn, flush fixed (projected)\t60-min turn, flush stretched (projected)\tof which RunTurn events")
	for _, f := range streams {
		h := f.turn.session
		per := f.perChunk()
		hour := float64(f.fixed) + per*float64(hourChunks)
		// The runner stretches its flush interval as a turn streams on: an hour is that
		// schedule's flushes at the events one flush cost in this run.
		perFlush := float64(h.events-f.fixed) / float64(max(h.batches, 1))
		flushes := 0
		for age := time.Duration(0); age < time.Hour; age += activities.FlushIntervalAt(f.flush, activities.DefaultFlushLongest, age) {
			flushes++
		}
		stretched := float64(f.fixed) + perFlush*float64(flushes)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.3f\t%.1f\t%.0f\t%.0f (%d flushes × %.1f)\t%d (zero-work %d)\n",
			f.flush, h.events, h.runs, h.batches, f.fixed, per, 1/per, hour, stretched, flushes, perFlush, f.turn.run.events, f.fixedRun)
	}
	flushTable(t, tw)
	for _, f := range streams {
		h := f.turn.session
		types := slices.SortedFunc(maps.Keys(h.byType), func(a, b string) int { return h.byType[b] - h.byType[a] })
		parts := make([]string, len(types))
		for i, k := range types {
			parts[i] = fmt.Sprintf("%s %d", k, h.byType[k])
		}
		fmt.Printf("flush %s, session events by type: %s\n", f.flush, strings.Join(parts, ", "))
	}
	fmt.Println()
}

// --- go test -bench ---

// directWarmP50 is the direct zero-work round trip's p50 (ms) from the direct_acp
// sub-benchmark, which the tacp sub-benchmark subtracts.
var directWarmP50 float64

// BenchmarkWarmTurn times one zero-work turn per op on a warm agent: direct_acp is the
// session/prompt round trip, tacp is Prompt until turn.ended is visible to a viewer woken by
// the session's history. tacp also reports overhead_p50_ms, its p50 minus direct_acp's.
func BenchmarkWarmTurn(b *testing.B) {
	if env == nil {
		b.Fatal("no bench fixture (TestMain did not set one up)")
	}
	ctx := context.Background()
	b.Run("direct_acp", func(b *testing.B) {
		d, err := startDirect(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(d.close)
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			took, err := d.prompt(ctx, zeroWork)
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, took)
		}
		b.StopTimer()
		directWarmP50 = percentile(lat, 0.50)
		b.ReportMetric(directWarmP50, "p50_ms")
		b.ReportMetric(percentile(lat, 0.99), "p99_ms")
	})
	b.Run("tacp", func(b *testing.B) {
		s, err := newTacpSession(ctx, env.sc)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.close() })
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			r, err := s.turn(ctx, zeroWork)
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, r.visible.Sub(r.start))
		}
		b.StopTimer()
		p50 := percentile(lat, 0.50)
		b.ReportMetric(p50, "p50_ms")
		b.ReportMetric(percentile(lat, 0.99), "p99_ms")
		if directWarmP50 > 0 {
			b.ReportMetric(p50-directWarmP50, "overhead_p50_ms")
		}
	})
}

// BenchmarkEventPath streams b.N stamped chunks at 50/s in one turn (an op is one chunk,
// so ns/op is about the 20 ms interval) and reports the chunks' latency from the agent's
// write: to the direct ACP client's callback, or to a viewer of tacp's events query woken
// by the session's history.
func BenchmarkEventPath(b *testing.B) {
	if env == nil {
		b.Fatal("no bench fixture (TestMain did not set one up)")
	}
	ctx := context.Background()
	report := func(b *testing.B, lat []time.Duration) {
		b.ReportMetric(percentile(lat, 0.50), "p50_ms")
		b.ReportMetric(percentile(lat, 0.99), "p99_ms")
	}
	b.Run("direct_acp", func(b *testing.B) {
		d, err := startDirect(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(d.close)
		b.ResetTimer()
		lat, err := d.stream(ctx, b.N)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		report(b, lat)
	})
	b.Run("tacp_events", func(b *testing.B) {
		s, err := newTacpSession(ctx, env.sc)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.close() })
		b.ResetTimer()
		r, err := s.turn(ctx, streamPrompt(b.N))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if len(r.chunks) != b.N {
			b.Fatalf("%d stamped chunks seen, want %d", len(r.chunks), b.N)
		}
		lat := make([]time.Duration, len(r.chunks))
		for i, c := range r.chunks {
			lat[i] = c.latency()
		}
		report(b, lat)
	})
}

// Compile-time check: the baseline's client is a whole ACP client.
var _ acp.Client = (*stampClient)(nil)

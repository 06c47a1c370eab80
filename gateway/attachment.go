package gateway

// An attachment is one connection's view of one session: it reads the journal in seq order
// (first the replay or catch-up, then live from the hub) and turns each event into what the
// client sees — session/update notifications, relayed permission requests, and the answers
// of the session/prompt calls waiting for their turns.

import (
	"context"
	"encoding/json"
	"math"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

// endedKept bounds the turn endings an attachment remembers for prompts that wait late.
const endedKept = 256

type attachment struct {
	c  *conn
	id string
	// held is set (under c.mu) once the connection holds the session's viewer lease
	// (leases.go): only then does closing the connection release it.
	held bool
	// watchOnly: the connection's person may watch this session but not act on it
	// (access.go), so its permission requests and questions are not relayed to them.
	watchOnly bool
	// role is the role the attachment's lease holds: the connection's, or observer when
	// watchOnly.
	role   string
	sub    *subscription
	ctx    context.Context
	cancel context.CancelFunc

	// Read and written by the goroutine that handles events (catchUp, then pump) only.
	sent      int64                                      // the last seq handled
	texts     map[string]string                          // client_message_id → prompt text
	openPerms map[string]signals.PermissionRequestedData // requested and not yet resolved
	toolCalls map[string]string                          // request_id → toolCallId
	// openElicits are the questions asked and not yet resolved (elicitation.go).
	openElicits map[string]signals.ElicitationRequestedData
	shown       settingsSent // the agent's offer as the client last saw it

	mu        sync.Mutex
	live      bool // past the catch-up: permission requests are relayed as they come
	mine      map[string]bool
	waiters   map[int64][]chan turnOutcome
	ended     map[int64]turnOutcome
	endOrder  []int64
	lastEnded int64 // the highest turn id seen ending
	relaying  map[string]context.CancelFunc
}

func newAttachment(c *conn, id string) *attachment {
	ctx, cancel := context.WithCancel(c.ctx)
	return &attachment{
		c: c, id: id, ctx: ctx, cancel: cancel,
		texts: map[string]string{}, openPerms: map[string]signals.PermissionRequestedData{},
		toolCalls: map[string]string{}, mine: map[string]bool{}, waiters: map[int64][]chan turnOutcome{},
		ended: map[int64]turnOutcome{}, relaying: map[string]context.CancelFunc{},
	}
}

// noReplay is the writeAfter of a catch-up that writes nothing (session/new,
// session/resume): the client starts from the journal's end.
const noReplay = math.MaxInt64

// caughtUp is where a catch-up left the attachment: the seq it has handled, and whether
// retention dropped events after writeAfter that the client never saw.
type caughtUp struct {
	seq              int64
	gap              bool
	firstRetainedSeq int64
}

// meta is the _meta of the answer to the session/new, load or resume that attached (none
// when it attached nothing new: the connection had the session already).
func (c caughtUp) meta() map[string]any {
	if c.seq == 0 && !c.gap {
		return nil
	}
	m := signals.ACPMeta{Seq: c.seq}
	if c.gap {
		m.Gap, m.FirstRetainedSeq = true, c.firstRetainedSeq
	}
	return m.Map()
}

// catchUp reads the whole retained journal, so that the attachment knows where things stand
// (prompt texts, open permission requests, ended turns), and writes to the client the
// events after writeAfter: 0 replays everything (session/load), a seq resumes after it
// (_meta.tacp.after_seq), noReplay writes nothing.
func (a *attachment) catchUp(ctx context.Context, writeAfter int64) (caughtUp, error) {
	var at caughtUp
	for first := true; ; first = false {
		res, err := a.c.client().Events(ctx, a.id, a.sent, eventsPage)
		if err != nil {
			return at, err
		}
		if first && writeAfter != noReplay && res.FirstRetainedSeq > writeAfter+1 {
			at.gap, at.firstRetainedSeq = true, res.FirstRetainedSeq
		}
		for _, ev := range res.Events {
			a.handle(ev, ev.Seq > writeAfter)
		}
		if len(res.Events) < eventsPage {
			at.seq = a.sent
			return at, nil
		}
	}
}

// goLive starts following the session: permission requests still open are relayed now,
// new events as the hub finds them.
func (a *attachment) goLive() {
	a.mu.Lock()
	a.live = true
	a.mu.Unlock()
	for _, d := range a.openPerms {
		a.relay(d)
	}
	for _, d := range a.openElicits {
		a.relayElicitation(d)
	}
	// The agent's modes, options and slash commands as they are now, at once: a client that
	// attached without a replay would otherwise see the commands only when the agent next
	// announces them.
	a.pushSettings(a.sent)
	a.sub = a.c.g.hub.subscribe(a.id, a.sent)
	go a.pump()
}

func (a *attachment) stop() {
	a.cancel()
	if a.sub != nil {
		a.sub.unsubscribe()
	}
}

// pump hands the events after a.sent to handle, in order, as the hub announces them.
func (a *attachment) pump() {
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-a.sub.notify:
		}
		for a.ctx.Err() == nil {
			evs, ok := a.sub.after(a.sent)
			if !ok {
				// Fallen behind the hub's cache (a client that reads slowly): read the
				// journal itself.
				ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
				res, err := a.c.client().Events(ctx, a.id, a.sent, eventsPage)
				cancel()
				if err != nil {
					a.c.g.o.Logger.Debug("events query failed", "session", a.id, "err", err)
					a.sub.wake()
					time.Sleep(a.c.g.o.PollFast)
					break
				}
				evs = res.Events
			}
			if len(evs) == 0 {
				break
			}
			for _, ev := range evs {
				if a.ctx.Err() != nil {
					return
				}
				a.handle(ev, true)
			}
		}
	}
}

// handle turns one event into what the client sees; write is false while a resume reads
// the journal only to know where things stand.
func (a *attachment) handle(ev signals.Event, write bool) {
	if ev.Seq <= a.sent {
		return
	}
	a.sent = ev.Seq
	log := a.c.g.o.Logger
	switch ev.Kind {
	case signals.EventPromptAccepted:
		var d signals.PromptAcceptedData
		if json.Unmarshal(ev.Data, &d) == nil {
			a.texts[d.ClientMessageID] = d.Text
		}
	case signals.EventTurnStarted:
		if write {
			a.c.g.wakeLease(a.id, a.role)
		}
		var d signals.TurnStartedData
		_ = json.Unmarshal(ev.Data, &d)
		text, known := a.texts[d.PromptClientMessageID]
		delete(a.texts, d.PromptClientMessageID)
		a.mu.Lock()
		mine := a.mine[d.PromptClientMessageID]
		a.mu.Unlock()
		// The user's own prompts, so that a replay reads as a conversation and other
		// clients see who asked what; the client that sent it has it already.
		if write && known && !mine {
			a.write(userMessage(a.id, ev.Seq, d.PromptClientMessageID, text))
		}
	case signals.EventAgentUpdate:
		if !write {
			return
		}
		u, err := agentUpdate(a.id, ev.Seq, ev.Data)
		if err != nil {
			log.Warn("journal event not relayed", "session", a.id, "seq", ev.Seq, "err", err)
			return
		}
		a.noteAgentUpdate(u.Update)
		a.write(u)
	case signals.EventAgentSettings, signals.EventModeChanged, signals.EventConfigOptionChanged:
		a.mu.Lock()
		live := a.live
		a.mu.Unlock()
		if !write || !live {
			return
		}
		var v signals.AgentSettings
		if ev.Kind == signals.EventAgentSettings && json.Unmarshal(ev.Data, &v) == nil {
			a.showSettings(ev.Seq, &v)
		} else {
			a.pushSettings(ev.Seq)
		}
	case signals.EventPermissionRequested:
		var d signals.PermissionRequestedData
		if json.Unmarshal(ev.Data, &d) != nil {
			return
		}
		a.openPerms[d.RequestID] = d
		a.toolCalls[d.RequestID] = toolCallID(d.ToolCall)
		a.mu.Lock()
		live := a.live
		a.mu.Unlock()
		if live {
			a.relay(d)
		}
	case signals.EventPermissionResolved:
		var r signals.PermissionResolution
		if json.Unmarshal(ev.Data, &r) != nil {
			return
		}
		delete(a.openPerms, r.RequestID)
		a.mu.Lock()
		if cancel := a.relaying[r.RequestID]; cancel != nil {
			cancel() // another client (or the policy, or the deadline) answered first
			delete(a.relaying, r.RequestID)
		}
		a.mu.Unlock()
		if write {
			a.write(permissionResolved(a.id, ev.Seq, a.toolCalls[r.RequestID], r))
		}
		delete(a.toolCalls, r.RequestID)
	case signals.EventElicitationRequested, signals.EventElicitationResolved, signals.EventElicitationCompleted:
		a.elicitationEvent(ev)
	case signals.EventAgentContextLost, signals.EventTurnRestarted, signals.EventWorkspaceMissing,
		signals.EventWorkspaceRestored, signals.EventWorkspaceCheckpoint:
		if text, ok := noticeText(ev); ok && write {
			a.write(notice(a.id, ev.Seq, ev.Kind, text, ev.Data))
		}
	case signals.EventTurnEnded, signals.EventTurnFailed:
		a.finish(ev.TurnID, outcomeOf(ev))
	case signals.EventSessionClosed:
		a.closeAll(outcomeOf(ev))
	}
}

func (a *attachment) write(u sessionUpdate) {
	if err := a.c.w.notify(acp.ClientMethodSessionUpdate, u); err != nil {
		a.c.g.o.Logger.Debug("session/update not written", "session", a.id, "err", err)
	}
}

func (a *attachment) markMine(clientMessageID string) {
	a.mu.Lock()
	a.mine[clientMessageID] = true
	a.mu.Unlock()
}

// wait returns a channel that gets the outcome of turn once its terminal event is handled
// (at once if it was).
func (a *attachment) wait(turn int64) <-chan turnOutcome {
	ch := make(chan turnOutcome, 1)
	a.mu.Lock()
	defer a.mu.Unlock()
	if o, ok := a.ended[turn]; ok {
		ch <- o
		return ch
	}
	if turn <= a.lastEnded {
		// Turns end in order: this one ended before the attachment remembers. Its journal
		// says how.
		go func() { ch <- a.lookupEnd(turn) }()
		return ch
	}
	a.waiters[turn] = append(a.waiters[turn], ch)
	return ch
}

func (a *attachment) finish(turn int64, o turnOutcome) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ch := range a.waiters[turn] {
		ch <- o
	}
	delete(a.waiters, turn)
	a.ended[turn] = o
	a.endOrder = append(a.endOrder, turn)
	if len(a.endOrder) > endedKept {
		delete(a.ended, a.endOrder[0])
		a.endOrder = a.endOrder[1:]
	}
	a.lastEnded = max(a.lastEnded, turn)
}

// closeAll answers every waiting prompt when the session closes.
func (a *attachment) closeAll(o turnOutcome) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for turn, chs := range a.waiters {
		for _, ch := range chs {
			ch <- o
		}
		delete(a.waiters, turn)
	}
	a.lastEnded = 1<<62 - 1 // nothing more will run
}

// lookupEnd finds how turn ended in the journal.
func (a *attachment) lookupEnd(turn int64) turnOutcome {
	ctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
	defer cancel()
	var after int64
	for {
		res, err := a.c.client().Events(ctx, a.id, after, eventsPage)
		if err != nil {
			return turnOutcome{err: rpcErr(err)}
		}
		for _, ev := range res.Events {
			if ev.TurnID == turn && (signals.IsTerminal(ev.Kind) || ev.Kind == signals.EventSessionClosed) {
				return outcomeOf(ev)
			}
		}
		if len(res.Events) == 0 {
			// Trimmed by retention: it ended, how is no longer known.
			return turnOutcome{stop: acp.StopReasonEndTurn}
		}
		after = res.Events[len(res.Events)-1].Seq
	}
}

// relay asks the client to answer a permission request and sends its answer to the
// session. The request is withdrawn ($/cancel_request) only when the session resolves it
// otherwise first: a connection that closes (a deck shutting down) leaves it open at the
// client, whose next connection is asked the same request again and answers that one.
func (a *attachment) relay(d signals.PermissionRequestedData) {
	if a.c.observer() || a.watchOnly {
		return
	}
	a.mu.Lock()
	if _, ok := a.relaying[d.RequestID]; ok {
		a.mu.Unlock()
		return
	}
	// Not a.ctx: its end would withdraw the request. The call ends with the SDK's
	// connection, which ends with ServeConn.
	ctx, cancel := context.WithCancel(context.WithoutCancel(a.ctx))
	a.relaying[d.RequestID] = cancel
	a.mu.Unlock()
	var tc acp.ToolCallUpdate
	_ = json.Unmarshal(d.ToolCall, &tc)
	opts := make([]acp.PermissionOption, 0, len(d.Options))
	for _, o := range d.Options {
		opts = append(opts, acp.PermissionOption{OptionId: acp.PermissionOptionId(o.OptionID), Name: o.Name, Kind: acp.PermissionOptionKind(o.Kind)})
	}
	req := acp.RequestPermissionRequest{SessionId: acp.SessionId(a.id), ToolCall: tc, Options: opts,
		Meta: signals.ACPMeta{RequestID: d.RequestID, Deadline: &d.Deadline}.Map()}
	go func() {
		defer cancel()
		resp, err := a.c.asc.RequestPermission(ctx, req)
		if err != nil || ctx.Err() != nil {
			return // withdrawn, or the client is gone
		}
		ans := signals.PermissionRespondRequest{RequestID: d.RequestID, ClientMsgID: signals.NewID(), ViewerID: a.c.viewer, AnsweredBy: a.c.answeredBy()}
		switch {
		case resp.Outcome.Selected != nil:
			ans.Outcome, ans.OptionID = "selected", string(resp.Outcome.Selected.OptionId)
		default:
			ans.Outcome = "cancelled"
		}
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer ccancel()
		if _, err := a.c.client().PermissionRespond(cctx, a.id, ans); err != nil {
			a.c.g.o.Logger.Warn("permission answer refused", "session", a.id, "request", d.RequestID, "err", err)
		}
	}()
}

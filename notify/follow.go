package notify

// The follower: which sessions to read, and what in their journals becomes a notification.
//
// Every Poll it lists the running sessions from visibility (one call, whatever their
// number) and reads the journal only of those that are doing something: a turn runs, a
// request waits, or their state or turn changed since the last look. An idle session costs
// nothing. In what it reads:
//
//   - a permission.requested whose permission.resolved is not in the same read was asked
//     of a person (an auto-decided request resolves in the same workflow step, so both are
//     always read together): notify;
//   - turn.ended and turn.failed: notify when chosen.
//
// A session seen for the first time is read from its start when it began after the
// follower did, and otherwise from where its journal stands, with its open requests taken
// from the status (so a deck that restarts asks again what is still open: same id). A
// session first seen idle is read when it next changes, from a short tail of its journal,
// for the endings of turns after the one it was at.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

// Sessions is what the follower reads of the sessions (tacpclient.Client has it).
type Sessions interface {
	ListWhere(ctx context.Context, where string, limit int) ([]tacpclient.SessionInfo, error)
	Status(ctx context.Context, sessionID string) (signals.Status, error)
	Events(ctx context.Context, sessionID string, afterSeq int64, limit int) (signals.EventsResult, error)
}

// FollowerOptions configure a Follower.
type FollowerOptions struct {
	Sessions Sessions
	// Send gets every notification (a Webhook's Send); it must not block.
	Send func(Notification)
	// Events are the events to notify (default DefaultEvents).
	Events map[string]bool
	// DeckURL is the deck's public URL, for the card links.
	DeckURL string
	// Poll is how often the sessions are looked at (default 2 s): the bound, with the
	// delivery, on how late a person hears of a request.
	Poll time.Duration
	// Limit bounds the running sessions listed per poll (default 1,000).
	Limit  int
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Follower turns journal events into notifications.
type Follower struct {
	o     FollowerOptions
	start time.Time
	// mu guards sessions, sent and order: a step reads several sessions at once.
	mu       sync.Mutex
	sessions map[string]*followed
	sent     map[string]bool // ids notified in this process
	order    []string
}

// followed is what the follower knows of one session.
type followed struct {
	key  string // state/turn/awaiting at the last look
	turn int64  // the turn it was at when first seen idle
	seq  int64  // read up to here; -1: not read yet
}

// tailRead is how far back a session first seen idle is read when it changes.
const tailRead = 256

// sentKept bounds the ids remembered as notified.
const sentKept = 10000

// NewFollower returns a Follower with o's defaults filled in; Run follows.
func NewFollower(o FollowerOptions) *Follower {
	if o.Events == nil {
		o.Events, _ = ParseEvents("")
	}
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
	if o.Limit <= 0 {
		o.Limit = 1000
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Follower{o: o, start: o.Now(), sessions: map[string]*followed{}, sent: map[string]bool{}}
}

// Run looks at the sessions every Poll until ctx ends.
func (f *Follower) Run(ctx context.Context) {
	t := time.NewTicker(f.o.Poll)
	defer t.Stop()
	for {
		if err := f.Step(ctx); err != nil && ctx.Err() == nil {
			f.o.Logger.Warn("notifications: sessions not read", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Step looks at the sessions once.
func (f *Follower) Step(ctx context.Context) error {
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	infos, err := f.o.Sessions.ListWhere(qctx, "ExecutionStatus = 'Running'", f.o.Limit)
	if err != nil {
		return err
	}
	running := make(map[string]bool, len(infos))
	// Sessions are read a few at a time: a busy cluster answers each events query in tens of
	// milliseconds or more, and one session's request must not wait behind a hundred reads.
	sem := make(chan struct{}, readersAtOnce)
	var wg sync.WaitGroup
	for _, info := range infos {
		running[info.SessionID] = true
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			// A session that does not answer (its worker gone, or too busy: the client asks
			// again while it may) holds one reader for readPatience at most, never the step.
			lctx, cancel := context.WithTimeout(qctx, readPatience)
			defer cancel()
			if err := f.look(lctx, info); err != nil && ctx.Err() == nil {
				f.o.Logger.Debug("notifications: session not read", "session", info.SessionID, "err", err)
			}
		}()
	}
	wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range f.sessions {
		if !running[id] {
			delete(f.sessions, id) // closed
		}
	}
	return nil
}

func (f *Follower) look(ctx context.Context, info tacpclient.SessionInfo) error {
	key := fmt.Sprintf("%s/%d/%t", info.State, info.Turn, info.AwaitingApproval)
	idle := info.State == signals.StateIdle && !info.AwaitingApproval
	f.mu.Lock()
	s := f.sessions[info.SessionID]
	if s == nil {
		// The turn whose end is old news: the last one when idle, the one before the
		// running one otherwise.
		s = &followed{seq: -1, turn: info.Turn}
		if !idle {
			s.turn--
		}
		f.sessions[info.SessionID] = s
		switch {
		case !info.StartedAt.Before(f.start):
			s.seq = 0 // new since the follower started: everything in it is news
		case idle:
			s.key = key // nothing to tell until it changes
			f.mu.Unlock()
			return nil
		}
	} else if idle && key == s.key {
		f.mu.Unlock()
		return nil
	}
	s.key = key
	f.mu.Unlock() // s is this session's alone: one reader per session per step
	if s.seq < 0 {
		if err := f.catchUp(ctx, info.SessionID, s); err != nil {
			return err
		}
	}
	return f.read(ctx, info.SessionID, s)
}

// catchUp starts reading a session that was running before the follower saw it: its open
// requests from the status, turn endings after s.turn from the journal's tail.
func (f *Follower) catchUp(ctx context.Context, id string, s *followed) error {
	st, err := f.o.Sessions.Status(ctx, id)
	if err != nil {
		return err
	}
	now := f.o.Now()
	for _, p := range st.PendingPermissions {
		f.notify(PermissionRequested(id, p.TurnID, p.RequestID, Tool{Title: p.Title, Kind: p.Kind}, p.Deadline, now, f.o.DeckURL))
	}
	s.seq = max(st.Journal.FirstSeq-1, st.Journal.LastSeq-tailRead, 0)
	res, err := f.o.Sessions.Events(ctx, id, s.seq, tailRead)
	if err != nil {
		return err
	}
	for _, ev := range res.Events {
		s.seq = ev.Seq
		if signals.IsTerminal(ev.Kind) && ev.TurnID > s.turn {
			f.turnEvent(id, ev)
		}
	}
	return nil
}

// read reads a session's journal after s.seq and notifies what it holds.
func (f *Follower) read(ctx context.Context, id string, s *followed) error {
	asked := map[string]signals.Event{}
	var order []string
	for {
		res, err := f.o.Sessions.Events(ctx, id, s.seq, eventsPage)
		if err != nil {
			return err
		}
		for _, ev := range res.Events {
			s.seq = ev.Seq
			switch ev.Kind {
			case signals.EventPermissionRequested:
				var d signals.PermissionRequestedData
				if json.Unmarshal(ev.Data, &d) == nil {
					asked[d.RequestID] = ev
					order = append(order, d.RequestID)
				}
			case signals.EventPermissionResolved:
				var r signals.PermissionResolution
				if json.Unmarshal(ev.Data, &r) == nil {
					delete(asked, r.RequestID) // decided by policy or a rule, or answered already
				}
			case signals.EventElicitationRequested, signals.EventElicitationResolved:
				order = questionEvent(ev, asked, order)
			case signals.EventTurnEnded, signals.EventTurnFailed:
				f.turnEvent(id, ev)
			}
		}
		if len(res.Events) < eventsPage {
			break
		}
	}
	for _, rid := range order {
		ev, ok := asked[rid]
		if !ok {
			continue
		}
		if ev.Kind == signals.EventElicitationRequested {
			f.notify(elicitationNotification(id, ev, f.o.DeckURL))
			continue
		}
		var d signals.PermissionRequestedData
		_ = json.Unmarshal(ev.Data, &d)
		f.notify(PermissionRequested(id, ev.TurnID, d.RequestID, toolOf(d.ToolCall), d.Deadline, ev.At, f.o.DeckURL))
	}
	return nil
}

// readersAtOnce bounds the sessions a step reads at once, and readPatience how long a step
// waits for one session's answers: the next step reads it again.
const (
	readersAtOnce = 16
	readPatience  = 5 * time.Second
)

// eventsPage is the page size of a journal read.
const eventsPage = 500

func (f *Follower) turnEvent(id string, ev signals.Event) {
	switch ev.Kind {
	case signals.EventTurnEnded:
		var d signals.TurnEndedData
		_ = json.Unmarshal(ev.Data, &d)
		f.notify(TurnEnded(id, ev.TurnID, d.StopReason, ev.At, f.o.DeckURL))
	case signals.EventTurnFailed:
		f.notify(TurnFailed(id, ev.TurnID, ev.At, f.o.DeckURL))
	}
}

// notify sends n once per process, when its event is chosen.
func (f *Follower) notify(n Notification) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.o.Events[n.Event] || f.sent[n.ID] {
		return
	}
	f.sent[n.ID] = true
	f.order = append(f.order, n.ID)
	if len(f.order) > sentKept {
		delete(f.sent, f.order[0])
		f.order = f.order[1:]
	}
	f.o.Logger.Info("notification", "id", n.ID, "event", n.Event)
	f.o.Send(n)
}

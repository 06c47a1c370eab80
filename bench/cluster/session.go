package main

// The chaos session as its client sees it: prompts sent until they are acknowledged, the
// journal read as it grows, and bounded waits on its events and on its status.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
	"github.com/tacp-dev/tacp/tacpclient"
)

// session is the chaos session and what its client has seen and been told.
type session struct {
	sc  *tacpclient.Client
	cfg signals.SessionConfig

	mu       sync.Mutex
	acked    map[string]int64 // client_message_id → turn_id of every acknowledged prompt
	chunksOf map[int64]int    // turn_id → N of a `/chunks N` prompt
	evs      []signals.Event  // the journal so far, read in order
}

func newSession(c client.Client, queue, id string) *session {
	return &session{sc: tacpclient.NewClient(c, queue), cfg: signals.SessionConfig{SessionID: id}, acked: map[string]int64{}, chunksOf: map[int64]int{}}
}

// prompt sends text until it is acknowledged or ctx ends, with the same client_message_id
// each time so a prompt accepted behind a lost answer is not queued twice.
func (s *session) prompt(ctx context.Context, text string) (signals.PromptResult, error) {
	cmid := signals.NewID()
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := s.sc.Prompt(actx, s.cfg, signals.PromptRequest{Text: text, ClientMessageID: cmid})
		cancel()
		if err == nil {
			s.mu.Lock()
			s.acked[cmid] = res.TurnID
			var n int
			if _, serr := fmt.Sscanf(text, "/chunks %d", &n); serr == nil {
				s.chunksOf[res.TurnID] = n
			}
			s.mu.Unlock()
			return res, nil
		}
		if rej, ok := rejection.As(err); ok {
			return res, fmt.Errorf("prompt %q rejected: %v", text, rej)
		}
		if serr := sleepCtx(ctx, 100*time.Millisecond); serr != nil {
			return res, fmt.Errorf("prompt %q not acknowledged (last error: %v)", text, err)
		}
	}
}

// refresh reads the journal past what was seen. A gap (events retention dropped before we
// read them) is an error: the check needs every event.
func (s *session) refresh(ctx context.Context) error {
	for {
		s.mu.Lock()
		after := int64(len(s.evs))
		s.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		res, err := s.sc.Events(rctx, s.cfg.SessionID, after, 500)
		cancel()
		if err != nil {
			return err
		}
		if res.Gap {
			return fmt.Errorf("%w after seq %d (first retained %d)", errJournalGap, after, res.FirstRetainedSeq)
		}
		if len(res.Events) == 0 {
			return nil
		}
		s.mu.Lock()
		s.evs = append(s.evs, res.Events...)
		s.mu.Unlock()
		if res.Events[len(res.Events)-1].Seq >= res.LastSeq {
			return nil
		}
	}
}

var errJournalGap = errors.New("journal gap")

// waitEvent polls the journal until match finds an event (true) or refuses one (an error),
// tolerating a cluster that is not answering yet, until ctx ends.
func (s *session) waitEvent(ctx context.Context, match func(signals.Event) (bool, error)) (signals.Event, error) {
	var last error
	seen := 0
	for {
		if err := s.refresh(ctx); err != nil {
			last = err
			if errors.Is(err, errJournalGap) {
				return signals.Event{}, err
			}
		}
		s.mu.Lock()
		evs := s.evs[seen:]
		seen = len(s.evs)
		s.mu.Unlock()
		for _, ev := range evs {
			ok, err := match(ev)
			if err != nil {
				return ev, err
			}
			if ok {
				return ev, nil
			}
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			if last != nil {
				return signals.Event{}, fmt.Errorf("%w (last error reading the journal: %v)", err, last)
			}
			return signals.Event{}, err
		}
	}
}

// terminalOf waits for turn's terminal event.
func (s *session) terminalOf(ctx context.Context, turn int64) (signals.Event, error) {
	return s.waitEvent(ctx, func(ev signals.Event) (bool, error) {
		return ev.TurnID == turn && signals.IsTerminal(ev.Kind), nil
	})
}

// endedOf waits for turn's terminal event and refuses one other than turn.ended.
func (s *session) endedOf(ctx context.Context, turn int64) (signals.Event, error) {
	ev, err := s.terminalOf(ctx, turn)
	if err == nil && ev.Kind != signals.EventTurnEnded {
		err = fmt.Errorf("turn %d %s", turn, outcome(ev))
	}
	return ev, err
}

// streaming waits for turn's first agent update and refuses the turn's end before it.
func (s *session) streaming(ctx context.Context, turn int64) error {
	_, err := s.waitEvent(ctx, func(ev signals.Event) (bool, error) {
		switch {
		case ev.TurnID != turn:
			return false, nil
		case ev.Kind == signals.EventAgentUpdate:
			return true, nil
		case signals.IsTerminal(ev.Kind):
			return false, fmt.Errorf("turn %d ended before it streamed: %s", turn, outcome(ev))
		}
		return false, nil
	})
	return err
}

// status queries the session until it answers and ok accepts the answer, or ctx ends.
func (s *session) status(ctx context.Context, ok func(signals.Status) bool) (signals.Status, error) {
	var last error
	for {
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		st, err := s.sc.Status(qctx, s.cfg.SessionID)
		cancel()
		if err == nil && ok(st) {
			return st, nil
		}
		if err != nil {
			last = err
		}
		if serr := sleepCtx(ctx, 100*time.Millisecond); serr != nil {
			return st, fmt.Errorf("last answer: state %q, agent host %q, queue %d (last error: %v)", st.State, st.AgentHost, len(st.Queue), last)
		}
	}
}

func idle(st signals.Status) bool { return st.State == signals.StateIdle && len(st.Queue) == 0 }

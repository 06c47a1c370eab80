package main

// The chaos run's journal checks: the journal read back whole and compared with what was
// read as it came, the chunks and restarts of a turn counted, and the invariants checked
// (seq contiguous from 1, one terminal event per turn.started, every acknowledged prompt
// journaled and run to its end, every `/chunks N` turn's chunks whole and in order).

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/tacp-dev/tacp/signals"
)

// reread reads the retained journal again from its first retained event and compares it
// with the events read as they came.
func (s *session) reread(ctx context.Context) error {
	fresh := &session{sc: s.sc, cfg: s.cfg}
	res, err := s.sc.Events(ctx, s.cfg.SessionID, 0, 1)
	if err != nil {
		return err
	}
	first := max(res.FirstRetainedSeq, 1)
	fresh.evs = make([]signals.Event, first-1) // placeholders for what retention dropped
	if err := fresh.refresh(ctx); err != nil {
		return err
	}
	if len(fresh.evs) != len(s.evs) {
		return fmt.Errorf("journal read again has %d events, %d were read as they came", len(fresh.evs), len(s.evs))
	}
	for i := int(first - 1); i < len(s.evs); i++ {
		a, b := fresh.evs[i], s.evs[i]
		if a.Seq != b.Seq || a.Kind != b.Kind || a.TurnID != b.TurnID || string(a.Data) != string(b.Data) {
			return fmt.Errorf("journal read again differs at seq %d: %s/%d, was %s/%d", b.Seq, a.Kind, a.TurnID, b.Kind, b.TurnID)
		}
	}
	return nil
}

// chunkOf returns i of an agent update that is the test agent's "chunk i\n" message chunk.
func chunkOf(ev signals.Event) (int, bool) {
	if ev.Kind != signals.EventAgentUpdate {
		return 0, false
	}
	var n struct {
		Update struct {
			Kind    string `json:"sessionUpdate"`
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"update"`
	}
	if json.Unmarshal(ev.Data, &n) != nil || n.Update.Kind != "agent_message_chunk" {
		return 0, false
	}
	var i int
	if _, err := fmt.Sscanf(n.Update.Content.Text, "chunk %d\n", &i); err != nil {
		return 0, false
	}
	return i, true
}

// countTurn counts the chunks and restarts journaled for turn.
func (s *session) countTurn(turn int64) (chunks, restarts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range s.evs {
		if ev.TurnID != turn {
			continue
		}
		if _, ok := chunkOf(ev); ok {
			chunks++
		}
		if ev.Kind == signals.EventTurnRestarted {
			restarts++
		}
	}
	return chunks, restarts
}

// check verifies the journal invariants of contract §5 (as e2e's checkInvariants does),
// that every acknowledged prompt is journaled, started and ended, and that the chunks of
// every `/chunks N` turn are whole.
func (s *session) check(rep *ChaosReport) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	started := map[int64]int{}
	terminal := map[int64]int{}
	accepted := map[string]int64{}
	for i, ev := range s.evs {
		if ev.Seq != int64(i+1) {
			return fmt.Errorf("journal seq not contiguous from 1: event %d has seq %d", i, ev.Seq)
		}
		switch {
		case ev.Kind == signals.EventTurnStarted:
			started[ev.TurnID]++
		case signals.IsTerminal(ev.Kind):
			if started[ev.TurnID] != 1 {
				return fmt.Errorf("seq %d: %s of turn %d without exactly one turn.started before it", ev.Seq, ev.Kind, ev.TurnID)
			}
			terminal[ev.TurnID]++
		case ev.Kind == signals.EventPromptAccepted:
			var d struct {
				ClientMessageID string `json:"client_message_id"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return fmt.Errorf("seq %d: prompt.accepted data: %w", ev.Seq, err)
			}
			accepted[d.ClientMessageID] = ev.TurnID
		}
	}
	for turn, n := range started {
		if n != 1 || terminal[turn] != 1 {
			return fmt.Errorf("turn %d: %d turn.started and %d terminal events, want exactly 1 each", turn, n, terminal[turn])
		}
	}
	for cmid, turn := range s.acked {
		got, ok := accepted[cmid]
		switch {
		case !ok:
			return fmt.Errorf("acknowledged prompt %s (turn %d) is not in the journal", cmid, turn)
		case got != turn:
			return fmt.Errorf("acknowledged prompt %s: journaled as turn %d, acknowledged as turn %d", cmid, got, turn)
		case started[turn] != 1:
			return fmt.Errorf("acknowledged prompt %s: turn %d never started", cmid, turn)
		}
	}
	turns := make([]int64, 0, len(s.chunksOf))
	for turn := range s.chunksOf {
		turns = append(turns, turn)
	}
	slices.Sort(turns)
	for _, turn := range turns {
		if err := checkChunks(s.evs, turn, s.chunksOf[turn]); err != nil {
			return err
		}
	}
	rep.Events, rep.Turns, rep.Acked = len(s.evs), len(started), len(s.acked)
	return nil
}

// checkChunks checks that turn, a `/chunks n` turn, ended end_turn with none of its chunks
// lost or doubled: each attempt (a turn.restarted starts the next, and viewers drop what the
// earlier one said) journaled chunk 1, 2, … in order, each once, and the attempt that ended
// the turn all n of them.
func checkChunks(evs []signals.Event, turn int64, n int) error {
	var attempts [][]int
	var cur []int
	end := "no terminal event"
	for _, ev := range evs {
		if ev.TurnID != turn {
			continue
		}
		if i, ok := chunkOf(ev); ok {
			cur = append(cur, i)
			continue
		}
		switch {
		case ev.Kind == signals.EventTurnRestarted:
			attempts, cur = append(attempts, cur), nil
		case signals.IsTerminal(ev.Kind):
			end = outcome(ev)
		}
	}
	attempts = append(attempts, cur)
	for a, chunks := range attempts {
		for j, i := range chunks {
			if i != j+1 {
				return fmt.Errorf("turn %d, attempt %d of %d: chunk %d journaled where chunk %d belongs (chunks %s)", turn, a+1, len(attempts), i, j+1, runs(chunks))
			}
		}
	}
	if end != "end_turn" {
		return fmt.Errorf("turn %d (/chunks %d) did not end end_turn: %s", turn, n, end)
	}
	if last := attempts[len(attempts)-1]; len(last) != n {
		return fmt.Errorf("turn %d ended with %d of its %d chunks journaled by the attempt that ended it (chunks %s)", turn, len(last), n, runs(last))
	}
	return nil
}

// runs writes chunk numbers as ranges: 1-40,40-120.
func runs(is []int) string {
	var out []string
	for i := 0; i < len(is); {
		j := i
		for j+1 < len(is) && is[j+1] == is[j]+1 {
			j++
		}
		if i == j {
			out = append(out, fmt.Sprint(is[i]))
		} else {
			out = append(out, fmt.Sprintf("%d-%d", is[i], is[j]))
		}
		i = j + 1
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ",")
}

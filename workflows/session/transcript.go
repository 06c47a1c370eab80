package session

// The transcript: the session's conversation as plain text, built from its journal, for
// seeding a new agent session when the agent's own could not be loaded on the host that
// took the turn (agent.context_lost, contract §10). Pure code over journal events: prompts,
// steers, the agent's text, tool calls' titles and outcomes, how each turn ended. The text of
// an attempt that turn.restarted superseded is left out, as viewers drop it. Bounded in
// bytes, newest kept.

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tacp-dev/tacp/signals"
)

// TranscriptHeader opens every non-empty transcript: it tells the agent what follows.
const TranscriptHeader = "[tacp: earlier context] This conversation continues in a new agent session: " +
	"the previous one could not be loaded on the worker that took this turn. Below is the " +
	"conversation so far, from tacp's journal. Treat it as what was said before; the new " +
	"prompt follows after it."

// transcriptTruncated is the line that replaces turns left out to stay within the bound.
const transcriptTruncated = "(earlier parts of the conversation were left out to stay within the size bound)"

// turnTranscript collects one turn's lines; agent text is gathered across chunks.
type turnTranscript struct {
	id    int64
	lines []string
	agent strings.Builder
	tools map[string]string // tool call id → title
	// start is where the current attempt's lines begin (turn.restarted drops what follows).
	start int
}

func (t *turnTranscript) flushAgent() {
	if t.agent.Len() > 0 {
		t.lines = append(t.lines, "Agent: "+t.agent.String())
		t.agent.Reset()
	}
}

func (t *turnTranscript) add(line string) {
	t.flushAgent()
	t.lines = append(t.lines, line)
}

// BuildTranscript renders the conversation of events (journal order) before turn beforeTurn
// (0: all turns), within maxBytes (<= 0: signals.DefaultTranscriptBytes), newest kept. It
// returns "" when there is nothing to carry.
func BuildTranscript(events []signals.Event, beforeTurn int64, maxBytes int) signals.TranscriptResult {
	return BuildTranscriptUnder(events, beforeTurn, maxBytes, "")
}

// BuildTranscriptUnder is BuildTranscript under header ("" or one over
// signals.MaxTranscriptHeaderBytes: TranscriptHeader).
func BuildTranscriptUnder(events []signals.Event, beforeTurn int64, maxBytes int, header string) signals.TranscriptResult {
	if maxBytes <= 0 {
		maxBytes = signals.DefaultTranscriptBytes
	}
	if header == "" || len(header) > signals.MaxTranscriptHeaderBytes {
		header = TranscriptHeader
	}
	return fitTranscript(transcriptBlocks(transcribeTurns(events, beforeTurn)), maxBytes, header)
}

// transcribeTurns reads the journal's events of the turns before beforeTurn (all when 0)
// into one transcript a turn, in the order the turns first appear.
func transcribeTurns(events []signals.Event, beforeTurn int64) []*turnTranscript {
	var (
		turns []*turnTranscript
		byID  = map[int64]*turnTranscript{}
	)
	turnOf := func(id int64) *turnTranscript {
		if t, ok := byID[id]; ok {
			return t
		}
		t := &turnTranscript{id: id, tools: map[string]string{}}
		byID[id] = t
		turns = append(turns, t)
		return t
	}
	for _, ev := range events {
		if beforeTurn > 0 && ev.TurnID >= beforeTurn {
			continue
		}
		switch ev.Kind {
		case signals.EventPromptAccepted:
			var d signals.PromptAcceptedData
			if json.Unmarshal(ev.Data, &d) == nil {
				turnOf(ev.TurnID).add("User: " + d.Text)
			}
		case signals.EventSteerAccepted:
			var d signals.SteerAcceptedData
			if json.Unmarshal(ev.Data, &d) == nil {
				turnOf(ev.TurnID).add("User (steering, during the turn): " + d.Text)
			}
		case signals.EventTurnRestarted:
			t := turnOf(ev.TurnID)
			t.agent.Reset()
			t.lines = t.lines[:t.start]
		case signals.EventTurnStarted:
			t := turnOf(ev.TurnID)
			t.flushAgent()
			t.start = len(t.lines)
		case signals.EventAgentUpdate:
			transcribeUpdate(turnOf(ev.TurnID), ev.Data)
		case signals.EventTurnEnded:
			var d signals.TurnEndedData
			if json.Unmarshal(ev.Data, &d) == nil && d.StopReason != "end_turn" {
				turnOf(ev.TurnID).add("(the turn ended: " + d.StopReason + ")")
			}
			turnOf(ev.TurnID).flushAgent()
		case signals.EventTurnFailed:
			var d signals.TurnFailedData
			if json.Unmarshal(ev.Data, &d) == nil {
				turnOf(ev.TurnID).add("(the turn failed: " + d.Error + ")")
			}
		}
	}
	return turns
}

// transcriptBlocks is one titled block of text a turn that said anything.
func transcriptBlocks(turns []*turnTranscript) []string {
	var blocks []string
	for _, t := range turns {
		t.flushAgent()
		if len(t.lines) == 0 {
			continue
		}
		title := fmt.Sprintf("## Turn %d", t.id)
		if t.id == 0 {
			title = "## Between turns"
		}
		blocks = append(blocks, title+"\n"+strings.Join(t.lines, "\n"))
	}
	return blocks
}

// fitTranscript joins the blocks under the header within maxBytes, the newest kept.
func fitTranscript(blocks []string, maxBytes int, header string) signals.TranscriptResult {
	res := signals.TranscriptResult{Turns: len(blocks)}
	if len(blocks) == 0 {
		return res
	}
	// Newest kept: take blocks from the end while they fit; cut the oldest one that does not
	// from its start.
	budget := maxBytes - len(header) - len(transcriptTruncated) - 4
	kept := []string{}
	for i := len(blocks) - 1; i >= 0 && budget > 0; i-- {
		b := blocks[i]
		if len(b)+2 > budget {
			b = "…" + tailUTF8(b, budget-2-len("…"))
			res.Truncated = true
			kept = append(kept, b)
			budget = 0
			break
		}
		kept = append(kept, b)
		budget -= len(b) + 2
		if i > 0 && budget <= 0 {
			res.Truncated = true
		}
	}
	if len(kept) < len(blocks) {
		res.Truncated = true
	}
	parts := []string{header}
	if res.Truncated {
		parts = append(parts, transcriptTruncated)
	}
	for i := len(kept) - 1; i >= 0; i-- {
		parts = append(parts, kept[i])
	}
	res.Text = strings.Join(parts, "\n\n")
	return res
}

// transcribeUpdate adds one ACP session/update to t: agent text, tool calls and outcomes.
// Thoughts, plans and unknown kinds are left out (the agent's reasoning is not the
// conversation, and bytes are scarce).
func transcribeUpdate(t *turnTranscript, raw json.RawMessage) {
	var n struct {
		Update struct {
			Kind       string          `json:"sessionUpdate"`
			ToolCallID string          `json:"toolCallId"`
			Title      string          `json:"title"`
			Status     string          `json:"status"`
			Content    json.RawMessage `json:"content"`
		} `json:"update"`
	}
	if json.Unmarshal(raw, &n) != nil {
		return
	}
	u := n.Update
	switch u.Kind {
	case "agent_message_chunk":
		var c struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(u.Content, &c) == nil && c.Type == "text" {
			t.agent.WriteString(c.Text)
		}
	case "tool_call":
		title := u.Title
		if title == "" {
			title = u.ToolCallID
		}
		t.tools[u.ToolCallID] = title
		line := "Tool call: " + title
		if u.Status == "completed" || u.Status == "failed" {
			line += " — " + u.Status
		}
		t.add(line)
	case "tool_call_update":
		if u.Status != "completed" && u.Status != "failed" {
			return
		}
		title := u.Title
		if title == "" {
			title = t.tools[u.ToolCallID]
		}
		if title == "" {
			title = u.ToolCallID
		}
		t.add("Tool call " + title + " — " + u.Status)
	}
}

// tailUTF8 returns the last at most n bytes of s, cut at a rune boundary.
func tailUTF8(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}

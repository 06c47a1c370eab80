// Package transcript reads a session's journal for a person: Renderer prints events as a
// readable transcript, Page reads the retained journal page by page, FollowTurn watches one
// turn to its end. The CLI (starter) and the demo print sessions with it.
package transcript

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/tacp-dev/tacp/signals"
)

// Renderer prints journal events as a readable transcript: agent text as it streams, tool
// calls and session events on lines of their own.
type Renderer struct {
	out, meta io.Writer
	midLine   bool
}

// NewRenderer returns a Renderer printing agent text to out and every other line to meta.
func NewRenderer(out, meta io.Writer) *Renderer { return &Renderer{out: out, meta: meta} }

// Flush ends the agent text line in progress, if any.
func (r *Renderer) Flush() {
	if r.midLine {
		fmt.Fprintln(r.out)
		r.midLine = false
	}
}

func (r *Renderer) line(format string, args ...any) {
	r.Flush()
	fmt.Fprintf(r.meta, format+"\n", args...)
}

// Render prints one event.
func (r *Renderer) Render(ev signals.Event) {
	switch ev.Kind {
	case signals.EventAgentUpdate:
		r.agentUpdate(ev.Data)
	case signals.EventPromptAccepted:
		var d signals.PromptAcceptedData
		_ = json.Unmarshal(ev.Data, &d)
		r.line("> %s", firstLine(d.Text))
	case signals.EventTurnStarted, signals.EventTurnRestarted:
		var d signals.TurnStartedData
		_ = json.Unmarshal(ev.Data, &d)
		r.line("[%s: turn %d, attempt %d]", ev.Kind, ev.TurnID, d.Attempt)
		if d.Resumed {
			r.line("[turn %d: the agent already held the prompt: it was asked to continue, not told again; the lost attempt's partial output above is superseded]", ev.TurnID)
		}
	case signals.EventAgentContextLost:
		var d signals.AgentContextLostData
		_ = json.Unmarshal(ev.Data, &d)
		carried := fmt.Sprintf("%d bytes of the conversation carried over", d.Carried)
		if d.Carried == 0 {
			carried = "the conversation was not carried over"
		}
		r.line("[agent context lost in turn %d: %s; new agent session %s, %s]", ev.TurnID, d.Reason, d.NewSessionID, carried)
	case signals.EventWorkspaceMissing:
		var d signals.WorkspaceMissingData
		_ = json.Unmarshal(ev.Data, &d)
		r.line("[workspace missing in turn %d: %s is not on %s (%s)]", ev.TurnID, d.Path, d.Host, d.Action)
	case signals.EventWorkspaceRestored:
		var d signals.WorkspaceRestoredData
		_ = json.Unmarshal(ev.Data, &d)
		r.line("[workspace restored in turn %d on %s: the checkpoint of turn %d, %s]", ev.TurnID, d.Host, d.Turn, shortID(d.From))
	case signals.EventWorkspaceCheckpoint:
		var d signals.WorkspaceCheckpointData
		_ = json.Unmarshal(ev.Data, &d)
		if d.Error != "" {
			r.line("[workspace checkpoint of turn %d failed: %s]", d.Turn, d.Error)
			break
		}
		skipped := ""
		if len(d.Skipped) > 0 {
			skipped = fmt.Sprintf(", %d large files skipped", len(d.Skipped))
		}
		r.line("[workspace checkpoint %s of turn %d: %d files changed, +%d -%d%s]", shortID(d.ID), d.Turn, d.FilesChanged, d.Insertions, d.Deletions, skipped)
	case signals.EventTurnEnded:
		var d signals.TurnEndedData
		_ = json.Unmarshal(ev.Data, &d)
		r.line("[turn %d ended: %s]", ev.TurnID, d.StopReason)
	case signals.EventTurnFailed:
		var d signals.TurnFailedData
		_ = json.Unmarshal(ev.Data, &d)
		r.line("[turn %d failed: %s]", ev.TurnID, d.Error)
	case signals.EventPermissionRequested:
		var d signals.PermissionRequestedData
		_ = json.Unmarshal(ev.Data, &d)
		var tc struct {
			Title string `json:"title"`
		}
		_ = json.Unmarshal(d.ToolCall, &tc)
		opts := make([]string, len(d.Options))
		for i, o := range d.Options {
			opts[i] = o.OptionID
		}
		r.line("[permission %s: %s; options %s; answer with: starter approve|deny --session ... %s]", d.RequestID, tc.Title, strings.Join(opts, ", "), d.RequestID)
	case signals.EventPermissionResolved:
		var d signals.PermissionResolution
		_ = json.Unmarshal(ev.Data, &d)
		r.line("[permission %s: %s %s by %s]", d.RequestID, d.Outcome, d.OptionID, d.DecidedBy)
	case signals.EventSteerAccepted:
		var d signals.SteerAcceptedData
		_ = json.Unmarshal(ev.Data, &d)
		r.line("[steer %d.%d accepted: %s]", d.Ref.TurnID, d.Ref.Offset, firstLine(d.Text))
	case signals.EventSteerDelivered:
		var d signals.SteerDeliveredData
		_ = json.Unmarshal(ev.Data, &d)
		r.line("[steer %d.%d delivered: %s]", ev.TurnID, d.Offset, d.How)
	case signals.EventAgentSettings:
		var d signals.AgentSettings
		_ = json.Unmarshal(ev.Data, &d)
		// Capabilities alone are for editors, not for a person's transcript.
		if text := DescribeSettings(d); text != "" {
			r.line("[agent offers %s]", text)
		}
	case signals.EventModeChanged:
		var d signals.ModeChangedData
		_ = json.Unmarshal(ev.Data, &d)
		r.line("[mode %s%s]", d.ModeID, by(d.ViewerID))
	case signals.EventConfigOptionChanged:
		var d signals.ConfigOptionChangedData
		_ = json.Unmarshal(ev.Data, &d)
		r.line("[%s %s%s]", d.ConfigID, d.Value, by(d.ViewerID))
	case "gap":
		r.line("[older events trimmed]")
	default:
		r.line("[%s %s]", ev.Kind, Compact(ev.Data))
	}
}

// agentUpdate prints one ACP session/update: text chunks inline, the rest as a line.
func (r *Renderer) agentUpdate(raw json.RawMessage) {
	var n struct {
		Update struct {
			Kind    string          `json:"sessionUpdate"`
			Content json.RawMessage `json:"content"` // a block, or a list for tool calls
			Title   string          `json:"title"`
			Status  string          `json:"status"`
			ToolID  string          `json:"toolCallId"`
		} `json:"update"`
	}
	if json.Unmarshal(raw, &n) != nil {
		r.line("[agent.update %s]", Compact(raw))
		return
	}
	u := n.Update
	var block struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(u.Content, &block)
	switch u.Kind {
	case "agent_message_chunk":
		fmt.Fprint(r.out, block.Text)
		r.midLine = !strings.HasSuffix(block.Text, "\n")
	case "agent_thought_chunk":
		r.line("(thinking) %s", block.Text)
	case "tool_call":
		r.line("[tool %s: %s (%s)]", u.ToolID, u.Title, u.Status)
	case "tool_call_update":
		r.line("[tool %s: %s]", u.ToolID, u.Status)
	case "user_message_chunk":
	default:
		r.line("[%s]", u.Kind)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// Compact is raw cut to 200 bytes, for a line of its own.
func Compact(raw json.RawMessage) string {
	if len(raw) > 200 {
		return string(raw[:200]) + "…"
	}
	return string(raw)
}

// by names who made a change ("" when the agent did).
func by(viewer string) string {
	if viewer == "" {
		return ""
	}
	return " (by " + viewer + ")"
}

// DescribeSettings is what an agent offers, for a person: "modes default, plan (current
// plan); model sonnet; 3 commands". Empty when it offers nothing a person chooses.
func DescribeSettings(s signals.AgentSettings) string {
	var parts []string
	if len(s.Modes) > 0 {
		ids := make([]string, 0, len(s.Modes))
		for _, raw := range s.Modes {
			var m struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(raw, &m) == nil && m.ID != "" {
				ids = append(ids, m.ID)
			}
		}
		part := "modes " + strings.Join(ids, ", ")
		if s.CurrentModeID != "" {
			part += " (current " + s.CurrentModeID + ")"
		}
		parts = append(parts, part)
	}
	for _, raw := range s.ConfigOptions {
		var o struct {
			ID           string `json:"id"`
			CurrentValue any    `json:"currentValue"`
		}
		if json.Unmarshal(raw, &o) != nil || o.ID == "" || o.ID == "mode" && len(s.Modes) > 0 {
			continue // the mode option repeats the modes
		}
		parts = append(parts, fmt.Sprintf("%s %v", o.ID, o.CurrentValue))
	}
	switch n := len(s.AvailableCommands); n {
	case 0:
	case 1:
		parts = append(parts, "1 command")
	default:
		parts = append(parts, fmt.Sprintf("%d commands", n))
	}
	return strings.Join(parts, "; ")
}

// shortID is a checkpoint's commit id as git abbreviates it.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

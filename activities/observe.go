package activities

// What the runner learns from the agent's session/update stream while a turn runs, beside
// relaying it: the agent's own name of each tool call (claude-agent-acp gives it on the
// tool_call update, in _meta.claudeCode.toolName, and not on the permission request that
// follows), so that a rule remembers the tool and not one file. It reads the raw params the
// tap hands over, in wire order, so a name is known before the request about its call
// reaches the SDK.

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/tacp-dev/tacp/signals"
)

// maxToolNames bounds the tool calls a turn remembers names of: past it the oldest half
// is forgotten (a request comes right after its tool_call).
const maxToolNames = 4096

// turnObserver watches one turn's updates.
type turnObserver struct {
	mu    sync.Mutex
	tools map[string]string // toolCallId → the agent's tool name
	order []string          // toolCallIds, oldest first
}

func newTurnObserver() *turnObserver {
	return &turnObserver{tools: map[string]string{}}
}

// observe reads one session/update's params.
func (o *turnObserver) observe(raw json.RawMessage) {
	if !bytes.Contains(raw, []byte("toolName")) {
		return // the cheap filter: only a _meta tool name is looked for
	}
	var p struct {
		Update struct {
			Kind       string                     `json:"sessionUpdate"`
			ToolCallID string                     `json:"toolCallId"`
			Meta       map[string]json.RawMessage `json:"_meta"`
		} `json:"update"`
	}
	if json.Unmarshal(raw, &p) != nil || p.Update.ToolCallID == "" {
		return
	}
	if k := p.Update.Kind; k != "tool_call" && k != "tool_call_update" {
		return
	}
	if name := signals.MetaToolName(p.Update.Meta); name != "" {
		o.noteTool(p.Update.ToolCallID, name)
	}
}

func (o *turnObserver) noteTool(id, name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.tools[id]; !ok {
		o.order = append(o.order, id)
		if len(o.order) > maxToolNames {
			for _, old := range o.order[:maxToolNames/2] {
				delete(o.tools, old)
			}
			o.order = append([]string(nil), o.order[maxToolNames/2:]...)
		}
	}
	o.tools[id] = name
}

// toolName is the agent's name of tool call id, "" when it gave none.
func (o *turnObserver) toolName(id string) string {
	if o == nil {
		return ""
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.tools[id]
}

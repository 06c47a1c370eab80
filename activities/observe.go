package activities

// What the runner learns from the agent's session/update stream while a turn runs, beside
// relaying it:
//
//   - the agent's own name of each tool call (claude-agent-acp gives it on the tool_call
//     update, in _meta.claudeCode.toolName, and not on the permission request that follows),
//     so that a rule remembers the tool and not one file. The tap hands the raw params over
//     in wire order, so a name is known before the request about its call reaches the SDK;
//   - the turn's token usage (turnUsage): what each prompt's answer reports, summed, and the
//     agent's last usage_update.

import (
	"bytes"
	"encoding/json"
	"sync"
	"sync/atomic"

	acp "github.com/coder/acp-go-sdk"

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
	usage turnUsage
	// failure is the typed failure of the last session/prompt answer (limits.go).
	failure atomic.Pointer[agentFailure]
}

func newTurnObserver() *turnObserver {
	return &turnObserver{tools: map[string]string{}}
}

// observe reads one session/update's params.
func (o *turnObserver) observe(raw json.RawMessage) {
	if bytes.Contains(raw, []byte("usage_update")) {
		o.observeUsage(raw)
	}
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

// turnUsage is a turn's token usage as the agent reports it, in the two ways ACP has:
//
//   - PromptResponse.usage, the tokens one prompt spent: every field the agent gives
//     (inputTokens, outputTokens, totalTokens, and cachedReadTokens, cachedWriteTokens,
//     thoughtTokens when it gives them) is summed over the turn's prompts, the ones answered
//     cancelled included (an interrupted prompt and a cancelled turn spent them too). These
//     are the turn's top-level counters, which the session sums into its totals;
//   - session/update usage_update, a gauge: `used` is the tokens in the context window now,
//     `size` the window, `cost` the session's cumulative cost so far. Summing it would count
//     the context again with every update (claude-agent-acp sends one per streamed message,
//     codex-acp one per model request), so the last one of the turn is kept whole, as
//     `context: {used, size}` and `cost: {amount, currency}`: objects, which the session
//     keeps as the latest value, never adds. An agent that reports only usage_update
//     (codex-acp) shows its context and cost that way; it reports no per-turn token count to
//     sum.
//
// A turn cut short still reports what it has: the usage_update seen before a kill, and the
// usage of every prompt the agent answered.
type turnUsage struct {
	prompts                          int // prompts that answered with usage
	input, output, total             int64
	cachedRead, cachedWrite, thought *int64
	context                          *usageContext
	cost                             *acp.Cost
}

type usageContext struct {
	Used int64 `json:"used"`
	Size int64 `json:"size"`
}

// observeUsage keeps the last usage_update.
func (o *turnObserver) observeUsage(raw json.RawMessage) {
	var p struct {
		Update struct {
			Kind string    `json:"sessionUpdate"`
			Used *int64    `json:"used"`
			Size *int64    `json:"size"`
			Cost *acp.Cost `json:"cost"`
		} `json:"update"`
	}
	if json.Unmarshal(raw, &p) != nil || p.Update.Kind != "usage_update" || p.Update.Used == nil || p.Update.Size == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.usage.context = &usageContext{Used: *p.Update.Used, Size: *p.Update.Size}
	if p.Update.Cost != nil {
		o.usage.cost = p.Update.Cost
	}
}

// addPromptUsage adds one prompt's answered usage.
func (o *turnObserver) addPromptUsage(u *acp.Usage) {
	if u == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	t := &o.usage
	t.prompts++
	t.input += int64(u.InputTokens)
	t.output += int64(u.OutputTokens)
	t.total += int64(u.TotalTokens)
	addOptional(&t.cachedRead, u.CachedReadTokens)
	addOptional(&t.cachedWrite, u.CachedWriteTokens)
	addOptional(&t.thought, u.ThoughtTokens)
}

func addOptional(sum **int64, n *int) {
	if n == nil {
		return
	}
	if *sum == nil {
		*sum = new(int64)
	}
	**sum += int64(*n)
}

// usageJSON is the turn's usage for RunTurnResult.Usage; nil when the agent reported none.
func (o *turnObserver) usageJSON() json.RawMessage {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := o.usage
	out := map[string]any{}
	if t.prompts > 0 {
		out["inputTokens"], out["outputTokens"], out["totalTokens"] = t.input, t.output, t.total
		for k, v := range map[string]*int64{"cachedReadTokens": t.cachedRead, "cachedWriteTokens": t.cachedWrite, "thoughtTokens": t.thought} {
			if v != nil {
				out[k] = *v
			}
		}
	}
	if t.context != nil {
		out["context"] = t.context
	}
	if t.cost != nil {
		out["cost"] = t.cost
	}
	if len(out) == 0 {
		return nil
	}
	b, _ := json.Marshal(out) // map keys marshal sorted: the same bytes every time
	return b
}

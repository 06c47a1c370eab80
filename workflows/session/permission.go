package session

// The permission policy (contract §6 "Permissions"): decides whether an agent's permission
// request is resolved at once or asked, and remembers the tools a person allowed always.
// Pure code: the session shell journals and delivers what it decides.
//
//   - allow_all resolves every request at once (decided_by policy);
//   - under any other level, a tool call that names a path outside the session's workspace
//     is asked, whatever the rules and its kind (contract §10);
//   - a remembered tool resolves at once (decided_by rule);
//   - ask_for_risky lets think through, read and search when every path they name is
//     inside the workspace (one that names none is asked: unknown means asked), and fetch
//     when it names no path outside (decided_by policy);
//   - ask_always asks for everything else, and so does ask_for_risky.
//
// Requests from a runner older than workspace roots carry no paths verdict ("") and are
// decided as they were then (read, search, think and fetch pass under ask_for_risky), so
// that recorded sessions replay unchanged.
//
// A request that offers no allow option is always asked: there is nothing to choose.

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/tacp-dev/tacp/signals"
)

// harmlessKinds pass silently under ask_for_risky.
var harmlessKinds = []string{"read", "search", "think", "fetch"}

// Policy is the session's permission level and remembered rules (sorted tool keys).
type Policy struct {
	Level string   `json:"level"`
	Rules []string `json:"rules"`
}

// ValidPolicyLevel reports whether level is one of the three levels.
func ValidPolicyLevel(level string) bool { return signals.ValidPolicyLevel(level) }

// ToolKey is the key a rule remembers a tool by: the agent's own tool name when the tool
// call's _meta gives one (`_meta.toolName`, or `toolName` of an object in `_meta`),
// otherwise its kind and title; "" (never remembered) for a call with neither.
func ToolKey(toolCall json.RawMessage) string { return RuleKey(toolCall, "") }

// RuleKey is ToolKey with the tool name the runner learned from the tool_call update that
// announced the call (signals.PermissionRequestedSignal.ToolName), used when the request's
// own _meta names none: claude-agent-acp names its tools only there, and kind + title would
// remember one file or one command instead of the tool.
func RuleKey(toolCall json.RawMessage, toolName string) string {
	var tc struct {
		Kind  string                     `json:"kind"`
		Title string                     `json:"title"`
		Meta  map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(toolCall, &tc)
	if name := signals.MetaToolName(tc.Meta); name != "" {
		return "tool:" + name
	}
	if toolName != "" {
		return "tool:" + toolName
	}
	if tc.Title == "" {
		// No identity: a rule for it would allow every untitled call of the kind, whatever
		// it does. Such calls are never remembered, and always asked.
		return ""
	}
	return tc.Kind + ":" + tc.Title
}

// harmless reports whether ask_for_risky lets a tool call of kind through, given where its
// paths lie (see the package comment).
func harmless(kind, paths string) bool {
	if !slices.Contains(harmlessKinds, kind) {
		return false
	}
	switch {
	case paths == "": // an older runner: as before workspace roots
		return true
	case kind == "think":
		return true
	case kind == "fetch":
		return paths != signals.PathsOutside
	default: // read, search
		return paths == signals.PathsInside
	}
}

func toolKind(toolCall json.RawMessage) string {
	var tc struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(toolCall, &tc)
	return tc.Kind
}

// Decide resolves a request at once, or says it must be asked. paths is the runner's
// verdict on where the tool call's files lie (signals.PathsInside, PathsOutside, PathsNone,
// or "" from an older runner).
func (p *Policy) Decide(requestID string, toolCall json.RawMessage, options []signals.PermissionOption, paths string) (signals.PermissionResolution, bool) {
	return p.DecideNamed(requestID, toolCall, "", options, paths)
}

// DecideNamed is Decide for a request whose tool the runner named (see RuleKey).
func (p *Policy) DecideNamed(requestID string, toolCall json.RawMessage, toolName string, options []signals.PermissionOption, paths string) (signals.PermissionResolution, bool) {
	res := signals.PermissionResolution{RequestID: requestID, Outcome: signals.OutcomeSelected}
	switch {
	case p.Level == signals.PolicyAllowAll:
		res.DecidedBy = signals.DecidedByPolicy
		res.OptionID = pickOption(options, "allow_once", "allow_always")
	case paths == signals.PathsOutside:
		// Outside the workspace: a person decides (no rule or kind lets it through).
	case p.Remembers(RuleKey(toolCall, toolName)):
		res.DecidedBy = signals.DecidedByRule
		res.OptionID = pickOption(options, "allow_always", "allow_once")
	case p.Level == signals.PolicyAskForRisky && harmless(toolKind(toolCall), paths):
		res.DecidedBy = signals.DecidedByPolicy
		res.OptionID = pickOption(options, "allow_once", "allow_always")
	}
	if res.DecidedBy == "" || res.OptionID == "" {
		return signals.PermissionResolution{}, true
	}
	return res, false
}

// Expire resolves a request whose deadline passed: fail closed, with a reject option when
// the request offers one; with none, the agent is answered cancelled.
func Expire(requestID string, options []signals.PermissionOption) signals.PermissionResolution {
	return signals.PermissionResolution{
		RequestID: requestID,
		Outcome:   signals.OutcomeExpired,
		OptionID:  pickOption(options, "reject_once", "reject_always"),
		DecidedBy: signals.DecidedByDeadline,
	}
}

// pickOption returns the id of the first option of the first kind offered.
func pickOption(options []signals.PermissionOption, kinds ...string) string {
	for _, k := range kinds {
		for _, o := range options {
			if o.Kind == k {
				return o.OptionID
			}
		}
	}
	return ""
}

// Remembers reports whether key is a remembered tool.
func (p *Policy) Remembers(key string) bool {
	if key == "" {
		return false
	}
	_, found := slices.BinarySearch(p.Rules, key)
	return found
}

// Remember adds key to the rules (kept sorted, so status lists them in a stable order).
func (p *Policy) Remember(key string) {
	if key == "" {
		return
	}
	if i, found := slices.BinarySearch(p.Rules, key); !found {
		p.Rules = slices.Insert(p.Rules, i, key)
	}
}

// Forget removes key; it reports whether the key was remembered.
func (p *Policy) Forget(key string) bool {
	i, found := slices.BinarySearch(p.Rules, key)
	if found {
		p.Rules = slices.Delete(p.Rules, i, i+1)
	}
	return found
}

// ValidateForget checks a permission_forget request.
func ValidateForget(tool string) *signals.Rejection {
	if strings.TrimSpace(tool) == "" {
		return signals.Reject(signals.RejectInvalidRequest, "tool is required (a key of status rules)")
	}
	return nil
}

package activities

// The permission bridge: the agent's session/request_permission goes to the session
// workflow as a permission_requested signal, and the turn waits for the answer that
// Deliver brings back (or for the turn's end, which answers cancelled).

import (
	"context"
	"encoding/json"
	"fmt"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

// permissionResponse is the agent's answer: the chosen option (selected by a person, a
// policy or a rule, or the reject option an expired request fails closed with), else
// cancelled.
func permissionResponse(outcome, optionID string) acp.RequestPermissionResponse {
	if outcome != signals.OutcomeCancelled && optionID != "" {
		return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{
			Selected: &acp.RequestPermissionOutcomeSelected{OptionId: acp.PermissionOptionId(optionID)},
		}}
	}
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}
}

// requestPermission bridges the agent's session/request_permission to the workflow and
// waits for its answer (or the turn's end, which answers cancelled).
func (lt *liveTurn) requestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	toolCall, err := json.Marshal(p.ToolCall)
	if err != nil {
		return acp.RequestPermissionResponse{}, err
	}
	opts := make([]signals.PermissionOption, 0, len(p.Options))
	for _, o := range p.Options {
		opts = append(opts, signals.PermissionOption{OptionID: string(o.OptionId), Name: o.Name, Kind: string(o.Kind)})
	}
	ch := make(chan acp.RequestPermissionResponse, 1)
	lt.mu.Lock()
	lt.permSeq++
	id := fmt.Sprintf("p%d.%d.%d", lt.key.turn, lt.attempt, lt.permSeq)
	lt.perms[id] = ch
	lt.mu.Unlock()
	defer func() {
		lt.mu.Lock()
		delete(lt.perms, id)
		lt.mu.Unlock()
	}()
	answered := lt.beforePermission()
	defer answered()
	paths := signals.PathsOutside // no workspace to measure against: ask
	if lt.reach != nil {
		paths = lt.reach(toolCall)
	}
	if err := lt.askPermission(ctx, signals.PermissionRequestedSignal{
		TurnID: lt.key.turn, Attempt: lt.attempt, RequestID: id, ToolCall: toolCall, Options: opts, Paths: paths,
		ToolName: lt.watch.toolName(string(p.ToolCall.ToolCallId)),
	}); err != nil {
		return acp.RequestPermissionResponse{}, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-lt.cancel:
	case <-lt.done:
	case <-ctx.Done():
	}
	return permissionResponse(signals.OutcomeCancelled, ""), nil
}

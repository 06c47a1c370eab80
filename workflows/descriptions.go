package workflows

// What the Temporal UI and `temporal workflow describe` say of each of a session's handlers
// (the workflow's metadata query): every update, its signal twin, every query, and the
// internal signals, which say whose they are so an operator tells them from a client's.
// Descriptions write no history: a change here replays every recorded run.

import (
	"fmt"

	"github.com/tacp-dev/tacp/signals"
)

// updateDescriptions describe the updates of contract §3, a client's calls.
var updateDescriptions = map[string]string{
	signals.UpdatePrompt:             "Send a prompt: it runs as the next turn, or waits in the queue. Answers {turn_id, position, duplicate}.",
	signals.UpdateSteer:              "Steer the running turn (compare-and-swap on expected_turn_id, the steer token).",
	signals.UpdateCancel:             "Cancel the running turn, or a queued prompt by client_message_id.",
	signals.UpdatePermissionRespond:  "Answer a permission request the agent asked (request_id, option_id).",
	signals.UpdatePermissionForget:   "Forget a remembered tool rule of the permission policy.",
	signals.UpdateSetPolicy:          "Set the session's permission level: allow_all, ask_for_risky or ask_always.",
	signals.UpdateAttach:             "Attach a viewer (controller or observer) with a lease. Answers the status snapshot.",
	signals.UpdateDetach:             "Detach a viewer; with none, the no-op a session is started with.",
	signals.UpdateClose:              "Close the session: its turn is cancelled, queued prompts dropped, its agent stopped.",
	signals.UpdateSetMode:            "Choose one of the modes the agent offers.",
	signals.UpdateSetConfigOption:    "Set one of the config options the agent offers.",
	signals.UpdateRetryNow:           "Run a turn that waits for a provider's limit now.",
	signals.UpdateElicitationRespond: "Answer a question the agent asked (accept with content, decline or cancel).",
	signals.UpdateSetMcpServers:      "Set the MCP servers the agent is given from the next turn on.",
	signals.UpdateSetTitle:           "Give the session a title (empty clears it).",
}

// queryDescriptions describe the queries of contract §4.
var queryDescriptions = map[string]string{
	signals.QueryStatus:     "The session's status snapshot: state, turn, steer token, queue, open requests, journal range.",
	signals.QueryEvents:     "The journal after after_seq (at most limit events).",
	signals.QueryTranscript: "internal (turn runner): the conversation as text, for an agent that could not load its session.",
}

// internalSignalDescriptions describe the signals no client sends: the turn runner's
// reports and the worker's wake.
var internalSignalDescriptions = map[string]string{
	signals.SignalTurnStarted:          "internal (turn runner): an attempt of the turn started on a worker.",
	signals.SignalTurnEvents:           "internal (turn runner): a batch of the agent's session/update events.",
	signals.SignalTurnLimited:          "internal (turn runner): the attempt hit a provider's limit and waits to run again.",
	signals.SignalPermissionRequested:  "internal (turn runner): the agent asks permission for a tool call.",
	signals.SignalElicitationRequested: "internal (turn runner): the agent asks a question.",
	signals.SignalDeliveryOutcome:      "internal (turn runner): what became of a steer the turn took.",
	signals.SignalTurnFinished:         "internal (turn runner): the turn ended.",
	signals.SignalElicitationCompleted: "internal (turn runner): a URL question's page says it is done.",
	signals.SignalWake:                 "internal (worker): a worker of the current version found the session on another.",
}

// signalDescription describes signal name: an internal signal, or an update's twin.
func signalDescription(name string) string {
	if d, ok := internalSignalDescriptions[name]; ok {
		return d
	}
	if d, ok := updateDescriptions[name]; ok {
		return fmt.Sprintf("The %s update's signal twin (no answer): %s", name, d)
	}
	return ""
}

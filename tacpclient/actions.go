package tacpclient

// A session's billable actions on Temporal Cloud, counted from its history (issue 38): what
// `starter status --actions` prints and what the bench's cost tables count by.
//
// What counts is Temporal Cloud's published list of actions, read off each history event:
//
//   - a workflow started: each run of the session (a client start, continue-as-new);
//   - a signal: every WorkflowExecutionSignaled (turn_events, turn_started, turn_finished…),
//     counted once, at the receiver;
//   - an update: every accepted update (prompt, attach…); a rejected update is billed too
//     but writes no history;
//   - a timer started; an activity scheduled, and each retry of it (its attempt past the
//     first);
//   - a search-attribute upsert, a side effect, and local activities once per workflow task.
//
// Queries and activity heartbeats are billed as well but written in no history: Actions
// names them as not counted rather than estimating them. Workflow tasks, activity
// completions and version markers are history events but not actions.

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/tacp-dev/tacp/signals"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
)

// Actions is a span of a session's history and the billable actions in it.
type Actions struct {
	SessionID string `json:"session_id,omitempty"`
	// Runs is how many of the session's runs were read, the current one and those it
	// continued from. EarlierRunsGone says the chain ended at a run the server no longer
	// keeps (past the namespace's retention): what it cost is not in these counts.
	Runs            int  `json:"runs"`
	EarlierRunsGone bool `json:"earlier_runs_gone,omitempty"`

	HistoryEvents int64 `json:"history_events"`
	Starts        int64 `json:"starts"`
	Signals       int64 `json:"signals"`
	Updates       int64 `json:"updates"`
	Timers        int64 `json:"timers"`
	Activities    int64 `json:"activities"`
	// Other is search-attribute upserts, side effects and local activities.
	Other int64 `json:"other"`
	// Total is the sum of the counts above: the actions the history proves.
	Total int64 `json:"total"`
	// SignalsByName splits Signals by signal name.
	SignalsByName map[string]int64 `json:"signals_by_name,omitempty"`
}

// SignalNames are the keys of SignalsByName, sorted.
func (a Actions) SignalNames() []string {
	names := make([]string, 0, len(a.SignalsByName))
	for n := range a.SignalsByName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ActionCounter adds up the actions of history events fed to it in order, one run at a
// time (NextRun between runs: local activities count once per workflow task of a run).
type ActionCounter struct {
	Actions
	localTasks map[int64]bool
}

// NextRun starts counting another run.
func (c *ActionCounter) NextRun() {
	c.Runs++
	c.localTasks = nil
}

// Add counts one history event.
func (c *ActionCounter) Add(ev *historypb.HistoryEvent) {
	c.HistoryEvents++
	before := c.billed()
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
		c.Starts++
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
		c.Signals++
		if c.SignalsByName == nil {
			c.SignalsByName = map[string]int64{}
		}
		c.SignalsByName[ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName()]++
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
		c.Updates++
	case enumspb.EVENT_TYPE_TIMER_STARTED:
		c.Timers++
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		c.Activities++
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
		c.Activities += int64(max(ev.GetActivityTaskStartedEventAttributes().GetAttempt()-1, 0))
	case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
		c.Other++
	case enumspb.EVENT_TYPE_MARKER_RECORDED:
		m := ev.GetMarkerRecordedEventAttributes()
		switch m.GetMarkerName() {
		case "LocalActivity":
			task := m.GetWorkflowTaskCompletedEventId()
			if !c.localTasks[task] {
				if c.localTasks == nil {
					c.localTasks = map[int64]bool{}
				}
				c.localTasks[task] = true
				c.Other++
			}
		case "SideEffect", "MutableSideEffect":
			c.Other++
		}
	}
	c.Total += c.billed() - before
}

func (c *ActionCounter) billed() int64 {
	return c.Starts + c.Signals + c.Updates + c.Timers + c.Activities + c.Other
}

// Actions counts the billable actions of session sessionID from its history: its current
// run and every run it continued from that the server still keeps.
func (c *Client) Actions(ctx context.Context, sessionID string) (Actions, error) {
	if err := signals.ValidateSessionID(sessionID); err != nil {
		return Actions{}, err
	}
	wid := signals.SessionWorkflowID(sessionID)
	desc, err := c.Temporal.DescribeWorkflowExecution(ctx, wid, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return Actions{}, signals.Reject(signals.RejectUnknownSession, "no session %s", sessionID)
		}
		return Actions{}, err
	}
	var n ActionCounter
	n.SessionID = sessionID
	for runID := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(); runID != ""; {
		it := c.Temporal.GetWorkflowHistory(ctx, wid, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		prev := ""
		for first := true; it.HasNext(); first = false {
			ev, err := it.Next()
			if err != nil {
				var nf *serviceerror.NotFound
				if first && n.Runs > 0 && errors.As(err, &nf) {
					n.EarlierRunsGone = true
					return n.Actions, nil
				}
				return Actions{}, fmt.Errorf("history of session %s, run %s: %w", sessionID, runID, err)
			}
			if first {
				n.NextRun()
			}
			if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
				prev = a.GetContinuedExecutionRunId()
			}
			n.Add(ev)
		}
		runID = prev
	}
	return n.Actions, nil
}

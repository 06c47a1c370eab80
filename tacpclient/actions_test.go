package tacpclient

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tacp-dev/tacp/signals"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

func event(t enumspb.EventType, attrs any) *historypb.HistoryEvent {
	ev := &historypb.HistoryEvent{EventType: t}
	switch a := attrs.(type) {
	case *historypb.WorkflowExecutionSignaledEventAttributes:
		ev.Attributes = &historypb.HistoryEvent_WorkflowExecutionSignaledEventAttributes{WorkflowExecutionSignaledEventAttributes: a}
	case *historypb.ActivityTaskStartedEventAttributes:
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: a}
	case *historypb.MarkerRecordedEventAttributes:
		ev.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: a}
	}
	return ev
}

// TestActionCounterCountsWhatBills: each billable event once, retries past the first
// attempt, local activities once per workflow task of a run, and nothing for the events
// Temporal Cloud does not bill.
func TestActionCounterCountsWhatBills(t *testing.T) {
	signal := func(name string) *historypb.HistoryEvent {
		return event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, &historypb.WorkflowExecutionSignaledEventAttributes{SignalName: name})
	}
	local := func(task int64) *historypb.HistoryEvent {
		return event(enumspb.EVENT_TYPE_MARKER_RECORDED, &historypb.MarkerRecordedEventAttributes{MarkerName: "LocalActivity", WorkflowTaskCompletedEventId: task})
	}
	var c ActionCounter
	c.NextRun()
	for _, ev := range []*historypb.HistoryEvent{
		event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil),
		event(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil), // not billed
		event(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, nil), // not billed
		event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED, nil),
		event(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, nil),
		event(enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, &historypb.ActivityTaskStartedEventAttributes{Attempt: 3}), // two retries
		event(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, nil),                                                     // not billed
		signal(signals.SignalTurnEvents), signal(signals.SignalTurnEvents), signal(signals.SignalTurnFinished),
		event(enumspb.EVENT_TYPE_TIMER_STARTED, nil),
		event(enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, nil),
		local(7), local(7), local(9), // two workflow tasks
		event(enumspb.EVENT_TYPE_MARKER_RECORDED, &historypb.MarkerRecordedEventAttributes{MarkerName: "Version"}), // not billed
		event(enumspb.EVENT_TYPE_MARKER_RECORDED, &historypb.MarkerRecordedEventAttributes{MarkerName: "SideEffect"}),
	} {
		c.Add(ev)
	}
	c.NextRun()
	c.Add(event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil))
	c.Add(local(7)) // another run's task 7

	a := c.Actions
	require.Equal(t, 2, a.Runs)
	require.EqualValues(t, 19, a.HistoryEvents)
	require.EqualValues(t, 2, a.Starts)
	require.EqualValues(t, 1, a.Updates)
	require.EqualValues(t, 3, a.Activities, "scheduled once, started on its third attempt")
	require.EqualValues(t, 3, a.Signals)
	require.Equal(t, map[string]int64{signals.SignalTurnEvents: 2, signals.SignalTurnFinished: 1}, a.SignalsByName)
	require.Equal(t, []string{signals.SignalTurnEvents, signals.SignalTurnFinished}, a.SignalNames())
	require.EqualValues(t, 1, a.Timers)
	require.EqualValues(t, 5, a.Other, "an upsert, local activities in three tasks, a side effect")
	require.EqualValues(t, 15, a.Total)
}

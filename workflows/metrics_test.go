package workflows

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
)

// recorder is a metrics handler that keeps what tacp records, keyed by name and tacp's own
// tags (the SDK adds namespace, task queue and workflow type).
type recorder struct {
	mu     sync.Mutex
	counts map[string]int64
	timers map[string][]time.Duration
}

type recordingHandler struct {
	r    *recorder
	tags map[string]string
}

func newRecorder() *recorder {
	return &recorder{counts: map[string]int64{}, timers: map[string][]time.Duration{}}
}

func (h recordingHandler) key(name string) string {
	var kv []string
	for _, k := range []string{"outcome", "decided_by"} {
		if v, ok := h.tags[k]; ok {
			kv = append(kv, k+"="+v)
		}
	}
	return name + "{" + strings.Join(kv, ",") + "}"
}

func (h recordingHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := maps.Clone(h.tags)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, tags)
	return recordingHandler{r: h.r, tags: merged}
}

func (h recordingHandler) Counter(name string) client.MetricsCounter {
	return counterFunc(func(d int64) {
		if strings.HasPrefix(name, "tacp_") {
			h.r.mu.Lock()
			h.r.counts[h.key(name)] += d
			h.r.mu.Unlock()
		}
	})
}

func (h recordingHandler) Gauge(name string) client.MetricsGauge {
	return client.MetricsNopHandler.Gauge(name)
}

func (h recordingHandler) Timer(name string) client.MetricsTimer {
	return timerFunc(func(d time.Duration) {
		if strings.HasPrefix(name, "tacp_") {
			h.r.mu.Lock()
			h.r.timers[h.key(name)] = append(h.r.timers[h.key(name)], d)
			h.r.mu.Unlock()
		}
	})
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }

func TestSession_MetricsCountTurnsSteersAndPermissionWaits(t *testing.T) {
	rec := newRecorder()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(quiet{})
	suite.SetMetricsHandler(recordingHandler{r: rec})
	h := &harness{t: t, env: suite.NewTestWorkflowEnvironment()}
	h.env.RegisterWorkflowWithOptions(SessionWorkflow, workflow.RegisterOptions{Name: signals.SessionWorkflowType})
	registerRunTurn(h.env)

	h.step(func() { h.prompt("work", "m1", func(signals.PromptResult, error) {}) })
	h.step(func() {
		h.update(signals.UpdateSteer, signals.SteerRequest{Text: "left", ExpectedTurnID: "1", ClientMsgID: "c1"}, func(_ any, err error) {
			require.NoError(t, err)
		})
		// A validator's rejection is not counted: the handler never runs.
		h.update(signals.UpdateSteer, signals.SteerRequest{Text: "right", ExpectedTurnID: "9"}, func(_ any, err error) {
			require.Equal(t, signals.RejectStaleTurn, rejectionType(t, err))
		})
		// The signal twin's rejection is: its handler journals it.
		h.env.SignalWorkflow(signals.UpdateSteer, signals.SteerRequest{Text: "right", ExpectedTurnID: "9"})
	})
	h.step(func() {
		h.update(signals.UpdateSteer, signals.SteerRequest{Text: "left", ExpectedTurnID: "1", ClientMsgID: "c1"}, func(res any, err error) {
			require.NoError(t, err)
			require.Equal(t, signals.SteerDuplicate, res.(signals.SteerResult).Outcome)
		})
		h.env.SignalWorkflow(signals.SignalPermissionRequested, permissionSignal(1, "p1", "execute"))
		h.env.SignalWorkflow(signals.SignalPermissionRequested, permissionSignal(1, "p2", "read")) // the policy decides it
	})
	h.at += 89 * time.Second
	h.step(func() {
		h.update(signals.UpdatePermissionRespond, signals.PermissionRespondRequest{RequestID: "p1", OptionID: "allow"}, func(_ any, err error) {
			require.NoError(t, err)
		})
	})
	h.step(func() { h.finishTurn(1, "end_turn") })
	h.step(func() { h.prompt("again", "m2", func(signals.PromptResult, error) {}) })
	h.step(func() {
		h.env.SignalWorkflow(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: 2, Error: "agent: boom"})
	})
	h.step(func() { h.prompt("once more", "m3", func(signals.PromptResult, error) {}) })
	h.step(func() { h.finishTurn(3, "the agent's own words") })
	h.closeSession()
	require.NoError(t, h.run(signals.SessionConfig{SessionID: "s1"}))

	require.Equal(t, map[string]int64{
		"tacp_turns_started{}":                  3,
		"tacp_turns_finished{outcome=end_turn}": 1,
		"tacp_turns_finished{outcome=failed}":   1,
		"tacp_turns_finished{outcome=other}":    1,
		"tacp_steers{outcome=accepted}":         1,
		"tacp_steers{outcome=duplicate}":        1,
		"tacp_steers{outcome=stale_turn}":       1,
	}, rec.counts)
	require.Equal(t, []string{"tacp_permission_waits{decided_by=user}"}, slices.Sorted(maps.Keys(rec.timers)),
		"only the asked request is timed")
	require.Equal(t, []time.Duration{90 * time.Second}, rec.timers["tacp_permission_waits{decided_by=user}"])
}

package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tacp-dev/tacp/internal/telemetry"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

// telemetryWorker starts an in-process worker on its own task queue whose client records
// into a Prometheus endpoint on a free loopback port, as `worker -metrics.listen` does; it
// returns the /metrics URL and a client for the queue.
func telemetryWorker(t *testing.T) (string, *tacpclient.Client) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	tel, err := telemetry.Start(ctx, telemetry.Options{MetricsListen: "127.0.0.1:0"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	c, err := srv.NewClient(ctx, client.Options{MetricsHandler: tel.MetricsHandler, Interceptors: tel.Interceptors})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	_, qc := extraWorker(t, c, tacpworker.Options{})
	return "http://" + tel.MetricsAddr() + "/metrics", tacpclient.NewClient(tc, qc.TaskQueue)
}

func scrapeMetrics(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

// sample reports whether text has a sample of metric whose labels include every one of
// labels and whose value is not 0.
func sample(text, metric string, labels ...string) bool {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, metric+"{") || strings.HasSuffix(line, " 0") {
			continue
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(line, l)
		}
		if all {
			return true
		}
	}
	return false
}

func TestTelemetryMetricsOfATurnAreScraped(t *testing.T) {
	t.Parallel()
	url, qc := telemetryWorker(t)
	id := session(t)
	const text = "telemetry canary 7f3a: say it back"
	_, err := qc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: text, ClientMessageID: signals.NewID()})
	require.NoError(t, err)
	kind, data := terminalData(t, turnEnd(t, id, 1))
	require.Equal(t, signals.EventTurnEnded, kind)
	require.Equal(t, "end_turn", data["stop_reason"])

	// The SDK records some metrics after the journal shows the end (the activity's own
	// completion): scrape until every one is there.
	var got string
	ok := assertEventually(func() bool {
		got = scrapeMetrics(t, url)
		return sample(got, "tacp_turns_started_total", `workflow_type="SessionWorkflow"`) &&
			sample(got, "tacp_turns_finished_total", `outcome="end_turn"`, `workflow_type="SessionWorkflow"`) &&
			sample(got, "tacp_event_batches_total", `activity_type="RunTurn"`) &&
			sample(got, "tacp_event_batch_events_total", `activity_type="RunTurn"`) &&
			sample(got, "tacp_event_batch_bytes_total", `activity_type="RunTurn"`) &&
			sample(got, "temporal_activity_execution_latency_seconds_count", `activity_type="RunTurn"`)
	}, 30*time.Second)
	require.True(t, ok, "missing metrics in:\n%s", got)
	// Metrics carry bounded tags only: no session id, no prompt text.
	require.NotContains(t, got, id)
	require.NotContains(t, got, "canary")
}

// assertEventually polls cond every 100ms until it holds or d passes.
func assertEventually(cond func() bool, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

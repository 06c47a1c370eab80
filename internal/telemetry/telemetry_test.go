package telemetry

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// scrape returns the exposition text h serves at /metrics.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	return rec.Body.String()
}

// lines returns the sample lines of text that start with prefix.
func lines(text, prefix string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

func TestPrometheusExportsTheSDKHandlersCountersTimersAndGauges(t *testing.T) {
	p, err := NewPrometheus(nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })

	h := p.MetricsHandler.WithTags(map[string]string{"task_queue": "q"})
	h.WithTags(map[string]string{"outcome": "end_turn"}).Counter("tacp_turns_finished").Inc(2)
	h.WithTags(map[string]string{"outcome": "end_turn"}).Counter("tacp_turns_finished").Inc(1)
	h.Timer("tacp_permission_waits").Record(1500 * time.Millisecond)
	h.Gauge("tacp_test_gauge").Update(3)

	text := scrape(t, p.HTTPHandler)
	// Counters are monotonic: Prometheus counters, with _total.
	require.Contains(t, text, "# TYPE tacp_turns_finished_total counter")
	require.Equal(t, []string{`tacp_turns_finished_total{outcome="end_turn",task_queue="q"} 3`}, lines(text, "tacp_turns_finished_total{"))
	// Timers are histograms in seconds, with buckets that suit seconds.
	require.Contains(t, text, "# TYPE tacp_permission_waits_seconds histogram")
	require.Contains(t, lines(text, "tacp_permission_waits_seconds_bucket"), `tacp_permission_waits_seconds_bucket{task_queue="q",le="1"} 0`)
	require.Contains(t, lines(text, "tacp_permission_waits_seconds_bucket"), `tacp_permission_waits_seconds_bucket{task_queue="q",le="2.5"} 1`)
	require.Equal(t, []string{`tacp_permission_waits_seconds_sum{task_queue="q"} 1.5`}, lines(text, "tacp_permission_waits_seconds_sum"))
	require.Equal(t, []string{`tacp_test_gauge{task_queue="q"} 3`}, lines(text, "tacp_test_gauge{"))
	// The registry is the provider's own, with the Go runtime's and the process's metrics.
	require.NotEmpty(t, lines(text, "go_goroutines "))
	require.NotEmpty(t, lines(text, "target_info{"))
}

func TestPrometheusLogsABadMetricInsteadOfPanicking(t *testing.T) {
	var log bytes.Buffer
	p, err := NewPrometheus(nil, slog.New(slog.NewTextHandler(&log, nil)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	require.NotPanics(t, func() { p.MetricsHandler.Counter("not a valid name").Inc(1) })
	require.Contains(t, log.String(), "metric not recorded")
}

// noTracing clears the variables that turn tracing on.
func noTracing(t *testing.T) {
	t.Setenv(EnvOTLPEndpoint, "")
	t.Setenv(EnvOTLPTracesEndpoint, "")
}

func TestStartIsOffByDefault(t *testing.T) {
	noTracing(t)
	tel, err := Start(context.Background(), Options{})
	require.NoError(t, err)
	require.Nil(t, tel.MetricsHandler)
	require.Nil(t, tel.Interceptors)
	require.Empty(t, tel.MetricsAddr())
	require.NoError(t, tel.Shutdown(context.Background()))
}

func TestStartServesMetricsUntilShutdown(t *testing.T) {
	noTracing(t)
	tel, err := Start(context.Background(), Options{MetricsListen: "127.0.0.1:0"})
	require.NoError(t, err)
	require.NotNil(t, tel.MetricsHandler)
	require.Nil(t, tel.Interceptors, "no OTLP endpoint: no tracing")
	tel.MetricsHandler.Counter("tacp_turns_started").Inc(1)

	url := "http://" + tel.MetricsAddr() + "/metrics"
	resp, err := http.Get(url)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "tacp_turns_started_total 1")
	require.Contains(t, string(body), `service_name="tacp-worker"`, "target_info names the service")

	require.NoError(t, tel.Shutdown(context.Background()))
	_, err = http.Get(url)
	require.Error(t, err, "the server is stopped")
}

func TestStartRefusesAnAddressItCannotListenOn(t *testing.T) {
	noTracing(t)
	_, err := Start(context.Background(), Options{MetricsListen: "256.0.0.1:1"})
	require.ErrorContains(t, err, "metrics listen")
}

func TestStartTracesWhenAnOTLPEndpointIsSet(t *testing.T) {
	noTracing(t)
	t.Setenv(EnvOTLPTracesEndpoint, "http://127.0.0.1:1") // nothing listens: nothing is sent
	tel, err := Start(context.Background(), Options{})
	require.NoError(t, err)
	require.Nil(t, tel.MetricsHandler, "metrics stay off without -metrics.listen")
	require.Len(t, tel.Interceptors, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, tel.Shutdown(ctx))
}

// Package telemetry gives the worker its metrics and traces. Metrics: an OpenTelemetry
// meter provider exported for Prometheus and served at http://ADDR/metrics; the SDK's own
// metrics and tacp's (recorded through the SDK's workflow and activity metrics handlers,
// which keep workflow code replay-safe) reach it through the contrib's metrics handler set on
// the client. Traces: when the standard OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT names a collector, an OTLP/gRPC exporter behind the
// contrib's tracing interceptor. Neither carries prompt text or tool-call arguments:
// metric tags are small fixed sets, spans name workflows, activities and their ids.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// DefaultServiceName names the process in traces and in target_info; OTEL_SERVICE_NAME
// overrides it.
const DefaultServiceName = "tacp-worker"

// Environment variables that turn tracing on (the OpenTelemetry standard ones; the OTLP
// exporter reads these and the other OTEL_EXPORTER_OTLP_* itself).
const (
	EnvOTLPEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvOTLPTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
)

// Options configure Start.
type Options struct {
	// MetricsListen is the host:port /metrics is served on; empty: no metrics.
	MetricsListen string
	// ServiceName names the process (default DefaultServiceName).
	ServiceName string
	// Logger receives the exporters' errors; nil discards them.
	Logger *slog.Logger
}

// Telemetry is the worker's running metrics and tracing. Its fields go into the worker
// client's options; both are empty when their half is off.
type Telemetry struct {
	// MetricsHandler is the SDK's metrics handler for client.Options (nil: metrics off).
	MetricsHandler client.MetricsHandler
	// Interceptors hold the tracing interceptor for client.Options (nil: tracing off). It
	// also implements the worker interceptor, so the client's workers trace too.
	Interceptors []interceptor.ClientInterceptor

	metricsAddr string
	stops       []func(context.Context) error
}

// TracingConfigured reports whether the environment names an OTLP collector for traces.
func TracingConfigured() bool {
	return os.Getenv(EnvOTLPEndpoint) != "" || os.Getenv(EnvOTLPTracesEndpoint) != ""
}

// Start starts what opts and the environment ask for: the metrics server when
// opts.MetricsListen is set, tracing when TracingConfigured. Shutdown stops both.
func Start(ctx context.Context, opts Options) (*Telemetry, error) {
	if opts.ServiceName == "" {
		opts.ServiceName = DefaultServiceName
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	t := &Telemetry{}
	if opts.MetricsListen == "" && !TracingConfigured() {
		return t, nil
	}
	// Errors of the OpenTelemetry SDK (a failed export, a conflicting instrument) are logged
	// as the worker logs, instead of in plain text on stderr.
	logger := opts.Logger
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { logger.Warn("opentelemetry", "error", err) }))
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", opts.ServiceName)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	if opts.MetricsListen != "" {
		if err := t.startMetrics(opts.MetricsListen, res, logger); err != nil {
			_ = t.Shutdown(ctx)
			return nil, err
		}
	}
	if TracingConfigured() {
		if err := t.startTracing(ctx, res); err != nil {
			_ = t.Shutdown(ctx)
			return nil, err
		}
	}
	return t, nil
}

// MetricsAddr is the address /metrics is served on ("" when metrics are off): the one
// asked for, with the port chosen when it asked for port 0.
func (t *Telemetry) MetricsAddr() string { return t.metricsAddr }

// Shutdown stops the metrics server and flushes and stops the providers, last started
// first.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for i := len(t.stops) - 1; i >= 0; i-- {
		errs = append(errs, t.stops[i](ctx))
	}
	t.stops = nil
	return errors.Join(errs...)
}

func (t *Telemetry) startMetrics(addr string, res *resource.Resource, logger *slog.Logger) error {
	p, err := NewPrometheus(res, logger)
	if err != nil {
		return err
	}
	t.stops = append(t.stops, p.Shutdown)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", p.HTTPHandler)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server stopped", "error", err)
		}
	}()
	t.stops = append(t.stops, srv.Shutdown)
	t.metricsAddr = ln.Addr().String()
	t.MetricsHandler = p.MetricsHandler
	return nil
}

func (t *Telemetry) startTracing(ctx context.Context, res *resource.Resource) error {
	exp, err := otlptracegrpc.New(ctx) // endpoint, headers, TLS: OTEL_EXPORTER_OTLP_*
	if err != nil {
		return fmt.Errorf("otlp trace exporter: %w", err)
	}
	// The sampler comes from OTEL_TRACES_SAMPLER when set (default: parent-based, always).
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	t.stops = append(t.stops, tp.Shutdown)
	ti, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer: tp.Tracer("github.com/tacp-dev/tacp"),
		// Viewers poll status and events by query many times a second: a span each would
		// drown the turns.
		DisableQueryTracing: true,
	})
	if err != nil {
		return fmt.Errorf("tracing interceptor: %w", err)
	}
	t.Interceptors = []interceptor.ClientInterceptor{ti}
	return nil
}

// Prometheus is an OpenTelemetry meter provider exported to a Prometheus registry of its
// own, and the SDK metrics handler over it.
type Prometheus struct {
	// MetricsHandler records into the provider (client.Options.MetricsHandler).
	MetricsHandler client.MetricsHandler
	// HTTPHandler serves the registry in the Prometheus exposition format.
	HTTPHandler http.Handler

	provider *sdkmetric.MeterProvider
}

// timerBuckets are the histogram bounds of every timer, in seconds: from a fast workflow
// task to a permission that waited an hour (OpenTelemetry's defaults suit milliseconds).
var timerBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// NewPrometheus returns a meter provider with resource res, exported to a new registry
// that also holds the Go runtime and process collectors. SDK counters are monotonic, so
// they export as Prometheus counters (name_total); timers export as histograms in seconds
// (name_seconds). Meter errors go to logger.
func NewPrometheus(res *resource.Resource, logger *slog.Logger) (*Prometheus, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithoutScopeInfo(),
		otelprom.WithAggregationSelector(func(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
			if k == sdkmetric.InstrumentKindHistogram {
				return sdkmetric.AggregationExplicitBucketHistogram{Boundaries: timerBuckets}
			}
			return sdkmetric.DefaultAggregationSelector(k)
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	opts := []sdkmetric.Option{sdkmetric.WithReader(exp)}
	if res != nil {
		opts = append(opts, sdkmetric.WithResource(res))
	}
	mp := sdkmetric.NewMeterProvider(opts...)
	return &Prometheus{
		MetricsHandler: temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
			Meter:                mp.Meter("github.com/tacp-dev/tacp"),
			UseMonotonicCounters: true,
			// The default panics: a metric must never take the worker down.
			OnError: func(err error) { logger.Warn("metric not recorded", "error", err) },
		}),
		HTTPHandler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		provider:    mp,
	}, nil
}

// Shutdown stops the meter provider.
func (p *Prometheus) Shutdown(ctx context.Context) error { return p.provider.Shutdown(ctx) }

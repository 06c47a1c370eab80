// Package dial connects tacp's processes to a Temporal cluster the way every Temporal tool
// does: the SDK's envconfig (TEMPORAL_* variables and the temporal.toml profile), with the
// payload codec of codec.DataConverterFromEnv.
package dial

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"

	"github.com/tacp-dev/tacp/codec"
)

// Client connects to the cluster the standard TEMPORAL_* variables and temporal.toml
// profile name; address and namespace, when set, override them.
func Client(ctx context.Context, address, namespace string, logger *slog.Logger) (client.Client, error) {
	return ClientWith(ctx, Options{Address: address, Namespace: namespace, Logger: logger})
}

// Options configure ClientWith.
type Options struct {
	// Address and Namespace, when set, override the envconfig ones.
	Address, Namespace string
	Logger             *slog.Logger
	// MetricsHandler and Interceptors carry the worker's telemetry (internal/telemetry);
	// nil: none.
	MetricsHandler client.MetricsHandler
	Interceptors   []interceptor.ClientInterceptor
}

// ClientWith connects as Client does, with the client options of o.
func ClientWith(ctx context.Context, o Options) (client.Client, error) {
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return nil, fmt.Errorf("load Temporal client config: %w", err)
	}
	if o.Address != "" {
		opts.HostPort = o.Address
	}
	if o.Namespace != "" {
		opts.Namespace = o.Namespace
	}
	if o.Logger != nil {
		opts.Logger = sdklog.NewStructuredLogger(o.Logger)
	}
	if o.MetricsHandler != nil {
		opts.MetricsHandler = o.MetricsHandler
	}
	opts.Interceptors = append(opts.Interceptors, o.Interceptors...)
	if opts.DataConverter, err = codec.DataConverterFromEnv(); err != nil {
		return nil, err
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s: %w", orDefault(opts.HostPort, client.DefaultHostPort), err)
	}
	return c, nil
}

// Address is the frontend host:port Client dials: address, else envconfig's, else the SDK's
// default (the worker's sandbox keeps its agents off that port).
func Address(address string) string {
	return fromEnv(address, func(o client.Options) string { return o.HostPort }, client.DefaultHostPort)
}

// Namespace is the namespace Client connects to: namespace, else envconfig's, else the
// SDK's default.
func Namespace(namespace string) string {
	return fromEnv(namespace, func(o client.Options) string { return o.Namespace }, client.DefaultNamespace)
}

// fromEnv is v, else what pick reads of envconfig's client options, else def.
func fromEnv(v string, pick func(client.Options) string, def string) string {
	if v != "" {
		return v
	}
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return def
	}
	return orDefault(pick(opts), def)
}

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// Package devserver starts the real Temporal server (go.temporal.io/server) in-process,
// backed by a SQLite file (or memory), with the Temporal Web UI beside it.
//
// It is what `worker -dev`, `demo` and the end-to-end tests run on. Nothing in the
// session path imports it: production deployments point the worker at a cluster instead.
package devserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"

	"github.com/tacp-dev/tacp/internal/freeport"
	"github.com/tacp-dev/tacp/tacpclient"
)

// Options configure an embedded server. The zero value starts an in-memory server on free
// loopback ports with no UI, which is what tests want.
type Options struct {
	// DBPath is the SQLite file. Empty means in-memory (state is lost on Stop).
	DBPath string
	// IP to listen on; default 127.0.0.1.
	IP string
	// Port of the gRPC frontend; 0 picks a free port.
	Port int
	// UIPort of the Web UI; 0 means no UI.
	UIPort int
	// UICodecEndpoint is the codec server the Web UI's pages decode payloads with (the
	// browser calls it, not the UI's server); empty: none, unless a person sets one in the
	// UI's settings.
	UICodecEndpoint string
	// Namespace registered at start; default "default".
	Namespace string
	// Logger for the server; nil discards server logs (they are noisy and not ours).
	Logger log.Logger
	// TLS, when set, serves the frontend over TLS with this certificate (PEM files); CAFile
	// is the CA that signed it, which the server's own clients and NewClient trust.
	TLS *TLSFiles
}

// TLSFiles names a PEM certificate, its key and the CA that signed it.
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
}

// Server is a running embedded Temporal server.
type Server struct {
	tls       *tls.Config
	server    temporal.Server
	ui        *uiserver.Server
	hostPort  string
	uiURL     string
	namespace string
}

// Start starts the server and returns once its frontend answers and the namespace and
// search attributes exist.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.IP == "" {
		opts.IP = "127.0.0.1"
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if opts.Logger == nil {
		opts.Logger = log.NewNoopLogger()
	}
	if opts.Port == 0 {
		p, err := freeport.Take(opts.IP, 1)
		if err != nil {
			return nil, fmt.Errorf("devserver: %w", err)
		}
		opts.Port = p[0]
	}

	sqlCfg := config.SQL{
		PluginName:        sqliteplugin.PluginName,
		ConnectAttributes: map[string]string{},
		DatabaseName:      opts.DBPath,
	}
	if opts.DBPath == "" {
		sqlCfg.ConnectAttributes["mode"] = "memory"
		sqlCfg.ConnectAttributes["cache"] = "shared"
		sqlCfg.DatabaseName = "tacp-" + strconv.Itoa(rand.IntN(1<<30))
	} else {
		sqlCfg.ConnectAttributes["mode"] = "rwc"
		sqlCfg.ConnectAttributes["_journal_mode"] = "wal"
		sqlCfg.ConnectAttributes["_synchronous"] = "2"
		if _, err := os.Stat(opts.DBPath); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(opts.DBPath), 0o755); err != nil {
				return nil, fmt.Errorf("devserver: create db dir: %w", err)
			}
			if err := sqliteschema.SetupSchema(&sqlCfg); err != nil {
				return nil, fmt.Errorf("devserver: set up schema in %s: %w", opts.DBPath, err)
			}
		} else if err := forgetMembers(opts.DBPath); err != nil {
			return nil, err
		}
	}

	cfg, err := serverConfig(opts, &sqlCfg)
	if err != nil {
		return nil, err
	}
	nsCfg, err := sqliteschema.NewNamespaceConfig(cfg.ClusterMetadata.CurrentClusterName, opts.Namespace, false, tacpclient.SearchAttributeTypes)
	if err != nil {
		return nil, fmt.Errorf("devserver: namespace config: %w", err)
	}
	if err := sqliteschema.CreateNamespaces(&sqlCfg, nsCfg); err != nil {
		return nil, fmt.Errorf("devserver: create namespace: %w", err)
	}

	dc := dynamicconfig.StaticClient{
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): []dynamicconfig.ConstrainedValue{{Value: true}},
		// Sessions are long-lived and chatty; the dev server should not be the one to
		// suggest continue-as-new long before tacp's own threshold.
		dynamicconfig.FrontendEnableUpdateWorkflowExecution.Key():              []dynamicconfig.ConstrainedValue{{Value: true}},
		dynamicconfig.FrontendEnableUpdateWorkflowExecutionAsyncAccepted.Key(): []dynamicconfig.ConstrainedValue{{Value: true}},
		dynamicconfig.EnableEagerWorkflowStart.Key():                           []dynamicconfig.ConstrainedValue{{Value: true}},
		// A turn's RunTurn activity is scheduled by its session on the same task queue:
		// eager execution hands it to the worker that completed the workflow task, without a
		// trip through matching.
		dynamicconfig.EnableActivityEagerExecution.Key(): []dynamicconfig.ConstrainedValue{{Value: true}},
		// The server's one history shard reads its transfer queue (every workflow and activity
		// task it dispatches, every child start and cross-workflow signal) at most 20 times a
		// second by default: past a short burst each dispatch waited up to 50 ms for the
		// reader's rate limiter, which was most of a warm turn. The queue is read on
		// notification, so a higher cap costs nothing when idle.
		dynamicconfig.TransferProcessorMaxPollRPS.Key(): []dynamicconfig.ConstrainedValue{{Value: 1000}},
		dynamicconfig.TimerProcessorMaxPollRPS.Key():    []dynamicconfig.ConstrainedValue{{Value: 1000}},
		// A query that reaches a workflow while one of its tasks is pending waits for that
		// task (a consistent query), and by default only one query per workflow may wait: a
		// second viewer asking at the same moment got ResourceExhausted, which the SDK retries
		// after half a second. Viewers ask right after a session's history grows, so several
		// viewers of one streaming session ask together every batch.
		dynamicconfig.MaxBufferedQueryCount.Key(): []dynamicconfig.ConstrainedValue{{Value: 32}},
		// Worker Versioning (README, "Upgrading workers while sessions run") is on by default in
		// this server (system.enableDeploymentVersions, frontend.workerVersioningWorkflowAPIs,
		// system.enableSendTargetVersionChanged); tacp relies on them, so they are said here.
		// The server's own drainage status (the UI's "drained") waits 3 min after a version
		// stops being current and refreshes every 3 min: on one machine a few seconds do.
		dynamicconfig.EnableDeploymentVersions.Key():                   []dynamicconfig.ConstrainedValue{{Value: true}},
		dynamicconfig.FrontendEnableWorkerVersioningWorkflowAPIs.Key(): []dynamicconfig.ConstrainedValue{{Value: true}},
		dynamicconfig.EnableSendTargetVersionChanged.Key():             []dynamicconfig.ConstrainedValue{{Value: true}},
		dynamicconfig.VersionDrainageStatusVisibilityGracePeriod.Key(): []dynamicconfig.ConstrainedValue{{Value: 10 * time.Second}},
		dynamicconfig.VersionDrainageStatusRefreshInterval.Key():       []dynamicconfig.ConstrainedValue{{Value: 5 * time.Second}},
	}

	srv, err := temporal.NewServer(
		temporal.WithConfig(cfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithLogger(opts.Logger),
		temporal.WithDynamicConfigClient(dc),
	)
	if err != nil {
		return nil, fmt.Errorf("devserver: new server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("devserver: start: %w", err)
	}
	s := &Server{server: srv, hostPort: net.JoinHostPort(opts.IP, strconv.Itoa(opts.Port)), namespace: opts.Namespace}
	if opts.TLS != nil {
		if s.tls, err = clientTLS(opts.TLS.CAFile, opts.IP); err != nil {
			_ = srv.Stop()
			return nil, err
		}
	}
	if err := s.ensureSearchAttributes(ctx); err != nil {
		_ = srv.Stop()
		return nil, err
	}
	if opts.UIPort != 0 {
		s.ui = uiserver.NewServer(uioptions.WithConfigProvider(&uiconfig.Config{
			TemporalGRPCAddress: s.hostPort,
			Host:                opts.IP,
			Port:                opts.UIPort,
			EnableUI:            true,
			DefaultNamespace:    opts.Namespace,
			HideLogs:            true,
			DisableNewsFetch:    true,
			CORS:                uiconfig.CORS{CookieInsecure: true},
			Codec:               uiconfig.Codec{Endpoint: opts.UICodecEndpoint},
		}))
		go func() { _ = s.ui.Start() }()
		s.uiURL = fmt.Sprintf("http://%s", net.JoinHostPort(opts.IP, strconv.Itoa(opts.UIPort)))
	}
	return s, nil
}

// ensureSearchAttributes registers the search attributes a database file made by an older
// tacp lacks, waiting for the frontend to answer first.
func (s *Server) ensureSearchAttributes(ctx context.Context) error {
	c, err := s.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = tacpclient.EnsureSearchAttributes(ctx, c, s.namespace)
	return err
}

// dial connects a client, retrying until the frontend answers or ctx ends.
func (s *Server) dial(ctx context.Context) (client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		c, err := client.DialContext(ctx, client.Options{HostPort: s.hostPort, Namespace: s.namespace, Logger: quietLogger{},
			ConnectionOptions: client.ConnectionOptions{TLS: s.tls}})
		if err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("devserver: frontend %s did not answer: %w", s.hostPort, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// NewClient returns a client for the server's namespace. opts.HostPort and Namespace are set.
func (s *Server) NewClient(ctx context.Context, opts client.Options) (client.Client, error) {
	opts.HostPort = s.hostPort
	if s.tls != nil && opts.ConnectionOptions.TLS == nil {
		opts.ConnectionOptions.TLS = s.tls
	}
	if opts.Namespace == "" {
		opts.Namespace = s.namespace
	}
	if opts.Logger == nil {
		opts.Logger = quietLogger{}
	}
	return client.DialContext(ctx, opts)
}

// HostPort is the gRPC frontend address.
func (s *Server) HostPort() string { return s.hostPort }

// Namespace is the namespace registered at start.
func (s *Server) Namespace() string { return s.namespace }

// UIURL is the Web UI's address, empty when the UI is off.
func (s *Server) UIURL() string { return s.uiURL }

// Stop stops the UI and the server.
func (s *Server) Stop() error {
	if s.ui != nil {
		s.ui.Stop()
	}
	return s.server.Stop()
}

func serverConfig(opts Options, sqlCfg *config.SQL) (*config.Config, error) {
	// Ports the kernel picks for ":0" could be given to an outgoing connection before the
	// services bind them, and a Temporal service that cannot bind its port panics.
	ports, err := freeport.Take(opts.IP, 8)
	if err != nil {
		return nil, fmt.Errorf("devserver: %w", err)
	}
	service := func(grpc, membership int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: grpc, MembershipPort: membership, BindOnIP: opts.IP}}
	}
	front := net.JoinHostPort(opts.IP, strconv.Itoa(opts.Port))
	var rootTLS config.RootTLS
	if opts.TLS != nil {
		trust := config.ClientTLS{RootCAFiles: []string{opts.TLS.CAFile}, ServerName: opts.IP}
		rootTLS = config.RootTLS{
			Frontend:     config.GroupTLS{Server: config.ServerTLS{CertFile: opts.TLS.CertFile, KeyFile: opts.TLS.KeyFile}, Client: trust},
			SystemWorker: config.WorkerTLS{Client: trust},
		}
	}
	return &config.Config{
		Global: config.Global{
			TLS:        rootTLS,
			Membership: config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: opts.IP},
			Metrics: &metrics.Config{Prometheus: &metrics.PrometheusConfig{
				ListenAddress: net.JoinHostPort(opts.IP, strconv.Itoa(ports[7])), HandlerPath: "/metrics",
			}},
		},
		Persistence: config.Persistence{
			DefaultStore:     sqliteplugin.PluginName,
			VisibilityStore:  sqliteplugin.PluginName,
			NumHistoryShards: 1,
			DataStores:       map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sqlCfg}},
		},
		ClusterMetadata: &cluster.Config{
			EnableGlobalNamespace:    false,
			FailoverVersionIncrement: 10,
			MasterClusterName:        "active",
			CurrentClusterName:       "active",
			ClusterInformation: map[string]cluster.ClusterInformation{
				"active": {Enabled: true, InitialFailoverVersion: 1, RPCAddress: front},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services: map[string]config.Service{
			"frontend": service(opts.Port, ports[0]),
			"history":  service(ports[1], ports[2]),
			"matching": service(ports[3], ports[4]),
			"worker":   service(ports[5], ports[6]),
		},
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
			History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
			Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
		}},
		PublicClient: config.PublicClient{HostPort: front},
	}, nil
}

// clientTLS trusts the CA in caFile for connections to serverName.
func clientTLS(caFile, serverName string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("devserver: read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("devserver: no certificate in %s", caFile)
	}
	return &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}, nil
}

// quietLogger drops the SDK client's own logs in the dev server's helper clients.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}

// forgetMembers deletes the cluster membership rows a previous server process left in the
// file. They name that process's internal ports, which this one does not reuse: left in
// place, they still look alive after a restart, and the services spend up to a minute trying
// to reach hosts that are gone before they answer. Only one embedded server uses a file.
func forgetMembers(path string) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return fmt.Errorf("devserver: open %s: %w", path, err)
	}
	defer db.Close()
	if _, err := db.Exec("DELETE FROM cluster_membership"); err != nil {
		return fmt.Errorf("devserver: forget the previous server's members in %s: %w", path, err)
	}
	return nil
}

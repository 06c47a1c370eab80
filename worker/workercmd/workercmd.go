// Package workercmd is the worker command (`tacp worker`, `worker`): it runs tacp's session
// workflows and turn runner. With -dev it first starts the real Temporal server in-process
// (SQLite file) with its Web UI; without, it connects to the cluster named by the standard
// TEMPORAL_* variables or temporal.toml profile.
package workercmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/checkpoint"
	"github.com/tacp-dev/tacp/codec"
	"github.com/tacp-dev/tacp/devserver"
	"github.com/tacp-dev/tacp/internal/dial"
	"github.com/tacp-dev/tacp/internal/flagenv"
	"github.com/tacp-dev/tacp/internal/logging"
	"github.com/tacp-dev/tacp/internal/sandbox"
	"github.com/tacp-dev/tacp/internal/telemetry"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
	"github.com/tacp-dev/tacp/workflows/session"
)

// Run runs the worker with args (without the program name); name is how usage calls it
// ("worker", "tacp worker"). The program's main calls selfagent.MaybeRun first, so that the
// worker's default profile may run this binary as its test agent.
func Run(name string, args []string) error { return run(name, args, nil) }

// Parse parses args through the worker's flags and runs nothing.
func Parse(args []string) (*flag.FlagSet, error) {
	var fs *flag.FlagSet
	err := run("worker", args, &fs)
	return fs, err
}

// run runs the worker; with dry set it parses args, stores the flag set there and returns.
func run(name string, args []string, dry **flag.FlagSet) error {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n\nRuns tacp sessions. Every flag falls back to the TACP_<NAME> environment variable\n(dots and dashes as underscores, e.g. TACP_DEV_DB). Traces go to an OTLP/gRPC collector when\nOTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set.\n\n", name)
		fs.PrintDefaults()
	}
	dataDir := tacpworker.DefaultDataDir()
	var (
		dev       = fs.Bool("dev", false, "start the embedded Temporal server and Web UI first")
		devDB     = fs.String("dev.db", filepath.Join(dataDir, "dev.db"), "SQLite file of the embedded server")
		devPort   = fs.Int("dev.port", 7233, "gRPC port of the embedded server")
		devUIPort = fs.Int("dev.ui-port", 8233, "Web UI port of the embedded server (0: no UI)")
		devCodec  = fs.String("dev.ui-codec", "", "`URL` of the codec server the embedded Web UI decodes payloads with (starter codec-server), e.g. http://127.0.0.1:8081")
		queue     = fs.String("task-queue", signals.DefaultTaskQueue, "task queue of the session workflows")
		agentCmd  = fs.String("agent", "", "command line of the agent profile named \"default\" (default: the built-in test agent when no profile is given)")
		profFile  = fs.String("agent.profiles", "", "JSON file of agent profiles: {\"default\": NAME, \"profiles\": [{\"name\", \"command\", \"env\", \"env_files\", \"description\"}]}")
		profDef   = fs.String("agent.default", "", "the profile serving sessions that name none (default: \"default\", or the only profile)")
		roots     = fs.String("workspace.roots", "", "comma-separated directories sessions' workspaces must lie in (default: DATA-DIR/workspaces; with -dev also your home directory)")
		mcpMode   = fs.String("mcp", activities.MCPNone, "MCP servers clients may pass to agents: none, http (http and sse servers) or listed (also stdio servers whose command is in -mcp.commands)")
		mcpCmds   = fs.String("mcp.commands", "", "comma-separated stdio MCP server commands -mcp listed allows")
		data      = fs.String("data-dir", dataDir, "directory for workspaces and agent transcripts")
		address   = fs.String("address", "", "Temporal frontend host:port (overrides TEMPORAL_ADDRESS)")
		namespace = fs.String("namespace", "", "Temporal namespace (overrides TEMPORAL_NAMESPACE)")
		logLevel  = fs.String("log.level", "info", "log level: debug, info, warn, error")
		idleTTL   = fs.Duration("agent.idle-ttl", activities.DefaultIdleTTL, "stop an agent process idle this long between turns")
		maxAgents = fs.Int("agent.max", activities.DefaultMaxAgents, "live agent processes on this worker; past it the least recently used idle one is stopped")
		maxTurns  = fs.Int("turns.max", 0, "turns this worker runs at once; past it new turns wait in the session queue for a worker with room (0: -agent.max; negative: no bound)")
		agentNice = fs.Int("agent.nice", 0, "the CPU priority (nice, 0-19) agents and their tools start with; above 0 the worker, its heartbeats and viewers' queries go first on a machine the agents fill (10 on a dedicated worker host: see docs/operators.md)")
		grace     = fs.Duration("agent.cancel-grace", activities.DefaultCancelGrace, "kill an agent that has not stopped this long after session/cancel")
		probe     = fs.Bool("agent.probe", true, "start each profile's agent once when the worker starts (initialize, then stop), so the first editor is told what it supports")
		startMax  = fs.Duration("agent.start-timeout", activities.DefaultInitTimeout, "fail a turn whose agent has not started and opened its session (initialize, session/new or load, authenticate) this long after its start; the turn heartbeats meanwhile")
		pollers   = fs.Int("pollers", tacpworker.DefaultWorkflowPollers, "workflow task pollers on the session queue (viewers' queries are workflow tasks too)")
		flush     = fs.Duration("events.flush", activities.DefaultFlushInterval, "how often a turn's agent events are flushed to its session at first (latency seen by viewers)")
		flushLong = fs.Duration("events.flush-longest", activities.DefaultFlushLongest, "the flush interval a turn that streams on stretches to: 1 s after 30 s, this after 5 min (history per hour)")
		flushRate = fs.Float64("events.max-rate", activities.DefaultMaxFlushRate, "turn_events signals a second of all the turns streaming on this worker together; past it each turn flushes less often (negative: no bound)")
		carry     = fs.Bool("agent.carry-context", true, "seed a new agent session with the session's transcript when the agent's own session could not be loaded on this worker (agent.context_lost)")
		carryMax  = fs.Int("agent.carry-context-bytes", signals.DefaultTranscriptBytes, "bound of that transcript, newest kept")
		missingWS = fs.String("workspace.missing", activities.MissingWorkspaceFail, "when a session's workspace is not on this worker (its earlier turns ran on another machine): fail (the turn fails, workspace.missing is journaled) or empty (go on in an empty workspace)")
		cpStore   = fs.String("checkpoint.store", "", "where each turn's workspace checkpoint is pushed and a worker without the workspace restores it from: a git remote every worker reaches (a path to a bare repository on shared storage, ssh://, https://; the worker's git credentials), an S3-compatible bucket s3://BUCKET/PREFIX?endpoint=URL (credentials TACP_S3_ACCESS_KEY_ID and TACP_S3_SECRET_ACCESS_KEY; sealed with the codec keys when set), off, or empty for a bare repository in -data-dir (one machine)")
		cpExclude = fs.String("checkpoint.exclude", "", "gitignore patterns no workspace checkpoint takes in, comma-separated (besides each workspace's .gitignore)")
		cpMaxFile = fs.Int64("checkpoint.max-file-bytes", 2<<20, "the largest untracked file a checkpoint takes in; larger ones are skipped and named in workspace.checkpoint")
		depName   = fs.String("deployment.name", signals.DefaultDeploymentName, "the Worker Deployment this worker joins: sessions and turns are pinned to its version and move to a new current version at their next idle moment (empty: unversioned, see README)")
		depBuild  = fs.String("deployment.build-id", tacpworker.DefaultBuildID(), "this build's id in the deployment (default: the binary's VCS revision, or a hash of the binary when it carries none)")
		depCur    = fs.Bool("deployment.current", false, "make this worker's version the deployment's current one once it polls (always with -dev, and when the deployment has none yet)")
		limitWait = fs.Duration("limits.max-wait", 0, "the longest a turn the model provider limited (a rate limit, an overloaded provider) waits on a durable timer before it runs again as the turn's next attempt (0: off, the turn fails)")
		limitBack = fs.Duration("limits.backoff", activities.DefaultLimitBackoff, "a limited turn's first wait when the agent gives no reset time, doubled for each further wait (at most 15m)")
		metrics   = fs.String("metrics.listen", "", "serve Prometheus metrics at http://ADDR/metrics, e.g. 127.0.0.1:9464 (empty: off)")
		sandboxed = fs.String("agent.sandbox", activities.SandboxOn, "run the agents of profiles that do not say otherwise in the kernel sandbox of their session: on or off (on: a kernel without Landlock ABI 6 refuses to start the worker)")
	)
	var profiles profileFlags
	fs.Var(&profiles, "agent.profile", "an agent profile NAME=COMMAND this worker may run; repeat it for more (TACP_AGENT_PROFILE: several separated by ';')")
	if dry != nil {
		*dry = fs
		fs.Init(name, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return flagenv.Parse(fs, args)
	}
	if err := flagenv.Parse(fs, args); err != nil {
		return err
	}
	if *profFile != "" {
		ps, def, err := activities.LoadProfiles(*profFile)
		if err != nil {
			return err
		}
		profiles = append(profiles, ps...)
		if *profDef == "" {
			*profDef = def
		}
	}
	if *missingWS != activities.MissingWorkspaceFail && *missingWS != activities.MissingWorkspaceEmpty {
		return fmt.Errorf("-workspace.missing: %q is neither %q nor %q", *missingWS, activities.MissingWorkspaceFail, activities.MissingWorkspaceEmpty)
	}
	rootDirs := splitList(*roots)
	if len(rootDirs) == 0 {
		rootDirs = []string{filepath.Join(*data, "workspaces")}
		if home, err := os.UserHomeDir(); err == nil && *dev {
			// One user on one machine: an editor's project folder under the home directory
			// may be a workspace (starter acp passes the editor's cwd).
			rootDirs = append(rootDirs, home)
		}
	}
	logger, err := logging.New(*logLevel)
	if err != nil {
		return err
	}
	// Libraries that log through slog's default (the ACP SDK) log as the worker does.
	slog.SetDefault(logger)
	store := *cpStore
	if store == "" {
		store = checkpoint.DefaultStoreURL(*data)
		if _, err := exec.LookPath("git"); err != nil {
			// The default must work on any laptop: no git, no checkpoints, and the log says so.
			logger.Warn("no git on PATH: workspace checkpoints are off (-checkpoint.store)")
			store = checkpoint.StoreOff
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	tel, err := telemetry.Start(ctx, telemetry.Options{MetricsListen: *metrics, Logger: logger})
	if err != nil {
		return err
	}
	// Deferred first, so it runs last: after the worker and the client have stopped, the
	// last spans are flushed.
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			logger.Warn("telemetry shutdown", "error", err)
		}
	}()
	if addr := tel.MetricsAddr(); addr != "" {
		logger.Info("serving metrics", "url", "http://"+addr+"/metrics")
	}
	if len(tel.Interceptors) > 0 {
		logger.Info("exporting traces over OTLP")
	}

	var c client.Client
	if *dev {
		srv, err := devserver.Start(ctx, devserver.Options{DBPath: *devDB, Port: *devPort, UIPort: *devUIPort, UICodecEndpoint: *devCodec})
		if err != nil {
			return err
		}
		defer func() { _ = srv.Stop() }()
		logger.Info("embedded Temporal server started", "address", srv.HostPort(), "ui", srv.UIURL(), "db", *devDB)
		dc, err := codec.DataConverterFromEnv()
		if err != nil {
			return err
		}
		if c, err = srv.NewClient(ctx, client.Options{DataConverter: dc, MetricsHandler: tel.MetricsHandler, Interceptors: tel.Interceptors}); err != nil {
			return err
		}
	} else if c, err = dial.ClientWith(ctx, dial.Options{
		Address: *address, Namespace: *namespace, Logger: logger,
		MetricsHandler: tel.MetricsHandler, Interceptors: tel.Interceptors,
	}); err != nil {
		return err
	}
	defer c.Close()

	// No agent reaches the Temporal frontend, nor a port this process listens on (the
	// embedded server's, its UI's, the metrics').
	frontend, ns := dial.Address(*address), dial.Namespace(*namespace)
	if *dev {
		ns = client.DefaultNamespace
		frontend = fmt.Sprintf("127.0.0.1:%d", *devPort)
	}
	deny := append(sandbox.ListeningPorts(), sandbox.PortOf(frontend))
	w, err := tacpworker.Start(c, tacpworker.Options{
		Sandbox: *sandboxed, SandboxDenyPorts: deny,
		TaskQueue: *queue, Agent: *agentCmd, Profiles: profiles, DefaultProfile: *profDef,
		WorkspaceRoots: rootDirs, MCP: activities.MCPPolicy{Mode: *mcpMode, Commands: splitList(*mcpCmds)},
		DataDir: *data, Logger: logger,
		MaxTurns: *maxTurns, MetricsHandler: tel.MetricsHandler, Namespace: ns,
		AgentIdleTTL: *idleTTL, MaxAgents: *maxAgents, AgentNice: *agentNice, CancelGrace: *grace, InitTimeout: *startMax, ProbeAgents: *probe,
		FlushInterval: *flush, FlushLongest: *flushLong, FlushMaxRate: *flushRate, WorkflowPollers: *pollers,
		NoCarryContext: !*carry, CarryContextBytes: *carryMax, MissingWorkspace: *missingWS,
		CheckpointStore: store, CheckpointExclude: splitList(*cpExclude), CheckpointMaxFileBytes: *cpMaxFile,
		Deployment:   tacpworker.Deployment{Name: *depName, BuildID: *depBuild},
		LimitMaxWait: *limitWait, LimitBackoff: *limitBack,
		Build: session.Build{Confidential: codec.Configured()},
	})
	if err != nil {
		return err
	}
	defer w.Stop()
	if *depName == "" {
		logger.Warn("unversioned worker: sessions are not pinned, so a build that changes a session's shape breaks the sessions running when it is deployed (README, \"An unversioned cluster\")")
	} else if err := promote(ctx, c, *queue, w, *dev || *depCur, logger); err != nil {
		return err
	}
	logger.Info("worker polling", "task_queue", *queue, "host_queue", w.Host.Queue,
		"agent_profiles", w.Trust.Profiles.Names(), "default_profile", w.Trust.Profiles.Default(), "workspace_roots", w.Trust.Roots.Dirs())
	<-ctx.Done()
	return nil
}

// promote makes w's version its deployment's current one when asked to, or when the
// deployment has no current version yet (its first build: otherwise nothing would run).
func promote(ctx context.Context, c client.Client, queue string, w *tacpworker.Worker, always bool, logger *slog.Logger) error {
	cur, err := tacpworker.CurrentVersion(ctx, c, queue)
	if err != nil {
		return err
	}
	mine := signals.DeploymentVersion(w.Version.DeploymentName, w.Version.BuildID)
	switch {
	case cur == mine:
		logger.Info("worker version is current", "version", mine)
		return nil
	case !always && cur != "":
		logger.Info("worker version is not current: sessions stay on the current one until an operator makes this one current (starter deployment current BUILD_ID)", "version", mine, "current", cur)
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	prev, err := tacpclient.NewClient(c, queue).SetCurrentVersion(sctx, w.Version.DeploymentName, w.Version.BuildID)
	if err != nil {
		return err
	}
	logger.Info("worker version made current: sessions on other versions move to it at their next idle moment", "version", mine, "previous", prev)
	return nil
}

// profileFlags collects -agent.profile NAME=COMMAND values.
type profileFlags []activities.Profile

func (p *profileFlags) String() string { return "" }

func (p *profileFlags) Set(v string) error {
	for _, one := range strings.Split(v, ";") {
		if strings.TrimSpace(one) == "" {
			continue
		}
		pr, err := activities.ParseProfileFlag(one)
		if err != nil {
			return err
		}
		*p = append(*p, pr)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

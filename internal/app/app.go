// Package app wires tacp's parts into the processes users run: the worker (workflows +
// turn runner on one task queue), the client connection (the embedded dev server or a
// cluster through the SDK's envconfig), and the built-in test agent. worker/, starter/ and
// the end-to-end tests share it.
package app

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/codec"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/testagent/agent"
	"github.com/tacp-dev/tacp/workflows"
)

// WorkerOptions configure a tacp worker.
type WorkerOptions struct {
	TaskQueue string
	// Agent is the command line of the profile named "default"; with neither Agent nor
	// Profiles, the default profile runs the built-in test agent.
	Agent string
	// Profiles are the agents this worker may run (DESIGN §10); DefaultProfile names the
	// one serving sessions that name none (empty: "default", or the only profile).
	Profiles       []activities.Profile
	DefaultProfile string
	// WorkspaceRoots are the directories sessions' workspaces must lie in (empty: the
	// per-session folders under DataDir/workspaces).
	WorkspaceRoots []string
	// MCP is what the worker allows of the MCP servers clients pass (zero: none).
	MCP     activities.MCPPolicy
	DataDir string
	Logger  *slog.Logger
	// FlushInterval and FlushBytes tune event batching (0: the defaults); FlushLongest is
	// the interval a long streaming turn's flushes stretch to (0: the default; set it to
	// FlushInterval to keep one interval).
	FlushInterval time.Duration
	FlushLongest  time.Duration
	FlushBytes    int
	// FlushMaxRate bounds the turn_events signals a second of the turns streaming on the
	// worker together (0: the default; negative: no bound).
	FlushMaxRate float64
	CancelGrace  time.Duration
	InitTimeout  time.Duration
	// NoCarryContext turns off seeding a new agent session with the session's transcript
	// when the agent's own could not be loaded; CarryContextBytes bounds it (0: 32 KiB).
	NoCarryContext    bool
	CarryContextBytes int
	// MissingWorkspace is what a turn does when the session's workspace is not on this
	// worker: "fail" (default) or "empty".
	MissingWorkspace string
	// AgentIdleTTL and MaxAgents bound the agent processes kept alive between turns.
	AgentIdleTTL time.Duration
	MaxAgents    int
	// WorkflowPollers is how many workflow task pollers the session queue's worker runs
	// (0: DefaultWorkflowPollers). Viewers' events and status queries arrive as workflow
	// tasks too, so the SDK's default of 2 starves streaming sessions of their signals'
	// tasks once dozens of viewers poll.
	WorkflowPollers int
}

// DefaultWorkflowPollers is the default of WorkerOptions.WorkflowPollers.
const DefaultWorkflowPollers = 16

// Worker is a running tacp worker: the session task queue's worker and this process's own
// host queue, on which decisions are delivered into the turns it runs.
type Worker struct {
	Host     *activities.Host
	Trust    *activities.Trust
	sessions worker.Worker
	host     worker.Worker
}

// Stop stops polling and every agent process.
func (w *Worker) Stop() {
	w.sessions.Stop()
	w.host.Stop()
	w.Host.Close()
}

// HostQueue names this process's own task queue: unique per process, so a delivery whose
// host is gone times out at schedule-to-start instead of reaching another worker.
func HostQueue() string {
	name, _ := os.Hostname()
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("tacp-host-%s-%d-%x", name, os.Getpid(), b)
}

// DefaultDataDir is where tacp keeps its files: $XDG_DATA_HOME/tacp or ~/.local/share/tacp.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "tacp")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "tacp")
	}
	return filepath.Join(home, ".local", "share", "tacp")
}

// StartWorker registers SessionWorkflow, TurnWorkflow and the turn runner on opts.TaskQueue,
// the Deliver activity on this process's host queue, and starts polling both.
func StartWorker(c client.Client, opts WorkerOptions) (*Worker, error) {
	if opts.TaskQueue == "" {
		opts.TaskQueue = signals.DefaultTaskQueue
	}
	if opts.DataDir == "" {
		opts.DataDir = DefaultDataDir()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	trust, err := NewTrust(opts)
	if err != nil {
		return nil, err
	}
	if opts.WorkflowPollers <= 0 {
		opts.WorkflowPollers = DefaultWorkflowPollers
	}
	w := worker.New(c, opts.TaskQueue, worker.Options{
		// Cancellation reaches an activity with its heartbeats: keep them frequent so that
		// cancel reaches the agent within about a second.
		MaxHeartbeatThrottleInterval:     time.Second,
		DefaultHeartbeatThrottleInterval: time.Second,
		MaxConcurrentWorkflowTaskPollers: opts.WorkflowPollers,
		MaxConcurrentActivityTaskPollers: 4,
	})
	w.RegisterWorkflowWithOptions(workflows.NewSessionWorkflow(trust), workflow.RegisterOptions{Name: signals.SessionWorkflowType})
	w.RegisterWorkflowWithOptions(workflows.TurnWorkflow, workflow.RegisterOptions{Name: signals.TurnWorkflowType})
	w.RegisterWorkflowWithOptions(workflows.NewProfilesWorkflow(trust), workflow.RegisterOptions{Name: signals.ProfilesWorkflowType})
	host := &activities.Host{
		Queue:         HostQueue(),
		IdleTTL:       opts.AgentIdleTTL,
		MaxAgents:     opts.MaxAgents,
		Client:        c,
		Logger:        opts.Logger,
		FlushInterval: opts.FlushInterval,
		FlushBytes:    opts.FlushBytes,
	}
	host.Start()
	runner := &activities.Runner{
		Client:        c,
		Host:          host,
		Trust:         trust,
		FlushInterval: opts.FlushInterval,
		FlushLongest:  opts.FlushLongest,
		FlushBytes:    opts.FlushBytes,
		MaxFlushRate:  opts.FlushMaxRate,
		CancelGrace:   opts.CancelGrace,
		InitTimeout:   opts.InitTimeout,
		Logger:        opts.Logger,

		NoCarryContext:    opts.NoCarryContext,
		CarryContextBytes: opts.CarryContextBytes,
		MissingWorkspace:  opts.MissingWorkspace,
	}
	w.RegisterActivityWithOptions(runner.RunTurn, activity.RegisterOptions{Name: signals.ActivityRunTurn})
	// The host queue takes deliveries and, by affinity (DESIGN §10), the turns of the sessions
	// whose agents live here: RunTurn's heartbeats carry cancellation, as on the session queue.
	hw := worker.New(c, host.Queue, worker.Options{
		MaxHeartbeatThrottleInterval:     time.Second,
		DefaultHeartbeatThrottleInterval: time.Second,
	})
	hw.RegisterActivityWithOptions(host.Deliver, activity.RegisterOptions{Name: signals.ActivityDeliver})
	hw.RegisterActivityWithOptions(host.ReleaseAgent, activity.RegisterOptions{Name: signals.ActivityReleaseAgent})
	hw.RegisterActivityWithOptions(runner.RunTurn, activity.RegisterOptions{Name: signals.ActivityRunTurn})
	if err := hw.Start(); err != nil {
		host.Close()
		return nil, fmt.Errorf("start host worker on %s: %w", host.Queue, err)
	}
	if err := w.Start(); err != nil {
		hw.Stop()
		host.Close()
		return nil, fmt.Errorf("start worker on %s: %w", opts.TaskQueue, err)
	}
	return &Worker{Host: host, Trust: trust, sessions: w, host: hw}, nil
}

// NewTrust builds what a worker allows from opts (DataDir set): its profiles (Agent as the
// "default" profile; the built-in test agent when there are none), its workspace roots and
// its MCP policy.
func NewTrust(opts WorkerOptions) (*activities.Trust, error) {
	profiles := append([]activities.Profile(nil), opts.Profiles...)
	if opts.Agent != "" || len(profiles) == 0 {
		cmd := opts.Agent
		if cmd == "" {
			cmd = SelfTestAgent(filepath.Join(opts.DataDir, "testagent"))
		}
		profiles = append(profiles, activities.Profile{Name: activities.DefaultProfile, Command: cmd, Description: "the worker's default agent"})
	}
	ps, err := activities.NewProfiles(profiles, opts.DefaultProfile)
	if err != nil {
		return nil, err
	}
	dirs := opts.WorkspaceRoots
	if len(dirs) == 0 {
		dirs = []string{filepath.Join(opts.DataDir, "workspaces")}
	}
	roots, err := activities.NewRoots(dirs)
	if err != nil {
		return nil, err
	}
	mode, err := activities.ParseMCPMode(opts.MCP.Mode)
	if err != nil {
		return nil, err
	}
	return &activities.Trust{Profiles: ps, Roots: roots, MCP: activities.MCPPolicy{Mode: mode, Commands: opts.MCP.Commands}}, nil
}

// testAgentArg is the argument that turns a tacp binary into the built-in test agent.
const testAgentArg = "testagent"

// SelfTestAgent is the agent command line that runs this very binary as the test agent (with
// the steering extension), so `go run ./starter demo` needs nothing else built.
func SelfTestAgent(transcripts string) string {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return strconv.Quote(exe) + " " + testAgentArg + " -steering -transcripts " + strconv.Quote(transcripts)
}

// MaybeRunTestAgent runs the test agent and exits when the process was started as one
// (argv[1] == "testagent"). Mains call it first.
func MaybeRunTestAgent() {
	if len(os.Args) > 1 && os.Args[1] == testAgentArg {
		os.Exit(agent.Main(os.Args[2:]))
	}
}

// Dial connects to the cluster the standard TEMPORAL_* variables and temporal.toml profile
// name (through the SDK's envconfig); address and namespace, when set, override them.
func Dial(ctx context.Context, address, namespace string, logger *slog.Logger) (client.Client, error) {
	return DialWith(ctx, DialOptions{Address: address, Namespace: namespace, Logger: logger})
}

// DialOptions configure DialWith.
type DialOptions struct {
	// Address and Namespace, when set, override the envconfig ones.
	Address, Namespace string
	Logger             *slog.Logger
	// MetricsHandler and Interceptors carry the worker's telemetry (internal/telemetry);
	// nil: none.
	MetricsHandler client.MetricsHandler
	Interceptors   []interceptor.ClientInterceptor
}

// DialWith connects as Dial does, with the client options of o.
func DialWith(ctx context.Context, o DialOptions) (client.Client, error) {
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
	if opts.DataConverter, err = DataConverter(); err != nil {
		return nil, err
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s: %w", orDefault(opts.HostPort, client.DefaultHostPort), err)
	}
	return c, nil
}

// DataConverter is the payload converter of every tacp client and worker: the SDK's default,
// encrypted with the keys of TACP_CODEC_KEYS or TACP_CODEC_KEY_FILE when either is set (nil
// when neither is: the SDK's default applies).
func DataConverter() (converter.DataConverter, error) {
	keys, ok, err := codec.LoadKeys(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("payload encryption keys: %w", err)
	}
	if !ok {
		return nil, nil
	}
	return codec.DataConverter(keys), nil
}

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// Package app wires tacp's parts into the processes users run: the worker (workflows +
// turn runner on one task queue), the client connection (the embedded dev server or a
// cluster through the SDK's envconfig), and the built-in test agent. worker/, starter/ and
// the end-to-end tests share it.
package app

import (
	"context"
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
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/testagent/agent"
	"github.com/tacp-dev/tacp/workflows"
)

// WorkerOptions configure a tacp worker.
type WorkerOptions struct {
	TaskQueue string
	// Agent is the default agent command line; empty means the built-in test agent.
	Agent   string
	DataDir string
	Logger  *slog.Logger
	// FlushInterval and FlushBytes tune event batching (0: the defaults).
	FlushInterval time.Duration
	FlushBytes    int
	CancelGrace   time.Duration
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

// StartWorker registers SessionWorkflow, TurnWorkflow and the turn runner on opts.TaskQueue
// and starts polling.
func StartWorker(c client.Client, opts WorkerOptions) (worker.Worker, error) {
	if opts.TaskQueue == "" {
		opts.TaskQueue = signals.DefaultTaskQueue
	}
	if opts.DataDir == "" {
		opts.DataDir = DefaultDataDir()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Agent == "" {
		opts.Agent = SelfTestAgent(filepath.Join(opts.DataDir, "testagent"))
	}
	w := worker.New(c, opts.TaskQueue, worker.Options{
		// Cancellation reaches an activity with its heartbeats: keep them frequent so that
		// cancel reaches the agent within about a second.
		MaxHeartbeatThrottleInterval:     time.Second,
		DefaultHeartbeatThrottleInterval: time.Second,
	})
	w.RegisterWorkflowWithOptions(workflows.SessionWorkflow, workflow.RegisterOptions{Name: signals.SessionWorkflowType})
	w.RegisterWorkflowWithOptions(workflows.TurnWorkflow, workflow.RegisterOptions{Name: signals.TurnWorkflowType})
	runner := &activities.Runner{
		Client:        c,
		Agent:         opts.Agent,
		DataDir:       opts.DataDir,
		FlushInterval: opts.FlushInterval,
		FlushBytes:    opts.FlushBytes,
		CancelGrace:   opts.CancelGrace,
		Logger:        opts.Logger,
	}
	w.RegisterActivityWithOptions(runner.RunTurn, activity.RegisterOptions{Name: signals.ActivityRunTurn})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start worker on %s: %w", opts.TaskQueue, err)
	}
	return w, nil
}

// testAgentArg is the argument that turns a tacp binary into the built-in test agent.
const testAgentArg = "testagent"

// SelfTestAgent is the agent command line that runs this very binary as the test agent, so
// `go run ./starter demo` needs nothing else built.
func SelfTestAgent(transcripts string) string {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return strconv.Quote(exe) + " " + testAgentArg + " -transcripts " + strconv.Quote(transcripts)
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
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return nil, fmt.Errorf("load Temporal client config: %w", err)
	}
	if address != "" {
		opts.HostPort = address
	}
	if namespace != "" {
		opts.Namespace = namespace
	}
	if logger != nil {
		opts.Logger = sdklog.NewStructuredLogger(logger)
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s: %w", orDefault(opts.HostPort, client.DefaultHostPort), err)
	}
	return c, nil
}

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

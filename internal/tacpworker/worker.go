// Package tacpworker wires a tacp worker: SessionWorkflow, TurnWorkflow and the turn runner
// on the session task queue, and this process's own host queue for deliveries (DESIGN §10).
// worker/, demo/, the end-to-end tests and the benchmarks start their workers with it.
package tacpworker

import (
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/workflows"
)

// Options configure a tacp worker.
type Options struct {
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
	// LimitMaxWait is the longest a limited turn waits for its limit to reset (0: off);
	// LimitBackoff its first wait when the agent gives no reset time (activities.Runner).
	LimitMaxWait time.Duration
	LimitBackoff time.Duration
	// AgentIdleTTL and MaxAgents bound the agent processes kept alive between turns.
	AgentIdleTTL time.Duration
	MaxAgents    int
	// WorkflowPollers is how many workflow task pollers the session queue's worker runs
	// (0: DefaultWorkflowPollers). Viewers' events and status queries arrive as workflow
	// tasks too, so the SDK's default of 2 starves streaming sessions of their signals'
	// tasks once dozens of viewers poll.
	WorkflowPollers int
}

// DefaultWorkflowPollers is the default of Options.WorkflowPollers.
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

// Start registers SessionWorkflow, TurnWorkflow and the turn runner on opts.TaskQueue, the
// Deliver activity on this process's host queue, and starts polling both.
func Start(c client.Client, opts Options) (*Worker, error) {
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
		LimitMaxWait:      opts.LimitMaxWait,
		LimitBackoff:      opts.LimitBackoff,
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

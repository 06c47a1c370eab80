// Package tacpworker wires a tacp worker: SessionWorkflow, ProfilesWorkflow and the turn runner
// on the session task queue, and this process's own host queue for deliveries (contract §10).
// worker/, demo/, the end-to-end tests and the benchmarks start their workers with it.
package tacpworker

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/activities"
	"github.com/tacp-dev/tacp/checkpoint"
	"github.com/tacp-dev/tacp/codec"
	"github.com/tacp-dev/tacp/internal/sandbox"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/workflows"
	"github.com/tacp-dev/tacp/workflows/session"
)

// Options configure a tacp worker.
type Options struct {
	TaskQueue string
	// Agent is the command line of the profile named "default"; with neither Agent nor
	// Profiles, the default profile runs the built-in test agent.
	Agent string
	// Profiles are the agents this worker may run (contract §10); DefaultProfile names the
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
	// CheckpointStore is the git store of workspace checkpoints: a path or URL git pushes
	// to ("" or "off": no checkpoints); CheckpointExclude gitignore patterns no checkpoint
	// takes in; CheckpointMaxFileBytes the largest untracked file it takes in (0: 2 MiB).
	CheckpointStore        string
	CheckpointExclude      []string
	CheckpointMaxFileBytes int64
	// LimitMaxWait is the longest a limited turn waits for its limit to reset (0: off);
	// LimitBackoff its first wait when the agent gives no reset time (activities.Runner).
	LimitMaxWait time.Duration
	LimitBackoff time.Duration
	// AgentIdleTTL and MaxAgents bound the agent processes kept alive between turns.
	AgentIdleTTL time.Duration
	MaxAgents    int
	// MaxTurns is how many turns the worker runs at once (0: MaxAgents, or its default;
	// negative: no bound); the turns past it wait in the session queue for a worker with
	// room (activities.TurnGate).
	MaxTurns int
	// MetricsHandler receives the worker's own gauges (nil: none), and Namespace names the
	// namespace whose session queue's backlog they report (tacp_turns_waiting_capacity).
	MetricsHandler client.MetricsHandler
	Namespace      string
	// AgentNice is the CPU priority the agents start with (activities.Host.AgentNice).
	AgentNice int
	// Sandbox is whether the profiles that do not say run their agents in the kernel
	// sandbox of their session: "on" or "off" ("": off; the worker binary's -agent.sandbox
	// is on). A sandboxed profile on a kernel that cannot sandbox fails Start.
	Sandbox string
	// SandboxDenyPorts are the TCP ports no sandboxed agent may connect to, whatever its
	// profile says: the Temporal frontend's and the worker's own.
	SandboxDenyPorts []uint16
	// WorkflowPollers is how many workflow task pollers the session queue's worker runs
	// (0: DefaultWorkflowPollers). Viewers' events and status queries arrive as workflow
	// tasks too, so the SDK's default of 2 starves streaming sessions of their signals'
	// tasks once dozens of viewers poll.
	WorkflowPollers int
	// ProbeAgents starts each profile's agent once when the worker starts (initialize, then
	// stop; in the background, one at a time), so that clients are told what each agent
	// supports before any turn ran (activities/probe.go).
	ProbeAgents bool
	// Deployment is the Worker Deployment version this worker joins (zero: unversioned).
	Deployment Deployment
	// Build is what this build fixes of its session workflows (tests: a build with another
	// command order, a build that never upgrades).
	Build session.Build
}

// DefaultWorkflowPollers is the default of Options.WorkflowPollers.
const DefaultWorkflowPollers = 16

// Worker is a running tacp worker: the session task queue's worker and this process's own
// host queue, on which decisions are delivered into the turns it runs.
type Worker struct {
	Host  *activities.Host
	Trust *activities.Trust
	// Version is the deployment version the worker polls as (zero: unversioned).
	Version worker.WorkerDeploymentVersion
	// Sandbox confines the agents of sandboxed profiles (nil: none is).
	Sandbox  *sandbox.Box
	sessions worker.Worker
	host     worker.Worker
	probed   chan struct{}
	stop     context.CancelFunc
	stopWake context.CancelFunc
}

// Probed is closed once the worker has learned each profile's agent (Options.ProbeAgents),
// or at once without probes.
func (w *Worker) Probed() <-chan struct{} { return w.probed }

// Stop stops polling and every agent process.
func (w *Worker) Stop() {
	w.stopWake()
	w.stop()
	<-w.probed
	w.sessions.Stop()
	w.host.Stop()
	w.Host.Close()
	if w.Sandbox != nil {
		w.Sandbox.Close()
	}
}

// newSandbox returns the worker's sandbox when a profile runs sandboxed, or refuses to start
// when the kernel cannot sandbox: fail closed, never silently unsandboxed.
func newSandbox(opts Options, trust *activities.Trust) (*sandbox.Box, error) {
	var sandboxed []string
	for _, n := range trust.Profiles.Names() {
		if p, _ := trust.Profiles.Resolve(n); p.Sandboxed() {
			sandboxed = append(sandboxed, n)
		}
	}
	if len(sandboxed) == 0 {
		return nil, nil
	}
	protected := append([]string{opts.DataDir}, trust.Roots.Dirs()...)
	box, err := sandbox.NewBox(filepath.Join(opts.DataDir, "sandbox"), protected, opts.SandboxDenyPorts)
	if err != nil {
		return nil, fmt.Errorf("agent profile %q runs sandboxed, and this machine cannot sandbox it: %w. "+
			"Run it unsandboxed on purpose with \"sandbox\": \"off\" in its profile, or -agent.sandbox=off for every profile", sandboxed[0], err)
	}
	return box, nil
}

// HostQueue names this process's own task queue: unique per process, so a delivery whose
// host is gone times out at schedule-to-start instead of reaching another worker.
func HostQueue() string {
	name, _ := os.Hostname()
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("tacp-host-%s-%d-%x", name, os.Getpid(), b)
}

// Start registers SessionWorkflow, ProfilesWorkflow and the turn runner on opts.TaskQueue, the
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
	if opts.AgentNice < 0 || opts.AgentNice > 19 {
		return nil, fmt.Errorf("agent nice %d: want 0 (the worker's priority) to 19 (the lowest); an agent never runs above the worker", opts.AgentNice)
	}
	trust, err := NewTrust(opts)
	if err != nil {
		return nil, err
	}
	box, err := newSandbox(opts, trust)
	if err != nil {
		return nil, err
	}
	if opts.WorkflowPollers <= 0 {
		opts.WorkflowPollers = DefaultWorkflowPollers
	}
	gate, tuner, err := admission(opts)
	if err != nil {
		return nil, err
	}
	shadows, err := checkpoints(opts)
	if err != nil {
		return nil, err
	}
	wopts := worker.Options{
		Tuner: tuner,
		// Cancellation reaches an activity with its heartbeats: keep them frequent so that
		// cancel reaches the agent within about a second.
		MaxHeartbeatThrottleInterval:     time.Second,
		DefaultHeartbeatThrottleInterval: time.Second,
		MaxConcurrentWorkflowTaskPollers: opts.WorkflowPollers,
		MaxConcurrentActivityTaskPollers: 4,
	}
	var version worker.WorkerDeploymentVersion
	pinned := workflow.VersioningBehaviorUnspecified
	if opts.Deployment.Name != "" {
		version = opts.Deployment.Version()
		pinned = workflow.VersioningBehaviorPinned
		// Sessions pinned (a run is only replayed by the build that recorded it);
		// ProfilesWorkflow, one task long, takes the default.
		wopts.DeploymentOptions = worker.DeploymentOptions{
			UseVersioning:             true,
			Version:                   version,
			DefaultVersioningBehavior: workflow.VersioningBehaviorAutoUpgrade,
		}
	}
	w := worker.New(c, opts.TaskQueue, wopts)
	w.RegisterWorkflowWithOptions(workflows.NewSessionWorkflowFor(trust, opts.Build), workflow.RegisterOptions{Name: signals.SessionWorkflowType, VersioningBehavior: pinned})
	w.RegisterWorkflowWithOptions(workflows.NewProfilesWorkflow(trust), workflow.RegisterOptions{Name: signals.ProfilesWorkflowType})
	host := &activities.Host{
		Queue:         HostQueue(),
		IdleTTL:       opts.AgentIdleTTL,
		MaxAgents:     opts.MaxAgents,
		AgentNice:     opts.AgentNice,
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
		Checkpoints:       shadows,
		Sandbox:           box,
		LimitMaxWait:      opts.LimitMaxWait,
		LimitBackoff:      opts.LimitBackoff,
		Gate:              gate,
	}
	w.RegisterActivityWithOptions(runner.RunTurn, activity.RegisterOptions{Name: signals.ActivityRunTurn})
	// The host queue takes deliveries and, by affinity (contract §10), the turns of the sessions
	// whose agents live here: RunTurn's heartbeats carry cancellation, as on the session queue.
	// It is unversioned: one process polls it, so whatever reaches it runs on this build.
	hw := worker.New(c, host.Queue, worker.Options{
		MaxHeartbeatThrottleInterval:     time.Second,
		DefaultHeartbeatThrottleInterval: time.Second,
	})
	hw.RegisterActivityWithOptions(host.Deliver, activity.RegisterOptions{Name: signals.ActivityDeliver})
	hw.RegisterActivityWithOptions(host.ReleaseAgent, activity.RegisterOptions{Name: signals.ActivityReleaseAgent})
	hw.RegisterActivityWithOptions(runner.DeleteSessionData, activity.RegisterOptions{Name: signals.ActivityDeleteSessionData})
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
	wctx, stopWake := context.WithCancel(context.Background())
	if opts.MetricsHandler != nil && opts.Namespace != "" {
		go reportBacklog(wctx, c, opts.Namespace, opts.TaskQueue, opts.MetricsHandler, opts.Logger)
	}
	if opts.Deployment.Name != "" && opts.Deployment.WakeInterval >= 0 {
		every := opts.Deployment.WakeInterval
		if every == 0 {
			every = DefaultWakeInterval
		}
		wk := &waker{c: c, queue: opts.TaskQueue, version: version, every: every, logger: opts.Logger}
		go wk.run(wctx)
	}
	ctx, stop := context.WithCancel(context.Background())
	out := &Worker{Host: host, Trust: trust, Version: version, Sandbox: box, sessions: w, host: hw, stopWake: stopWake, probed: make(chan struct{}), stop: stop}
	go func() {
		defer close(out.probed)
		if opts.ProbeAgents {
			runner.ProbeProfiles(ctx, opts.DataDir)
		}
	}()
	return out, nil
}

// checkpoints is the worker's checkpoint shadows over the store opts names (nil: off).
func checkpoints(opts Options) (*checkpoint.Shadows, error) {
	if opts.CheckpointStore == "" || opts.CheckpointStore == checkpoint.StoreOff {
		return nil, nil
	}
	if _, err := exec.LookPath("git"); err != nil {
		return nil, fmt.Errorf("-checkpoint.store %s: workspace checkpoints need git on this worker's PATH (or -checkpoint.store=off): %w", opts.CheckpointStore, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keys, err := codec.KeysFromEnv()
	if err != nil {
		return nil, fmt.Errorf("checkpoint store: %w", err)
	}
	st, err := checkpoint.OpenStore(ctx, checkpoint.NormalizeStoreURL(opts.CheckpointStore), keys)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store: %w", err)
	}
	return &checkpoint.Shadows{
		Dir: filepath.Join(opts.DataDir, "checkpoints", "sessions"), Store: st,
		Exclude: opts.CheckpointExclude, MaxFileBytes: opts.CheckpointMaxFileBytes,
	}, nil
}

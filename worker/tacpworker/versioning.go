package tacpworker

// Worker Versioning, the worker side (README, "Upgrading workers while sessions run"): the
// worker joins a Worker Deployment as one version (its build id), registers SessionWorkflow
// pinned, and, while its version is the one its task queue routes new work
// to, wakes the sessions pinned to other versions of its deployment (signals.SignalWake):
// the server tells a pinned run that its target version changed only on a workflow task,
// and an idle session has none until something happens to it.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/tacp-dev/tacp/signals"
)

// Deployment is the Worker Deployment version a worker joins. The zero value is an
// unversioned worker: its sessions are not pinned, and every build replays the histories of
// every other (README, "An unversioned cluster").
type Deployment struct {
	// Name is the Worker Deployment (empty: unversioned).
	Name string
	// BuildID is this build's id within it (empty: DefaultBuildID()).
	BuildID string
	// WakeInterval is how often a worker checks whether its version is current and wakes
	// the sessions pinned to other versions (0: DefaultWakeInterval; negative: never).
	WakeInterval time.Duration
}

// DefaultWakeInterval is the default of Deployment.WakeInterval: an idle session learns of a
// new current version within about this long.
const DefaultWakeInterval = 2 * time.Second

// Version is the deployment version of d, with the build id defaulted.
func (d Deployment) Version() worker.WorkerDeploymentVersion {
	id := d.BuildID
	if id == "" {
		id = DefaultBuildID()
	}
	return worker.WorkerDeploymentVersion{DeploymentName: d.Name, BuildID: id}
}

// DefaultBuildID is the build id of this binary: its VCS revision; with "-dirty-" and a
// hash of the executable when the tree had changes; the module version of a released
// binary; else "bin-" and the hash (a binary built without VCS stamping, -buildvcs=false).
// Two binaries with different code never share an id: a pinned run is only replayed by
// the code that recorded it.
func DefaultBuildID() string {
	info, ok := debug.ReadBuildInfo()
	var rev string
	dirty := false
	if ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	switch {
	case rev != "" && !dirty:
		return short(rev)
	case rev != "":
		return short(rev) + "-dirty-" + executableHash()
	case ok && info.Main.Version != "" && info.Main.Version != "(devel)":
		return info.Main.Version
	}
	return "bin-" + executableHash()
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// executableHash is a short hash of this process's executable ("unknown" when unreadable).
func executableHash() string {
	path, err := os.Executable()
	if err != nil {
		return "unknown"
	}
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "unknown"
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// waker wakes the sessions pinned to other versions of the deployment while this worker's
// version is its task queue's current one.
type waker struct {
	c       client.Client
	queue   string
	version worker.WorkerDeploymentVersion
	every   time.Duration
	logger  *slog.Logger
	// woken are the runs woken since the current version last changed: one wake each (a
	// run that was busy moves at its first idle moment without another).
	woken   map[string]bool
	current string
}

func (w *waker) run(ctx context.Context) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		if err := w.once(ctx); err != nil && ctx.Err() == nil {
			w.logger.Debug("wake sessions on other versions", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// once wakes, if this worker's version is current, every running session of the deployment
// on another version not woken yet.
func (w *waker) once(ctx context.Context) error {
	current, err := CurrentVersion(ctx, w.c, w.queue)
	if err != nil {
		return err
	}
	if current != w.current {
		w.current, w.woken = current, map[string]bool{}
	}
	mine := signals.DeploymentVersion(w.version.DeploymentName, w.version.BuildID)
	if current != mine {
		return nil
	}
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND TaskQueue = '%s' AND %s = '%s' AND %s != '%s'",
		signals.SessionWorkflowType, w.queue, signals.SearchAttrDeployment, w.version.DeploymentName, signals.SearchAttrDeploymentVersion, mine)
	var token []byte
	for {
		resp, err := w.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token, PageSize: 1000})
		if err != nil {
			return err
		}
		for _, e := range resp.GetExecutions() {
			ex := e.GetExecution()
			if w.woken[ex.GetRunId()] {
				continue
			}
			if err := w.c.SignalWorkflow(ctx, ex.GetWorkflowId(), ex.GetRunId(), signals.SignalWake, struct{}{}); err != nil {
				w.logger.Debug("wake session", "workflow_id", ex.GetWorkflowId(), "error", err)
				continue
			}
			w.woken[ex.GetRunId()] = true
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return nil
		}
	}
}

// CurrentVersion is the "<deployment>:<build id>" version queue routes new workflow tasks to
// ("" when none is current: the queue is unversioned).
func CurrentVersion(ctx context.Context, c client.Client, queue string) (string, error) {
	resp, err := c.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return "", fmt.Errorf("describe task queue %s: %w", queue, err)
	}
	v := resp.GetVersioningInfo().GetCurrentDeploymentVersion()
	if v == nil || v.GetBuildId() == "" {
		return "", nil
	}
	return signals.DeploymentVersion(v.GetDeploymentName(), v.GetBuildId()), nil
}

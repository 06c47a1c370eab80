package signals

// Worker Versioning (contract §11 "Versions"): the names a worker, a client and an operator
// share about which build runs a session. A worker joins the Worker Deployment
// DefaultDeploymentName (or its -deployment.name) as one version, its build id; sessions and
// turns are pinned to the version that started them, and an idle session continues as new
// onto the deployment's current version (README, "Upgrading workers while sessions run").

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

const (
	// DefaultDeploymentName is the Worker Deployment tacp workers join unless told otherwise.
	DefaultDeploymentName = "tacp"

	// SignalWake tells a session that its run is not on its deployment's current version:
	// it moves there (continue-as-new with AutoUpgrade) at its next idle safe point. The
	// server flags a target's change on every workflow task of a pinned run, but an idle
	// session has none of its own, and an older server flags nothing. Workers of the current
	// version send it to the sessions pinned to other versions (worker/tacpworker); the
	// payload is ignored, and a wake that went stale (a rollback since) costs one
	// continue-as-new onto the current version.
	SignalWake = "wake"

	// SearchAttrDeploymentVersion and SearchAttrVersioningBehavior are the server's own
	// search attributes of a versioned run: "<deployment>:<build id>" and "Pinned" /
	// "AutoUpgrade".
	SearchAttrDeploymentVersion   = "TemporalWorkerDeploymentVersion"
	SearchAttrDeployment          = "TemporalWorkerDeployment"
	SearchAttrVersioningBehavior  = "TemporalWorkflowVersioningBehavior"
	VersioningBehaviorPinned      = "Pinned"
	VersioningBehaviorAutoUpgrade = "AutoUpgrade"
)

// DeploymentVersion is the "<deployment>:<build id>" string the server keys a version by
// (the TemporalWorkerDeploymentVersion search attribute).
func DeploymentVersion(deployment, buildID string) string {
	return deployment + ":" + buildID
}

// VersionRuns counts what still runs on one version of a Worker Deployment: the open runs
// pinned to it (sessions and turns) and, of them, the sessions. A version with no pinned
// run left is drained: its workers may be stopped (README, "Upgrading workers while
// sessions run"). Visibility lags a workflow task by a moment, so a caller waiting for
// "drained" asks again rather than trusting one zero taken right after a change.
type VersionRuns struct {
	Version  string `json:"version"`
	Pinned   int64  `json:"pinned"`
	Sessions int64  `json:"sessions"`
	Drained  bool   `json:"drained"`
}

// CountVersionRuns counts the open pinned runs of version ("<deployment>:<build id>").
func (c *Client) CountVersionRuns(ctx context.Context, version string) (VersionRuns, error) {
	base := fmt.Sprintf("ExecutionStatus = 'Running' AND %s = '%s' AND %s = '%s'",
		SearchAttrDeploymentVersion, version, SearchAttrVersioningBehavior, VersioningBehaviorPinned)
	all, err := c.Temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: base})
	if err != nil {
		return VersionRuns{}, fmt.Errorf("count runs of %s: %w", version, err)
	}
	sessions, err := c.Temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Query: base + fmt.Sprintf(" AND WorkflowType = '%s'", SessionWorkflowType),
	})
	if err != nil {
		return VersionRuns{}, fmt.Errorf("count sessions of %s: %w", version, err)
	}
	return VersionRuns{Version: version, Pinned: all.GetCount(), Sessions: sessions.GetCount(), Drained: all.GetCount() == 0}, nil
}

// SetCurrentVersion makes buildID the current version of deployment: new sessions start on
// it, and every session pinned to another version of it moves to it at its next idle safe
// point. A version is known to the server only once a worker of it has polled, so this
// retries "not found" until ctx ends. It returns the version that was current before.
func (c *Client) SetCurrentVersion(ctx context.Context, deployment, buildID string) (previous string, err error) {
	h := c.Temporal.WorkerDeploymentClient().GetHandle(deployment)
	for {
		resp, err := h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: buildID})
		if err == nil {
			// Deprecated for racing writers, who pass Describe's conflict token; an operator
			// promotes one version at a time, and the server still answers it.
			//lint:ignore SA1019 see above
			if p := resp.PreviousVersion; p != nil {
				previous = DeploymentVersion(p.DeploymentName, p.BuildID)
			}
			return previous, nil
		}
		var notFound *serviceerror.NotFound
		var precondition *serviceerror.FailedPrecondition
		if !errors.As(err, &notFound) && !errors.As(err, &precondition) {
			return "", fmt.Errorf("set current version of %s to %s: %w", deployment, buildID, err)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("set current version of %s to %s: no worker of it has polled yet: %w", deployment, buildID, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

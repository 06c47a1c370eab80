package tacpclient

// Administration of a Worker Deployment's versions (README, "Upgrading workers while
// sessions run"): what still runs on a version, and which version is current.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tacp-dev/tacp/signals"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// CountVersionRuns counts the open pinned runs of version ("<deployment>:<build id>").
func (c *Client) CountVersionRuns(ctx context.Context, version string) (signals.VersionRuns, error) {
	base := fmt.Sprintf("ExecutionStatus = 'Running' AND %s = '%s' AND %s = '%s'",
		signals.SearchAttrDeploymentVersion, version, signals.SearchAttrVersioningBehavior, signals.VersioningBehaviorPinned)
	all, err := c.Temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: base})
	if err != nil {
		return signals.VersionRuns{}, fmt.Errorf("count runs of %s: %w", version, err)
	}
	sessions, err := c.Temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Query: base + fmt.Sprintf(" AND WorkflowType = '%s'", signals.SessionWorkflowType),
	})
	if err != nil {
		return signals.VersionRuns{}, fmt.Errorf("count sessions of %s: %w", version, err)
	}
	return signals.VersionRuns{Version: version, Pinned: all.GetCount(), Sessions: sessions.GetCount(), Drained: all.GetCount() == 0}, nil
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
				previous = signals.DeploymentVersion(p.DeploymentName, p.BuildID)
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

package signals

// Worker Versioning (contract §11 "Versions"): the names a worker, a client and an operator
// share about which build runs a session. A worker joins the Worker Deployment
// DefaultDeploymentName (or its -deployment.name) as one version, its build id; sessions and
// turns are pinned to the version that started them, and an idle session continues as new
// onto the deployment's current version (README, "Upgrading workers while sessions run").

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

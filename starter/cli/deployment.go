package cli

// starter deployment: the Worker Deployment the workers join (README, "Upgrading workers
// while sessions run"): which version is current, what still runs on each, making a version
// current, and whether an old build may be stopped.

import (
	"context"
	"flag"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tacp-dev/tacp/signals"
)

// exitDraining: `deployment drained` found pinned runs left on the version.
const exitDraining = 6

func cmdDeployment(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	name := fs.String("deployment", signals.DefaultDeploymentName, "the Worker Deployment (the workers' -deployment.name)")
	wait := fs.Duration("wait", 0, "drained: wait up to this long for the version to drain")
	if !e.parse(fs, args, false) {
		return exitError
	}
	rest := fs.Args()
	sub := "show"
	if len(rest) > 0 {
		sub, rest = rest[0], rest[1:]
	}
	need := map[string]int{"show": 0, "current": 1, "drained": 1}
	n, ok := need[sub]
	if !ok || len(rest) != n {
		fmt.Fprintln(e.err, Name+": usage: "+Name+" deployment [show | current BUILD_ID | drained BUILD_ID [--wait D]]")
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	switch sub {
	case "current":
		return e.setCurrent(ctx, *name, rest[0])
	case "drained":
		return e.drained(ctx, signals.DeploymentVersion(*name, rest[0]), *wait)
	}
	return e.showDeployment(ctx, *name)
}

// setCurrent makes build the deployment's current version: new sessions start on it and
// every session on another version moves to it at its next idle safe point.
func (e *env) setCurrent(ctx context.Context, deployment, build string) int {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	prev, err := e.c.SetCurrentVersion(sctx, deployment, build)
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(map[string]string{"current": signals.DeploymentVersion(deployment, build), "previous": prev})
		return exitOK
	}
	fmt.Fprintf(e.out, "current   %s (was %s)\nsessions on other versions move to it when idle; 'starter deployment drained BUILD_ID' says when an old build may stop\n",
		signals.DeploymentVersion(deployment, build), orDash(prev))
	return exitOK
}

// drained reports the pinned runs left on version; exitDraining while there are some.
func (e *env) drained(ctx context.Context, version string, wait time.Duration) int {
	deadline := time.Now().Add(wait)
	for {
		r, err := e.c.CountVersionRuns(ctx, version)
		if err != nil {
			return e.fail(err)
		}
		if r.Drained || !time.Now().Before(deadline) {
			if e.json {
				e.printJSON(r)
			} else if r.Drained {
				fmt.Fprintf(e.out, "%s is drained: no pinned run left, its workers may be stopped\n", version)
			} else {
				fmt.Fprintf(e.out, "%s is draining: %d pinned runs left (%d sessions, %d turns)\n", version, r.Pinned, r.Sessions, r.Pinned-r.Sessions)
			}
			if r.Drained {
				return exitOK
			}
			return exitDraining
		}
		select {
		case <-ctx.Done():
			return e.fail(ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// deploymentView is what `starter deployment` shows.
type deploymentView struct {
	Name     string                `json:"name"`
	Current  string                `json:"current,omitempty"`
	Ramping  string                `json:"ramping,omitempty"`
	Versions []signals.VersionRuns `json:"versions"`
}

func (e *env) showDeployment(ctx context.Context, name string) int {
	d, err := e.tc.WorkerDeploymentClient().GetHandle(name).Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	if err != nil {
		return e.fail(fmt.Errorf("describe deployment %s: %w", name, err))
	}
	view := deploymentView{Name: name}
	if v := d.Info.RoutingConfig.CurrentVersion; v != nil {
		view.Current = signals.DeploymentVersion(v.DeploymentName, v.BuildID)
	}
	if v := d.Info.RoutingConfig.RampingVersion; v != nil {
		view.Ramping = signals.DeploymentVersion(v.DeploymentName, v.BuildID)
	}
	for _, s := range d.Info.VersionSummaries {
		r, err := e.c.CountVersionRuns(ctx, signals.DeploymentVersion(s.Version.DeploymentName, s.Version.BuildID))
		if err != nil {
			return e.fail(err)
		}
		view.Versions = append(view.Versions, r)
	}
	if e.json {
		e.printJSON(view)
		return exitOK
	}
	fmt.Fprintf(e.out, "deployment %s\ncurrent    %s\n", name, orDash(view.Current))
	if view.Ramping != "" {
		fmt.Fprintf(e.out, "ramping    %s\n", view.Ramping)
	}
	for _, r := range view.Versions {
		state := "drained"
		if !r.Drained {
			state = fmt.Sprintf("%d pinned runs (%d sessions)", r.Pinned, r.Sessions)
		}
		mark := ""
		if r.Version == view.Current {
			mark = "  (current)"
		}
		fmt.Fprintf(e.out, "  %-40s %s%s\n", r.Version, state, mark)
	}
	return exitOK
}

package activities

// A fresh worker learns its agents before any turn: each profile's agent is started once in
// the background (initialize, then stopped; in its kernel sandbox when the profile has one), so that the first editor on a fresh cluster is
// told what the agent supports — images, MCP servers, how it authenticates — and does not
// create its sessions without them (agentinfo.go keeps what was learned; a turn's own
// initialize refreshes it).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

// probeGrace bounds an agent's exit after its probe's initialize.
const probeGrace = 2 * time.Second

// ProbeProfiles starts each profile's agent in turn in an empty folder under dir, asks it to
// initialize within the runner's start bound, records its answer, and stops it. One at a
// time, so that a worker's start does not start every agent at once. It returns the
// profiles whose agent did not answer, with why; a turn of such a profile fails with the
// same reason, so the worker logs it and goes on.
func (r *Runner) ProbeProfiles(ctx context.Context, dir string) map[string]error {
	r.defaults()
	failed := map[string]error{}
	for _, name := range r.Trust.Profiles.Names() {
		if ctx.Err() != nil {
			break
		}
		if err := r.probe(ctx, name, dir); err != nil {
			failed[name] = err
			r.Logger.Warn("agent profile did not answer initialize when the worker started: its turns will fail until it does", "profile", name, "error", err)
			continue
		}
		r.Logger.Info("learned the agent of a profile", "profile", name)
	}
	return failed
}

func (r *Runner) probe(ctx context.Context, name, dir string) error {
	pr, err := r.Trust.Profiles.Resolve(name)
	if err != nil {
		return err
	}
	env, err := pr.AgentEnv(os.Environ())
	if err != nil {
		return err
	}
	work := filepath.Join(dir, "probe-"+name)
	if err := os.MkdirAll(work, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(work)
	hc := &hostClient{log: r.Logger.With("profile", name), noTypedFailures: !pr.AsksTypedFailures()}
	if r.Host != nil {
		hc.nice = r.Host.AgentNice
	}
	if pr.OffersClientFS() {
		// Offered the same files a turn would offer, the agent answers as it will then.
		if hc.sandbox, err = NewSandbox(work); err != nil {
			return err
		}
	}
	argv := pr.Argv()
	if pr.Sandboxed() {
		// Confined as its turns' agents are: a probe is an agent start like any other.
		if r.Sandbox == nil {
			return fmt.Errorf("agent profile %q runs sandboxed, but this worker has no sandbox", name)
		}
		if argv, env, err = r.Sandbox.Command(pr.Settings, "probe-"+name, work, argv, env); err != nil {
			return fmt.Errorf("agent sandbox: %w", err)
		}
	}
	proc, err := startAgent(argv, env, work, hc, hc.log)
	if err != nil {
		return err
	}
	defer proc.stop(probeGrace)
	ictx, cancel := context.WithTimeout(ctx, r.InitTimeout)
	defer cancel()
	if err := proc.initialize(ictx); err != nil {
		select { // an agent that died says more by its exit than by the broken pipe
		case <-proc.exited:
			return proc.withPrinted(fmt.Errorf("%w before answering initialize", proc.exitErr()))
		case <-time.After(100 * time.Millisecond):
		}
		if ictx.Err() != nil {
			return proc.withPrinted(errors.New("agent did not answer initialize in time"))
		}
		return proc.withPrinted(err)
	}
	r.Trust.Profiles.Learn(name, proc.caps, env)
	r.probeOffer(ctx, name, pr, proc, work)
	return nil
}

// probeOffer opens one agent session in the probe's folder and records the agent's offer in
// it (modes, config options), put in the mode a new session's first turn puts it in, so
// that an editor's session/new is answered with a mode picker before any agent has run.
// An agent that will not open a session here (one a client must authenticate first) is
// left: its sessions' first turn records the offer instead.
func (r *Runner) probeOffer(ctx context.Context, name string, pr Profile, proc *agentProc, work string) {
	sctx, cancel := context.WithTimeout(ctx, r.InitTimeout)
	defer cancel()
	resp, err := proc.conn.NewSession(sctx, acp.NewSessionRequest{Cwd: work, McpServers: []acp.McpServer{}})
	if err != nil {
		r.Logger.Debug("probe: the agent opened no session; its offer is learned at its first turn", "profile", name, "error", err)
		return
	}
	o := offerOf(resp.Modes, resp.ConfigOptions, resp.Models)
	if table := pr.modeTable(proc.caps.AgentInfo); table != nil {
		if err := o.apply(sctx, proc.conn, resp.SessionId, governChoices(table, pr.sessionPolicy(""), signals.SessionChoices{})); err != nil {
			r.Logger.Debug("probe: the agent refused the asking mode; its offer is learned at its first turn", "profile", name, "error", err)
			return
		}
	}
	out := o.report(proc.caps)
	if table := pr.modeTable(proc.caps.AgentInfo); table != nil {
		out.AskMode, out.AskingModes = table.Ask, table.modes()
	}
	out.PolicyCeiling = pr.PolicyCeiling()
	r.Trust.Profiles.Offered(name, out)
}

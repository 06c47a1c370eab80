package cli

// starter approve, deny, forget and policy: answering permission requests and the session's
// permission level and remembered rules.

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
)

func cmdApprove(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	return e.answer(ctx, fs, args, "allow_once", "allow_always")
}

func cmdDeny(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	return e.answer(ctx, fs, args, "reject_once", "reject_always")
}

// answer sends permission_respond for REQUEST_ID with OPTION_ID, or with the request's first
// option of the preferred kinds.
func (e *env) answer(ctx context.Context, fs *flag.FlagSet, args []string, kinds ...string) int {
	as := fs.String("as", "", "who answers, as the journal records it (default: cli:USER@HOST)")
	if !e.parse(fs, args, true) {
		return exitError
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fmt.Fprintln(e.err, Name+": want REQUEST_ID [OPTION_ID]")
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	req := signals.PermissionRespondRequest{RequestID: fs.Arg(0), OptionID: fs.Arg(1), AnsweredBy: cliIdentity(*as)}
	if req.OptionID == "" {
		st, err := e.c.Status(ctx, e.session)
		if err != nil {
			return e.fail(err)
		}
	find:
		for _, p := range st.PendingPermissions {
			if p.RequestID != req.RequestID && !slices.Contains(p.Replaces, req.RequestID) {
				continue
			}
			for _, kind := range kinds {
				for _, o := range p.Options {
					if o.Kind == kind {
						req.OptionID = o.OptionID
						break find
					}
				}
			}
		}
		if req.OptionID == "" {
			req.Outcome = signals.OutcomeCancelled // no such option offered: answer cancelled
		}
	}
	res, err := e.c.PermissionRespond(ctx, e.session, req)
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(res)
	} else {
		r := res.Resolution
		fmt.Fprintf(e.out, "%s: %s %s (decided by %s", r.RequestID, r.Outcome, r.OptionID, r.DecidedBy)
		if r.Reason != "" {
			fmt.Fprintf(e.out, ": %s", r.Reason)
		}
		fmt.Fprintln(e.out, ")")
		if r.Via != "" {
			fmt.Fprintf(e.out, "%s was withdrawn when its turn restarted; it was asked again as %s, which this answered\n", r.Via, r.RequestID)
		}
	}
	return exitOK
}

func cmdForget(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	if !e.parse(fs, args, true) {
		return exitError
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(e.err, Name+": want TOOL (a key of status rules)")
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	res, err := e.c.PermissionForget(ctx, e.session, signals.PermissionForgetRequest{Tool: fs.Arg(0)})
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(res)
	} else {
		fmt.Fprintf(e.out, "forgotten: %t\n", res.Forgotten)
	}
	return exitOK
}

func cmdPolicy(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	as := fs.String("as", "", "who sets the policy, journaled in policy.changed (default: cli:USER@HOST)")
	if !e.parse(fs, args, true) {
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	if fs.NArg() == 0 {
		st, err := e.c.Status(ctx, e.session)
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			e.printJSON(map[string]any{"level": st.Policy, "rules": st.Rules})
		} else {
			fmt.Fprintf(e.out, "%s\nrules: %s\n", st.Policy, strings.Join(st.Rules, ", "))
		}
		return exitOK
	}
	res, err := e.c.SetPolicy(ctx, e.session, signals.SetPolicyRequest{Level: fs.Arg(0), By: cliIdentity(*as)})
	if rej, ok := rejection.As(err); ok && rej.Type == signals.RejectUnknownSession {
		fmt.Fprintf(e.err, Name+": session %s does not exist yet: a new session takes its policy from its first prompt, "+Name+" prompt --session %s --policy %s TEXT\n",
			e.session, e.session, fs.Arg(0))
		return exitRejected
	}
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(res)
	} else {
		fmt.Fprintln(e.out, res.Level)
	}
	return exitOK
}

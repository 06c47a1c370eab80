package cli

// starter profiles: the agent profiles the workers offer.

import (
	"context"
	"flag"
	"fmt"
	"time"
)

func cmdProfiles(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	if !e.parse(fs, args, false) {
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	qctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ps, err := e.c.Profiles(qctx)
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(ps)
		return exitOK
	}
	for _, p := range ps {
		mark := ""
		if p.Default {
			mark = " (default)"
		}
		fmt.Fprintf(e.out, "%-20s %s%s\n%-20s sandbox: %s\n", p.Name, p.Description, mark, "", p.Sandbox.Describe())
		if p.PolicyCeiling != "" {
			fmt.Fprintf(e.out, "%-20s policy: at most %s (allow_all forbidden by the worker's operator)\n", "", p.PolicyCeiling)
		}
	}
	return exitOK
}

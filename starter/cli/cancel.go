package cli

// starter cancel: cancel the running turn.

import (
	"context"
	"flag"
	"fmt"

	"github.com/tacp-dev/tacp/signals"
)

func cmdCancel(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	turn := fs.Int64("turn", 0, "the turn to cancel (default: the running one)")
	as := fs.String("as", "", "who cancels, as the journal records it (default: cli:USER@HOST)")
	if !e.parse(fs, args, true) {
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	res, err := e.c.Cancel(ctx, e.session, signals.CancelRequest{TurnID: *turn, By: cliIdentity(*as)})
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(res)
	} else {
		fmt.Fprintln(e.out, res.Outcome)
	}
	return exitOK
}

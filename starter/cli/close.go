package cli

// starter close: close the session.

import (
	"context"
	"flag"
	"fmt"

	"github.com/tacp-dev/tacp/signals"
)

func cmdClose(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	reason := fs.String("reason", "", "why the session is closed (journaled)")
	as := fs.String("as", "", "who closes, as the journal records it (default: cli:USER@HOST)")
	if !e.parse(fs, args, true) {
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	res, err := e.c.Close(ctx, e.session, signals.CloseRequest{Reason: *reason, By: cliIdentity(*as)})
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(res)
	} else {
		fmt.Fprintln(e.out, "closing")
	}
	return exitOK
}

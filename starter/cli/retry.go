package cli

// starter retry: end the wait of a turn the model provider limited; it runs again now.

import (
	"context"
	"flag"
	"fmt"

	"github.com/tacp-dev/tacp/signals"
)

func cmdRetry(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	turn := fs.Int64("turn", 0, "the limited turn (default: the one that waits)")
	as := fs.String("as", "", "who retries, as the journal records it (default: cli:USER@HOST)")
	if !e.parse(fs, args, true) {
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	res, err := e.c.RetryNow(ctx, e.session, signals.RetryNowRequest{TurnID: *turn, AnsweredBy: cliIdentity(*as)})
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(res)
	} else {
		fmt.Fprintf(e.out, "turn %d runs again now\n", res.TurnID)
	}
	return exitOK
}

package cli

// starter fork: a new session whose agent starts from this one's conversation.

import (
	"context"
	"flag"
	"fmt"

	"github.com/tacp-dev/tacp/signals"
)

// cmdFork forks the session; --workspace (a common flag) is the fork's workspace (default: a
// folder of its own: the origin's files are not copied).
func cmdFork(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	before := fs.Int64("before-turn", 0, "take the conversation before this turn (0: all of it)")
	id := fs.String("new", "", "the fork's session id (default: a new one)")
	owner := fs.String("owner", "", "the fork's owner: the person (a deck token's NAME) whose session it is; empty: nobody's, the team's")
	if !e.parse(fs, args, true) {
		return exitError
	}
	if err := signals.ValidateAccess(signals.Access{Owner: *owner}); err != nil {
		return e.fail(err)
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	cfg, err := e.c.Fork(ctx, e.session, signals.ForkRequest{SessionID: *id, BeforeTurn: *before, Workspace: e.workspace, Owner: *owner})
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(cfg)
		return exitOK
	}
	what := "all of its conversation"
	if *before > 0 {
		what = fmt.Sprintf("its conversation before turn %d", *before)
	}
	fmt.Fprintf(e.out, "forked %s into %s (%s)\nprompt it: starter prompt --session %s TEXT\n", e.session, cfg.SessionID, what, cfg.SessionID)
	return exitOK
}

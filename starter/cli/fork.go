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

// cmdRewind goes back to the end of a turn as a new session: a fork before the next turn, so
// its agent remembers the conversation up to that turn and its first turn starts with the
// files that turn left (workspace checkpoints). The session itself is untouched: nothing it
// acknowledged is lost, and the agent's memory never disagrees with its files.
func cmdRewind(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	to := fs.Int64("to-turn", 0, "the turn whose end to go back to (required)")
	id := fs.String("new", "", "the new session's id (default: a new one)")
	owner := fs.String("owner", "", "the new session's owner: the person (a deck token's NAME) whose session it is; empty: nobody's, the team's")
	if !e.parse(fs, args, true) {
		return exitError
	}
	if *to <= 0 {
		return e.fail(signals.Reject(signals.RejectInvalidRequest, "--to-turn N is required: the turn whose end to go back to"))
	}
	if err := signals.ValidateAccess(signals.Access{Owner: *owner}); err != nil {
		return e.fail(err)
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	cfg, err := e.c.Rewind(ctx, e.session, *to, signals.ForkRequest{SessionID: *id, Workspace: e.workspace, Owner: *owner})
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(cfg)
		return exitOK
	}
	fmt.Fprintf(e.out, "rewound %s to the end of turn %d as %s (its conversation to turn %d; its files as turn %d left them, at its first turn)\nprompt it: %s prompt --session %s TEXT\n",
		e.session, *to, cfg.SessionID, *to, *to, Name, cfg.SessionID)
	return exitOK
}

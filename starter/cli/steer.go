package cli

// starter steer: steer the running turn, on a given token or on whatever runs
// (tacpclient.Client.SteerLive).

import (
	"context"
	"flag"
	"fmt"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

func cmdSteer(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	expect := fs.String("expect", "", "the steer token you expect to be live, refused when stale (default: whatever turn runs, following a token another steer moved)")
	id := fs.String("id", "", "client_msg_id (default: a new id)")
	as := fs.String("as", "", "who steers, as the journal records it (default: cli:USER@HOST)")
	if !e.parse(fs, args, true) {
		return exitError
	}
	text, err := e.textAndConnect(ctx, fs)
	if err != nil {
		return e.fail(err)
	}
	var res signals.SteerResult
	if *expect == "" {
		res, err = e.c.SteerLive(ctx, e.session, text, tacpclient.SteerLiveOptions{ClientMsgID: *id, By: cliIdentity(*as)})
	} else {
		if *id == "" {
			*id = signals.NewID()
		}
		res, err = e.c.Steer(ctx, e.session, signals.SteerRequest{Text: text, ExpectedTurnID: *expect, ClientMsgID: *id, By: cliIdentity(*as)})
	}
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(res)
	} else {
		fmt.Fprintf(e.out, "%s: turn %d steer %d; next token %s\n", res.Outcome, res.Ref.TurnID, res.Ref.Offset, res.NextExpectedTurnID)
	}
	return exitOK
}

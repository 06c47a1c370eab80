package cli

// starter tail and starter replay: the session's journal, as events or as a transcript.

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/tacp-dev/tacp/internal/transcript"
	"github.com/tacp-dev/tacp/signals"
)

func cmdTail(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	after := fs.Int64("after", 0, "print events after this seq")
	follow := fs.Bool("follow", false, "keep printing new events until interrupted")
	if !e.parse(fs, args, true) {
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	print := func(ev signals.Event) {
		if e.json {
			e.printJSON(ev)
		} else {
			fmt.Fprintf(e.out, "%6d %s turn=%d %s\n", ev.Seq, ev.Kind, ev.TurnID, transcript.Compact(ev.Data))
		}
	}
	if *follow {
		err := e.c.Watch(ctx, e.session, *after, func(ev signals.Event) bool { print(ev); return true })
		if err != nil && !errors.Is(err, context.Canceled) {
			return e.fail(err)
		}
		return exitOK
	}
	err := transcript.Page(ctx, e.c, e.session, *after, func(after, first int64) {
		if !e.json {
			fmt.Fprintf(e.err, "(events %d..%d were trimmed by retention)\n", after+1, first-1)
		}
	}, print)
	if err != nil {
		return e.fail(err)
	}
	return exitOK
}

func cmdReplay(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	if !e.parse(fs, args, true) {
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	return e.replay(ctx)
}

// replay prints the whole retained journal as a transcript.
func (e *env) replay(ctx context.Context) int {
	r := transcript.NewRenderer(e.out, e.out)
	err := transcript.Page(ctx, e.c, e.session, 0, func(_, first int64) {
		fmt.Fprintf(e.out, "[older events trimmed: journal starts at %d]\n", first)
	}, e.show(r))
	if err != nil {
		return e.fail(err)
	}
	r.Flush()
	return exitOK
}

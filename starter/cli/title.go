package cli

// starter title: show or set the session's title (the set_title update, sent through
// tacpclient.Call: no client method of its own is needed for an update).

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

func cmdTitle(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	remove := fs.Bool("clear", false, "remove the session's title")
	as := fs.String("as", "", "who sets the title, as the journal records it (default: cli:USER@HOST)")
	if !e.parse(fs, args, true) {
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	if fs.NArg() == 0 && !*remove {
		st, err := e.c.Status(ctx, e.session)
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			e.printJSON(map[string]string{"title": st.Title})
		} else {
			fmt.Fprintln(e.out, st.Title)
		}
		return exitOK
	}
	title := strings.Join(fs.Args(), " ")
	if *remove && title != "" {
		fmt.Fprintln(e.err, Name+": title: --clear takes no TEXT")
		return exitError
	}
	if !*remove && strings.TrimSpace(title) == "" {
		fmt.Fprintln(e.err, Name+": title: TEXT is empty (--clear removes the title)")
		return exitError
	}
	res, err := tacpclient.Call(ctx, e.c, e.session, signals.Updates.SetTitle, signals.SetTitleRequest{Title: title, By: cliIdentity(*as)})
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(res)
	} else if res.Title == "" {
		fmt.Fprintln(e.out, "title removed")
	} else {
		fmt.Fprintln(e.out, res.Title)
	}
	return exitOK
}

package main

// starter list: sessions, from visibility.

import (
	"context"
	"flag"
	"fmt"
	"sort"

	"github.com/tacp-dev/tacp/signals"
)

func cmdList(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	awaiting := fs.Bool("awaiting-approval", false, "only sessions where a permission request waits for a person")
	if !e.parse(fs, args, false) {
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	var list []signals.SessionInfo
	var err error
	if *awaiting { // a visibility query: TacpAwaitingApproval = true
		list, err = e.c.ListAwaitingApproval(ctx, 0)
	} else {
		list, err = e.c.List(ctx, 0)
	}
	if err != nil {
		return e.fail(err)
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].StartedAt.After(list[j].StartedAt) })
	for _, s := range list {
		if e.json {
			e.printJSON(s)
		} else {
			last := "-"
			if !s.LastActivity.IsZero() {
				last = s.LastActivity.Local().Format("2006-01-02 15:04:05")
			}
			fmt.Fprintf(e.out, "%-32s %-10s turn %-4d last %-10s %-19s %s%s\n", s.SessionID, orDash(s.State), s.Turn, orDash(s.LastOutcome), last, orDash(s.Agent), awaitingNote(s.AwaitingApproval))
			if s.Ended != "" {
				fmt.Fprintf(e.out, "%-32s %s\n", "", s.Ended)
			}
		}
	}
	return exitOK
}

func awaitingNote(awaiting bool) string {
	if awaiting {
		return "  (awaiting approval)"
	}
	return ""
}

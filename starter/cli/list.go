package cli

// starter list: sessions, from visibility.

import (
	"context"
	"flag"
	"fmt"
	"sort"

	"github.com/tacp-dev/tacp/tacpclient"
)

func cmdList(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	awaiting := fs.Bool("awaiting-approval", false, "only sessions where a permission request waits for a person")
	version := fs.String("version", "", "only running sessions on this Worker Deployment version (DEPLOYMENT:BUILD_ID, as listed)")
	if !e.parse(fs, args, false) {
		return exitError
	}
	if *awaiting && *version != "" {
		fmt.Fprintln(e.err, Name+": --awaiting-approval and --version do not combine")
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	var list []tacpclient.SessionInfo
	var err error
	switch {
	case *awaiting: // a visibility query: TacpAwaitingApproval = true
		list, err = e.c.ListAwaitingApproval(ctx, 0)
	case *version != "":
		list, err = e.c.ListOnVersion(ctx, *version, 0)
	default:
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
			fmt.Fprintf(e.out, "%-32s %-10s turn %-4d last %-10s %-19s %-12s %s%s%s\n", s.SessionID, orDash(s.State), s.Turn, orDash(s.LastOutcome), last, orDash(s.Agent), orDash(s.Version), awaitingNote(s.AwaitingApproval), ownerNote(s.Owner))
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

func ownerNote(owner string) string {
	if owner == "" {
		return ""
	}
	return "  owner " + owner
}

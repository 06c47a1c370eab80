package cli

// starter diff and starter export: a session's workspace checkpoints, read straight from the
// checkpoint store the workers push to (checkpoint.Reader), with this user's git
// credentials. Neither talks to Temporal.

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/tacp-dev/tacp/checkpoint"
	"github.com/tacp-dev/tacp/codec"
	"github.com/tacp-dev/tacp/internal/datadir"
)

// checkpointStoreFlag adds --checkpoint-store; its environment fallback,
// TACP_CHECKPOINT_STORE, is the workers' -checkpoint.store's too.
func checkpointStoreFlag(fs *flag.FlagSet) *string {
	return fs.String("checkpoint-store", "", "the checkpoint store, as the workers' -checkpoint.store names it (default: the bare repository in this machine's tacp data dir)")
}

func checkpointReader(store string) (checkpoint.Reader, error) {
	if store == "" || store == checkpoint.StoreOff {
		store = checkpoint.DefaultStoreURL(datadir.Default())
	}
	keys, err := codec.KeysFromEnv()
	return checkpoint.Reader{URL: checkpoint.NormalizeStoreURL(store), Keys: keys}, err
}

func cmdDiff(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	store := checkpointStoreFlag(fs)
	turn := fs.Int64("turn", 0, "the turn whose changes to show (default: the last checkpointed turn)")
	stat := fs.Bool("stat", false, "show a diffstat instead of the diff")
	if !e.parse(fs, args, true) {
		return exitError
	}
	rd, err := checkpointReader(*store)
	if err != nil {
		return e.fail(err)
	}
	out, err := rd.Diff(ctx, e.session, *turn, *stat)
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(map[string]any{"session": e.session, "turn": *turn, "diff": out})
	} else if out != "" {
		fmt.Fprintln(e.out, out)
	}
	return exitOK
}

func cmdExport(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	store := checkpointStoreFlag(fs)
	turn := fs.Int64("turn", 0, "export up to this turn's checkpoint (default: the last)")
	branch := fs.String("branch", "", "the branch to create (it must not exist)")
	repo := fs.String("repo", ".", "the git repository to create it in")
	if !e.parse(fs, args, true) {
		return exitError
	}
	if *branch == "" {
		fmt.Fprintf(e.err, "%s export: --branch is required\n", Name)
		return exitError
	}
	rd, err := checkpointReader(*store)
	if err != nil {
		return e.fail(err)
	}
	id, err := rd.Export(ctx, e.session, *turn, *branch, *repo)
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(map[string]any{"branch": *branch, "commit": id})
	} else {
		fmt.Fprintf(e.out, "branch %s at %s: one commit a turn of session %s\n", *branch, id, e.session)
	}
	return exitOK
}

// cmdCheckpoints lists the sessions the checkpoint store holds, or with prune removes the
// checkpoints of those Temporal no longer runs whose last checkpoint is older than
// --older-than: the store's retention.
func cmdCheckpoints(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	store := checkpointStoreFlag(fs)
	olderThan := fs.Duration("older-than", 30*24*time.Hour, "prune: only sessions whose last checkpoint is older than this")
	dryRun := fs.Bool("dry-run", false, "prune: say what would be removed, remove nothing")
	if !e.parse(fs, args, false) {
		return exitError
	}
	prune := false
	switch rest := fs.Args(); {
	case len(rest) == 0:
	case len(rest) == 1 && rest[0] == "prune":
		prune = true
	default:
		fmt.Fprintf(e.err, "%s checkpoints: want no argument or prune, got %q\n", Name, strings.Join(rest, " "))
		return exitError
	}
	if *olderThan < 0 {
		fmt.Fprintf(e.err, "%s checkpoints: --older-than %v is negative\n", Name, *olderThan)
		return exitError
	}
	rd, err := checkpointReader(*store)
	if err != nil {
		return e.fail(err)
	}
	stored, err := rd.Sessions(ctx)
	if err != nil {
		return e.fail(err)
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	// Sessions Temporal runs keep their checkpoints, however old: their next turn may need
	// them on another worker. A list that cannot be read prunes nothing.
	running, err := e.c.ListWhere(ctx, "ExecutionStatus = 'Running'", 1<<20)
	if err != nil {
		return e.fail(err)
	}
	open := map[string]bool{}
	for _, s := range running {
		open[s.SessionID] = true
	}
	cutoff := time.Now().Add(-*olderThan)
	var pruned []string
	for _, s := range stored {
		state := "closed"
		switch {
		case open[s.ID]:
			state = "running"
		case prune && s.Last.Before(cutoff):
			state = "pruned"
			if *dryRun {
				state = "would prune"
			}
			pruned = append(pruned, s.ID)
		}
		if e.json {
			e.printJSON(map[string]any{"session": s.ID, "last_checkpoint": s.Last, "state": state})
		} else {
			fmt.Fprintf(e.out, "%-32s last checkpoint %s  %s\n", s.ID, s.Last.Local().Format("2006-01-02 15:04:05"), state)
		}
	}
	if prune && !*dryRun {
		if err := rd.Delete(ctx, pruned...); err != nil {
			return e.fail(err)
		}
	}
	return exitOK
}

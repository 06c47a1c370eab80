package cli

// starter prompt: send a prompt (creating the session if needed) and follow its turn.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/tacp-dev/tacp/internal/transcript"
	"github.com/tacp-dev/tacp/signals"
)

func cmdPrompt(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	policy := fs.String("policy", "", "permission level of a new session: allow_all, ask_for_risky (the default) or ask_always (an existing session keeps its own: starter policy)")
	noWait := fs.Bool("no-wait", false, "return once the prompt is queued; the turn runs unwatched (its events journaled every few seconds, the cheapest way to stream)")
	id := fs.String("id", "", "client_message_id (default: a new id; repeat one to retry safely)")
	as := fs.String("as", "", "who prompts, as the journal records it (default: cli:USER@HOST)")
	access := accessFlags(fs)
	if !e.parse(fs, args, true) {
		return exitError
	}
	acc, err := access()
	if err != nil {
		return e.fail(err)
	}
	text, err := e.textAndConnect(ctx, fs)
	if err != nil {
		return e.fail(err)
	}
	// Where to watch from: the journal's end before the prompt, when the session runs. A
	// session whose workflow was terminated (or failed) is started again by the prompt as a
	// new session under its id, whose journal begins at seq 1.
	var after int64
	if st, err := e.c.Status(ctx, e.session); err == nil {
		if st.Ended == "" {
			after = st.Journal.LastSeq
		} else if !e.json {
			fmt.Fprintf(e.err, "session %s %s: this prompt starts a new session under its id\n", e.session, st.Ended)
		}
	}
	cfg := signals.SessionConfig{SessionID: e.session, Agent: e.agent, Workspace: e.workspace, Policy: *policy, Access: acc}
	res, err := e.c.Prompt(ctx, cfg, signals.PromptRequest{Text: text, ClientMessageID: *id, Unwatched: *noWait, By: cliIdentity(*as)})
	if err != nil {
		return e.fail(err)
	}
	if *noWait {
		if e.json {
			e.printJSON(res)
		} else {
			fmt.Fprintf(e.out, "turn %d queued at position %d%s\n", res.TurnID, res.Position, dupNote(res.Duplicate))
		}
		return exitOK
	}
	if res.Duplicate {
		after = 0
	}
	if !e.json {
		fmt.Fprintf(e.err, "turn %d (position %d)%s\n", res.TurnID, res.Position, dupNote(res.Duplicate))
	}
	return e.follow(ctx, after, res.TurnID)
}

func dupNote(dup bool) string {
	if dup {
		return ", a duplicate of an earlier prompt"
	}
	return ""
}

// follow prints the events of turnID after seq until the turn's terminal event, and
// returns the exit code of its stop reason.
func (e *env) follow(ctx context.Context, after, turnID int64) int {
	r := transcript.NewRenderer(e.out, e.err)
	last, err := transcript.FollowTurn(ctx, e.c, e.session, after, turnID, e.show(r))
	if err != nil {
		return e.fail(err)
	}
	switch last.Kind {
	case signals.EventTurnEnded:
		var d signals.TurnEndedData
		_ = json.Unmarshal(last.Data, &d)
		return stopCode(d.StopReason)
	case signals.EventTurnFailed:
		return exitFailed
	}
	return exitError
}

func stopCode(reason string) int {
	switch reason {
	case "end_turn":
		return exitOK
	case "cancelled":
		return exitCancelled
	default:
		return exitStopped
	}
}

package cli

// starter status: the session's state, turn, token, queue and open requests; with
// --actions, what the session has cost in Temporal Cloud's billable actions, from its
// history.

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

func cmdStatus(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	actions := fs.Bool("actions", false, "count the session's billable actions on Temporal Cloud from its history, over every run it still keeps")
	price := fs.Float64("price", 50, "with --actions: the price of a million actions in dollars, for the cost line (Temporal Cloud's list price, first tier: 50)")
	if !e.parse(fs, args, true) {
		return exitError
	}
	if *price < 0 {
		fmt.Fprintf(e.err, "%s status: --price %v is negative\n", Name, *price)
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	if *actions {
		return printActions(ctx, e, *price)
	}
	st, err := e.c.Status(ctx, e.session)
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(st)
		return exitOK
	}
	fmt.Fprintf(e.out, "session   %s\nstate     %s\nturn      %d\ntoken     %s\nqueue     %d\njournal   %d..%d\nrun       %d (history %d events)\nagent     %s\n",
		st.SessionID, st.State, st.TurnID, orDash(st.SteerToken), len(st.Queue), st.Journal.FirstSeq, st.Journal.LastSeq, st.Run, st.HistoryLength, orDash(st.Agent))
	if st.Ended != "" {
		fmt.Fprintf(e.out, "ended     %s (the next prompt starts a new session under this id)\n", st.Ended)
	}
	if st.Title != "" {
		fmt.Fprintf(e.out, "title     %s\n", st.Title)
	}
	fmt.Fprintf(e.out, "owner     %s\n", ownerLine(st.Access))
	fmt.Fprintf(e.out, "policy    %s\n", policyLine(st))
	if st.BuildID != "" {
		fmt.Fprintf(e.out, "build     %s (pinned: the run stays on it; it moves at its next idle safe point when another build becomes current)\n", st.BuildID)
	}
	if l := st.WaitingLimit; l != nil {
		fmt.Fprintf(e.out, "limited   turn %d attempt %d (%s): %s\n          waiting until %s; starter retry --session %s runs it now\n",
			l.TurnID, l.Attempt, l.Reason, orDash(l.Message), l.RetryAt.UTC().Format("2006-01-02 15:04:05 UTC"), st.SessionID)
	}
	if w := st.WaitingWorker; w != nil {
		fmt.Fprintf(e.out, "waiting   turn %d for a worker with room since %s (every worker runs its -turns.max, or none polls)\n",
			w.TurnID, w.Since.Local().Format("15:04:05"))
	}
	for _, p := range st.PendingPermissions {
		opts := make([]string, len(p.Options))
		for i, o := range p.Options {
			opts[i] = fmt.Sprintf("%s (%s)", o.OptionID, o.Kind)
		}
		fmt.Fprintf(e.out, "waiting   %s: %s [%s] turn %d, until %s; options %s\n",
			p.RequestID, orDash(p.Title), orDash(p.Kind), p.TurnID, p.Deadline.Local().Format("15:04:05"), strings.Join(opts, ", "))
		if len(p.Replaces) > 0 {
			fmt.Fprintf(e.out, "          asks again what %s asked before a restart\n", strings.Join(p.Replaces, ", "))
		}
	}
	for _, q := range st.PendingElicitations {
		fmt.Fprintf(e.out, "question  %s: %s (%s) turn %d, until %s\n", q.RequestID, q.Message, q.Mode, q.TurnID, q.Deadline.Local().Format("15:04:05"))
		if q.URL != "" {
			fmt.Fprintf(e.out, "          open %s\n", q.URL)
		}
		for _, f := range formFields(q.Schema) {
			fmt.Fprintf(e.out, "          --field %s\n", f)
		}
	}
	if len(st.PendingElicitations) > 0 {
		fmt.Fprintf(e.out, "answer    starter answer --session %s REQUEST_ID --field NAME=VALUE | --decline | --cancel\n", st.SessionID)
	}
	if len(st.PendingPermissions) > 0 {
		fmt.Fprintf(e.out, "answer    starter approve|deny --session %s REQUEST_ID [OPTION_ID]\n", st.SessionID)
	}
	// The session's status holds nothing of the worker that answers it: the profiles come
	// from the profiles workflow, best effort (no worker: no line).
	profiles := st.Profiles
	if len(profiles) == 0 {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		profiles, _ = e.c.Profiles(pctx)
		cancel()
	}
	if len(profiles) > 0 {
		names := make([]string, len(profiles))
		for i, p := range profiles {
			names[i] = p.Name
		}
		fmt.Fprintf(e.out, "profiles  %s\n", strings.Join(names, ", "))
		for _, p := range profiles {
			if p.Name == st.Agent || (st.Agent == "" || st.Agent == "default") && p.Default {
				fmt.Fprintf(e.out, "sandbox   %s (profile %s)\n", p.Sandbox.Describe(), p.Name)
				break
			}
		}
	}
	return exitOK
}

// policyLine is the session's policy, what it lets the agent decide and its ceiling.
func policyLine(st signals.Status) string {
	line := st.Policy
	if line == "" {
		line = signals.PolicyAskForRisky
	}
	if a := st.AgentSettings; a != nil {
		if a.CurrentModeID != "" {
			line += " · agent mode " + a.CurrentModeID
		}
		if len(a.AskingModes) > 0 && st.Policy != signals.PolicyAllowAll {
			line += " (modes that ask: " + strings.Join(a.AskingModes, ", ") + ")"
		}
		if a.PolicyCeiling != "" {
			line += " · at most " + a.PolicyCeiling + ": the worker's operator forbids allow_all for this agent"
		}
	}
	return line
}

// printActions prints what session e.session has cost in billable actions, and in dollars at
// price per million actions.
func printActions(ctx context.Context, e *env, price float64) int {
	a, err := e.c.Actions(ctx, e.session)
	if err != nil {
		return e.fail(err)
	}
	cost := float64(a.Total) * price / 1e6
	if e.json {
		e.printJSON(struct {
			tacpclient.Actions
			Price float64 `json:"price_per_million"`
			Cost  float64 `json:"cost"`
		}{a, price, cost})
		return exitOK
	}
	runs := fmt.Sprintf("%d", a.Runs)
	if a.EarlierRunsGone {
		runs += " (earlier runs are past the namespace's retention: not counted)"
	}
	fmt.Fprintf(e.out, "session       %s\nruns          %s\nhistory       %d events\nactions       %d\n  starts      %d\n  signals     %d\n",
		a.SessionID, runs, a.HistoryEvents, a.Total, a.Starts, a.Signals)
	for _, n := range a.SignalNames() {
		fmt.Fprintf(e.out, "    %-18s%d\n", n, a.SignalsByName[n])
	}
	fmt.Fprintf(e.out, "  updates     %d\n  timers      %d\n  activities  %d\n  other       %d (search attributes, side effects, local activities)\n",
		a.Updates, a.Timers, a.Activities, a.Other)
	fmt.Fprintf(e.out, "cost          $%.6f at $%g per million actions (--price)\n", cost, price)
	fmt.Fprintln(e.out, "not counted: queries and activity heartbeats (billed, but written in no history)")
	return exitOK
}

// ownerLine says whose a session is and whom it is shared with.
func ownerLine(a signals.Access) string {
	line := "nobody (the team's)"
	if a.Owner != "" {
		line = a.Owner
	}
	line += ", sharing " + cmp.Or(a.Sharing, "the deck's rule")
	if len(a.SharedWith) > 0 {
		var with []string
		for _, s := range a.SharedWith {
			with = append(with, s.String())
		}
		line += ", shared with " + strings.Join(with, " ")
	}
	return line
}

// Command starter is tacp's command-line client: it sends prompts, steers and cancels to
// sessions, shows their status and journal, and runs the self-contained demo.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tacp-dev/tacp/internal/dial"
	"github.com/tacp-dev/tacp/internal/flagenv"
	"github.com/tacp-dev/tacp/internal/selfagent"
	"github.com/tacp-dev/tacp/signals"
)

// Exit codes.
const (
	exitOK        = 0
	exitError     = 1
	exitRejected  = 2 // the session refused the request (the rejection is printed)
	exitCancelled = 3 // the turn ended cancelled
	exitFailed    = 4 // the turn failed
	exitStopped   = 5 // the turn ended with another stop reason (max_tokens, refusal, ...)
)

type command struct {
	name, args, help string
	run              func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int
}

var commands = []command{
	{"prompt", "[--no-wait] TEXT...", "send a prompt (creating the session if needed) and stream the reply; TEXT '-' reads stdin", cmdPrompt},
	{"steer", "[--expect TOKEN] TEXT...", "steer the running turn (compare-and-swap on --expect's token; without it, whatever turn runs: see README)", cmdSteer},
	{"cancel", "[--turn N]", "cancel the running turn", cmdCancel},
	{"approve", "REQUEST_ID [OPTION_ID]", "answer a permission request with an allow option (default: the first allow_once)", cmdApprove},
	{"deny", "REQUEST_ID [OPTION_ID]", "answer a permission request with a reject option (default: the first reject_once)", cmdDeny},
	{"forget", "TOOL", "forget a remembered tool (a key of status rules)", cmdForget},
	{"policy", "[LEVEL]", "show or set the permission level: allow_all, ask_for_risky, ask_always", cmdPolicy},
	{"mode", "[MODE_ID]", "show the agent's modes or set the session's (re-applied to every new agent process)", cmdMode},
	{"config", "[ID VALUE]", "show the agent's config options (model, effort, ...) or set one for the session", cmdConfig},
	{"status", "", "show the session's status", cmdStatus},
	{"tail", "[--after SEQ] [--follow]", "print journal events after SEQ", cmdTail},
	{"replay", "", "print the session's transcript from the journal", cmdReplay},
	{"list", "[--awaiting-approval]", "list sessions (from visibility)", cmdList},
	{"profiles", "", "list the agent profiles the workers offer (what --agent may name)", cmdProfiles},
	{"close", "[--reason TEXT]", "close the session (cancels its turn, drops its queue)", cmdClose},
	{"demo", "[--exit]", "start the embedded server, a worker and a session, and show tacp at work", cmdDemo},
	{"setup", "", "register tacp's search attributes on the cluster's namespace", cmdSetup},
	{"acp", "[--session ID] [--observe] | --remote URL --token T", "speak ACP on stdio as the agent of an editor: durable, shared tacp sessions (--remote: through a deck's /acp, no Temporal credentials)", cmdACP},
	{"codec-server", "[--listen ADDR] [--token T]", "serve /encode and /decode of the payload codec for the Temporal UI", cmdCodecServer},
	{"web", "[--listen ADDR] [--token T] [--observer-token T]", "serve the deck: watch, approve, steer and cancel sessions from a browser", cmdWeb},
}

func main() {
	selfagent.MaybeRun()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: starter COMMAND [flags] [args]\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.help)
	}
	fmt.Fprintln(w, "\nCommon flags: --session ID, --json, --address HOST:PORT, --namespace NS, --task-queue Q.\nRun 'starter COMMAND -h' for a command's flags. Every flag falls back to TACP_<NAME>.")
}

// env is what every command shares: the connection flags and output.
type env struct {
	session   string
	json      bool
	address   string
	namespace string
	queue     string
	agent     string
	workspace string
	// safetyPoll is how long a command that follows a session (prompt, tail --follow, acp,
	// web) goes without an events query while the session's history wakes nothing.
	safetyPoll time.Duration
	out, err   io.Writer

	tc client.Client
	c  *signals.Client
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return exitOK
	}
	var cmd *command
	for i := range commands {
		if commands[i].name == args[0] {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "starter: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitError
	}
	e := &env{out: stdout, err: stderr}
	fs := flag.NewFlagSet("starter "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: starter %s [flags] %s\n\n%s\n\n", cmd.name, cmd.args, cmd.help)
		fs.PrintDefaults()
	}
	fs.StringVar(&e.session, "session", "", "session id")
	fs.BoolVar(&e.json, "json", false, "print JSON (one object, or one event per line)")
	fs.StringVar(&e.address, "address", "", "Temporal frontend host:port (default: TEMPORAL_ADDRESS or localhost:7233)")
	fs.StringVar(&e.namespace, "namespace", "", "Temporal namespace (default: TEMPORAL_NAMESPACE or default)")
	fs.StringVar(&e.queue, "task-queue", signals.DefaultTaskQueue, "task queue of new sessions")
	fs.StringVar(&e.agent, "agent", "", "agent profile of a new session, a name the worker offers ('starter profiles'; default: the worker's default)")
	fs.StringVar(&e.workspace, "workspace", "", "workspace of a new session, inside the worker's workspace roots (default: the session's own folder; relative: in the first root)")
	fs.DurationVar(&e.safetyPoll, "safety-poll", signals.DefaultSafetyPoll, "a followed session's events are queried when its history grows, and at least this often")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer func() {
		if e.tc != nil {
			e.tc.Close()
		}
	}()
	return cmd.run(ctx, e, fs, args[1:])
}

// parse parses the command's flags; it returns false (after printing why) when the command
// should stop with exitError.
func (e *env) parse(fs *flag.FlagSet, args []string, needSession bool) bool {
	if err := flagenv.Parse(fs, args); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(e.err, "starter:", err)
		}
		return false
	}
	if needSession {
		if e.session == "" {
			fmt.Fprintln(e.err, "starter: --session is required")
			return false
		}
		if err := signals.ValidateSessionID(e.session); err != nil {
			fmt.Fprintln(e.err, "starter:", err)
			return false
		}
	}
	return true
}

// connect dials Temporal once.
func (e *env) connect(ctx context.Context) error {
	if e.c != nil {
		return nil
	}
	tc, err := dial.Client(ctx, e.address, e.namespace, nil)
	if err != nil {
		return err
	}
	e.tc, e.c = tc, e.client(tc)
	return nil
}

// client is the session client of this command over tc.
func (e *env) client(tc client.Client) *signals.Client {
	c := signals.NewClient(tc, e.queue)
	c.SafetyPoll = e.safetyPoll
	return c
}

// fail prints err and returns the exit code it deserves.
func (e *env) fail(err error) int {
	if rej, ok := signals.AsRejection(err); ok {
		if e.json {
			e.printJSON(map[string]any{"rejected": rej.Type, "message": rej.Message, "details": rej.Details})
		} else {
			fmt.Fprintf(e.err, "rejected: %s\n", rej.Error())
			if d, ok := rej.Details.(signals.StaleTurnDetails); ok {
				fmt.Fprintf(e.err, "  expected %s, actual %s\n", d.Expected, d.Actual)
			}
		}
		return exitRejected
	}
	fmt.Fprintln(e.err, "starter:", err)
	return exitError
}

func (e *env) printJSON(v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintln(e.out, string(b))
}

func textArg(args []string, stdin io.Reader) (string, error) {
	if len(args) == 1 && args[0] == "-" {
		b, err := io.ReadAll(io.LimitReader(stdin, signals.MaxTextBytes+1))
		return string(b), err
	}
	return strings.Join(args, " "), nil
}

func cmdPrompt(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	policy := fs.String("policy", "", "permission level of a new session: allow_all, ask_for_risky (the default) or ask_always (an existing session keeps its own: starter policy)")
	noWait := fs.Bool("no-wait", false, "return once the prompt is queued")
	id := fs.String("id", "", "client_message_id (default: a new id; repeat one to retry safely)")
	if !e.parse(fs, args, true) {
		return exitError
	}
	text, err := textArg(fs.Args(), os.Stdin)
	if err != nil {
		return e.fail(err)
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	// Where to watch from: the journal's end before the prompt, when the session exists.
	var after int64
	if st, err := e.c.Status(ctx, e.session); err == nil {
		after = st.Journal.LastSeq
	}
	cfg := signals.SessionConfig{SessionID: e.session, Agent: e.agent, Workspace: e.workspace, Policy: *policy}
	res, err := e.c.Prompt(ctx, cfg, signals.PromptRequest{Text: text, ClientMessageID: *id})
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
	code := exitError
	r := newRenderer(e.out, e.err)
	err := e.c.Watch(ctx, e.session, after, func(ev signals.Event) bool {
		if ev.TurnID != turnID {
			return true
		}
		if e.json {
			e.printJSON(ev)
		} else {
			r.render(ev)
		}
		switch ev.Kind {
		case signals.EventTurnEnded:
			var d signals.TurnEndedData
			_ = json.Unmarshal(ev.Data, &d)
			code = stopCode(d.StopReason)
			return false
		case signals.EventTurnFailed:
			code = exitFailed
			return false
		}
		return true
	})
	if err != nil {
		return e.fail(err)
	}
	return code
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

func cmdSteer(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	expect := fs.String("expect", "", "the steer token you expect to be live, refused when stale (default: whatever turn runs, following a token another steer moved)")
	id := fs.String("id", "", "client_msg_id (default: a new id)")
	if !e.parse(fs, args, true) {
		return exitError
	}
	text, err := textArg(fs.Args(), os.Stdin)
	if err != nil {
		return e.fail(err)
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	var res signals.SteerResult
	if *expect == "" {
		res, err = e.c.SteerLive(ctx, e.session, text, signals.SteerLiveOptions{ClientMsgID: *id})
	} else {
		if *id == "" {
			*id = signals.NewID()
		}
		res, err = e.c.Steer(ctx, e.session, signals.SteerRequest{Text: text, ExpectedTurnID: *expect, ClientMsgID: *id})
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

func cmdCancel(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	turn := fs.Int64("turn", 0, "the turn to cancel (default: the running one)")
	if !e.parse(fs, args, true) {
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	res, err := e.c.Cancel(ctx, e.session, signals.CancelRequest{TurnID: *turn})
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(res)
	} else {
		fmt.Fprintln(e.out, res.Outcome)
	}
	return exitOK
}

func cmdClose(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	reason := fs.String("reason", "", "why the session is closed (journaled)")
	if !e.parse(fs, args, true) {
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	res, err := e.c.Close(ctx, e.session, signals.CloseRequest{Reason: *reason})
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(res)
	} else {
		fmt.Fprintln(e.out, "closing")
	}
	return exitOK
}

func cmdStatus(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	if !e.parse(fs, args, true) {
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
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
	if len(st.PendingPermissions) > 0 {
		fmt.Fprintf(e.out, "answer    starter approve|deny --session %s REQUEST_ID [OPTION_ID]\n", st.SessionID)
	}
	if len(st.Profiles) > 0 {
		names := make([]string, len(st.Profiles))
		for i, p := range st.Profiles {
			names[i] = p.Name
		}
		fmt.Fprintf(e.out, "profiles  %s\n", strings.Join(names, ", "))
	}
	return exitOK
}

func cmdProfiles(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	if !e.parse(fs, args, false) {
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	qctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ps, err := e.c.Profiles(qctx)
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(ps)
		return exitOK
	}
	for _, p := range ps {
		mark := ""
		if p.Default {
			mark = " (default)"
		}
		fmt.Fprintf(e.out, "%-20s %s%s\n", p.Name, p.Description, mark)
	}
	return exitOK
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

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
			fmt.Fprintf(e.out, "%6d %s turn=%d %s\n", ev.Seq, ev.Kind, ev.TurnID, compact(ev.Data))
		}
	}
	if *follow {
		err := e.c.Watch(ctx, e.session, *after, func(ev signals.Event) bool { print(ev); return true })
		if err != nil && !errors.Is(err, context.Canceled) {
			return e.fail(err)
		}
		return exitOK
	}
	for {
		res, err := e.c.Events(ctx, e.session, *after, 0)
		if err != nil {
			return e.fail(err)
		}
		if res.Gap && !e.json {
			fmt.Fprintf(e.err, "(events %d..%d were trimmed by retention)\n", *after+1, res.FirstRetainedSeq-1)
		}
		for _, ev := range res.Events {
			print(ev)
			*after = ev.Seq
		}
		if len(res.Events) == 0 || *after >= res.LastSeq {
			return exitOK
		}
	}
}

func compact(raw json.RawMessage) string {
	if len(raw) > 200 {
		return string(raw[:200]) + "…"
	}
	return string(raw)
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
	r := newRenderer(e.out, e.out)
	var after int64
	for {
		res, err := e.c.Events(ctx, e.session, after, 0)
		if err != nil {
			return e.fail(err)
		}
		if res.Gap {
			fmt.Fprintf(e.out, "[older events trimmed: journal starts at %d]\n", res.FirstRetainedSeq)
		}
		for _, ev := range res.Events {
			if e.json {
				e.printJSON(ev)
			} else {
				r.render(ev)
			}
			after = ev.Seq
		}
		if len(res.Events) == 0 || after >= res.LastSeq {
			r.flush()
			return exitOK
		}
	}
}

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
		}
	}
	return exitOK
}

func cmdApprove(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	return e.answer(ctx, fs, args, "allow_once", "allow_always")
}

func cmdDeny(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	return e.answer(ctx, fs, args, "reject_once", "reject_always")
}

// answer sends permission_respond for REQUEST_ID with OPTION_ID, or with the request's first
// option of the preferred kinds.
func (e *env) answer(ctx context.Context, fs *flag.FlagSet, args []string, kinds ...string) int {
	if !e.parse(fs, args, true) {
		return exitError
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fmt.Fprintln(e.err, "starter: want REQUEST_ID [OPTION_ID]")
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	req := signals.PermissionRespondRequest{RequestID: fs.Arg(0), OptionID: fs.Arg(1)}
	if req.OptionID == "" {
		st, err := e.c.Status(ctx, e.session)
		if err != nil {
			return e.fail(err)
		}
	find:
		for _, p := range st.PendingPermissions {
			if p.RequestID != req.RequestID && !slices.Contains(p.Replaces, req.RequestID) {
				continue
			}
			for _, kind := range kinds {
				for _, o := range p.Options {
					if o.Kind == kind {
						req.OptionID = o.OptionID
						break find
					}
				}
			}
		}
		if req.OptionID == "" {
			req.Outcome = signals.OutcomeCancelled // no such option offered: answer cancelled
		}
	}
	res, err := e.c.PermissionRespond(ctx, e.session, req)
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(res)
	} else {
		r := res.Resolution
		fmt.Fprintf(e.out, "%s: %s %s (decided by %s", r.RequestID, r.Outcome, r.OptionID, r.DecidedBy)
		if r.Reason != "" {
			fmt.Fprintf(e.out, ": %s", r.Reason)
		}
		fmt.Fprintln(e.out, ")")
		if r.Via != "" {
			fmt.Fprintf(e.out, "%s was withdrawn when its turn restarted; it was asked again as %s, which this answered\n", r.Via, r.RequestID)
		}
	}
	return exitOK
}

func cmdForget(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	if !e.parse(fs, args, true) {
		return exitError
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(e.err, "starter: want TOOL (a key of status rules)")
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	res, err := e.c.PermissionForget(ctx, e.session, signals.PermissionForgetRequest{Tool: fs.Arg(0)})
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(res)
	} else {
		fmt.Fprintf(e.out, "forgotten: %t\n", res.Forgotten)
	}
	return exitOK
}

func cmdPolicy(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	if !e.parse(fs, args, true) {
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	if fs.NArg() == 0 {
		st, err := e.c.Status(ctx, e.session)
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			e.printJSON(map[string]any{"level": st.Policy, "rules": st.Rules})
		} else {
			fmt.Fprintf(e.out, "%s\nrules: %s\n", st.Policy, strings.Join(st.Rules, ", "))
		}
		return exitOK
	}
	res, err := e.c.SetPolicy(ctx, e.session, signals.SetPolicyRequest{Level: fs.Arg(0)})
	if rej, ok := signals.AsRejection(err); ok && rej.Type == signals.RejectUnknownSession {
		fmt.Fprintf(e.err, "starter: session %s does not exist yet: a new session takes its policy from its first prompt, starter prompt --session %s --policy %s TEXT\n",
			e.session, e.session, fs.Arg(0))
		return exitRejected
	}
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(res)
	} else {
		fmt.Fprintln(e.out, res.Level)
	}
	return exitOK
}

func awaitingNote(awaiting bool) string {
	if awaiting {
		return "  (awaiting approval)"
	}
	return ""
}

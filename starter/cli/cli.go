// Package cli is tacp's command-line client, the commands of both `tacp` and the slim
// `starter` binary: it sends prompts, steers and cancels to sessions, shows their status and
// journal, serves the ACP face (acp) and the deck (web). It carries no Temporal server, so
// `starter`, which editors may launch, stays small.
//
// This file is the dispatcher: the command table and how a command line finds its command.
// Each command lives in a file named after it (or its family); env.go holds what they share.
package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

// Exit codes.
const (
	exitOK        = 0
	exitError     = 1
	exitRejected  = 2 // the session refused the request (the rejection is printed)
	exitCancelled = 3 // the turn ended cancelled
	exitFailed    = 4 // the turn failed
	exitStopped   = 5 // the turn ended with another stop reason (max_tokens, refusal, ...)
	// exitDraining (6, deployment.go): pinned runs are left on the version
)

type command struct {
	name, args, help string
	run              func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int
}

var commands = []command{
	{"prompt", "[--no-wait] TEXT...", "send a prompt (creating the session if needed) and stream the reply; TEXT '-' reads stdin", cmdPrompt},
	{"steer", "[--expect TOKEN] TEXT...", "steer the running turn (compare-and-swap on --expect's token; without it, whatever turn runs: see README)", cmdSteer},
	{"cancel", "[--turn N]", "cancel the running turn (also a limited turn's wait)", cmdCancel},
	{"retry", "[--turn N] [--as NAME]", "end the wait of a turn the model provider limited: it runs again now", cmdRetry},
	{"approve", "REQUEST_ID [OPTION_ID]", "answer a permission request with an allow option (default: the first allow_once)", cmdApprove},
	{"deny", "REQUEST_ID [OPTION_ID]", "answer a permission request with a reject option (default: the first reject_once)", cmdDeny},
	{"answer", "REQUEST_ID [--field NAME=VALUE]... | --content JSON | --decline | --cancel", "answer a question the agent asked (status lists them with their fields)", cmdAnswer},
	{"forget", "TOOL", "forget a remembered tool (a key of status rules)", cmdForget},
	{"policy", "[LEVEL]", "show or set the permission level: allow_all, ask_for_risky, ask_always", cmdPolicy},
	{"mode", "[MODE_ID]", "show the agent's modes or set the session's (re-applied to every new agent process)", cmdMode},
	{"config", "[ID VALUE]", "show the agent's config options (model, effort, ...) or set one for the session", cmdConfig},
	{"title", "[TEXT... | --clear]", "show or set the session's title (status and the Temporal UI's Current Details show it)", cmdTitle},
	{"status", "[--actions [--price P]]", "show the session's status, or with --actions its billable actions on Temporal Cloud so far (from its history) and their cost at --price dollars a million", cmdStatus},
	{"tail", "[--after SEQ] [--follow]", "print journal events after SEQ", cmdTail},
	{"replay", "", "print the session's transcript from the journal", cmdReplay},
	{"list", "[--awaiting-approval]", "list sessions (from visibility)", cmdList},
	{"deployment", "[current BUILD_ID | drained BUILD_ID [--wait D]]", "show the workers' Worker Deployment (current version, pinned runs left on each), make a build current, or say whether an old build may be stopped", cmdDeployment},
	{"profiles", "", "list the agent profiles the workers offer (what --agent may name)", cmdProfiles},
	{"fork", "[--before-turn N] [--new ID] [--workspace DIR]", "start a new session whose agent starts from this one's conversation (before turn N)", cmdFork},
	{"rewind", "--to-turn N [--new ID]", "go back to the end of turn N as a new session: its conversation to turn N and the files turn N left (a fork before turn N+1; this session is untouched)", cmdRewind},
	{"diff", "[--turn N] [--stat] [--checkpoint-store URL]", "show what a turn changed in the session's workspace, from its workspace checkpoints", cmdDiff},
	{"export", "--branch NAME [--repo DIR] [--turn N] [--checkpoint-store URL]", "write the session's workspace checkpoints into a git repository as a new branch, one commit a turn (its index and work tree untouched)", cmdExport},
	{"checkpoints", "[prune [--older-than D] [--dry-run]] [--checkpoint-store URL]", "list the sessions the workspace checkpoint store holds; prune removes those of sessions not running whose last checkpoint is older than --older-than (default 720h)", cmdCheckpoints},
	{"close", "[--reason TEXT]", "close the session (cancels its turn, drops its queue)", cmdClose},
	{"delete", "[--with-workspace] [--history]", "close the session and remove what tacp keeps of it on the worker that holds it (its agent's per-session state; its workspace; its history)", cmdDelete},
	{"demo", "", "moved: the demo is 'go run ./demo' (this binary does not carry the Temporal server)", cmdDemo},
	{"setup", "", "register tacp's search attributes on the cluster's namespace", cmdSetup},
	{"acp", "[--session ID] [--observe] | --remote URL --token T", "speak ACP on stdio as the agent of an editor: durable, shared tacp sessions (--remote: through a deck's /acp, no Temporal credentials)", cmdACP},
	{"codec-server", "[--listen ADDR] [--token T]", "serve /encode and /decode of the payload codec for the Temporal UI", cmdCodecServer},
	{"web", "[--listen ADDR] [--token T] [--observer-token T] [--tokens-file PATH]", "serve the deck: watch, approve, steer and cancel sessions from a browser", cmdWeb},
	{"token", "--name NAME --role controller|observer [--groups G,G] [--secret-stdin]", "make a line of the deck's tokens file (web --tokens-file): a new secret, shown once on stderr, and the line with its hash on stdout", cmdToken},
	{"completion", "bash|zsh|fish", "print the shell completion script (bash: source <(tacp completion bash))", cmdCompletion},
}

// Name is the program name that usage lines, flag sets and error messages show: "starter",
// or "tacp" in the tacp binary.
var Name = "starter"

// Run runs the command line args (without the program name) and returns its exit code.
func Run(args []string, stdout, stderr io.Writer) int { return run(args, stdout, stderr) }

// Command describes one command of the table for a program that lists or completes them.
type Command struct {
	Name, Args, Help string
}

// Commands lists the command table in its order.
func Commands() []Command {
	out := make([]Command, len(commands))
	for i, c := range commands {
		out[i] = Command{c.name, c.args, c.help}
	}
	return out
}

// Parse parses a command line (args[0] is the command) through the command's own flags and
// runs nothing. It returns the command's flag set after parsing (its Args are the
// positional arguments), or why the line does not parse. A line without a command, or
// asking for help, parses (as run prints the usage) with no flag set.
func Parse(args []string) (*flag.FlagSet, error) {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		return nil, nil
	}
	p := dryParse(args)
	return p.fs, p.err
}

// CommandUsage prints the command table to w, extra's rows (a program's own commands) first.
func CommandUsage(w io.Writer, extra []Command) {
	fmt.Fprintf(w, "Usage: %s COMMAND [args] [flags]\n\nCommands:\n", Name)
	seen := map[string]bool{}
	for _, c := range append(extra, Commands()...) {
		if !seen[c.Name] {
			fmt.Fprintf(w, "  %-12s %s\n", c.Name, c.Help)
		}
		seen[c.Name] = true
	}
	fmt.Fprintf(w, "\nCommon flags: --session ID, --json, --address HOST:PORT, --namespace NS, --task-queue Q.\nRun '%s COMMAND -h' for a command's flags. Flags stand before or after the arguments; text that\nbegins with '-' goes after '--'. Every flag falls back to TACP_<NAME>.\n", Name)
}

func usage(w io.Writer) { CommandUsage(w, nil) }

// flagSet is cmd's flag set with the flags every command shares; the command adds its own.
func (e *env) flagSet(cmd *command) *flag.FlagSet {
	fs := flag.NewFlagSet(Name+" "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(e.err)
	fs.Usage = func() {
		fmt.Fprintf(e.err, "Usage: %s %s %s [flags]\n\n%s\n\nFlags stand before or after the arguments; text that begins with '-' goes after '--'.\n\n", Name, cmd.name, cmd.args, cmd.help)
		fs.PrintDefaults()
	}
	fs.StringVar(&e.session, "session", "", "session id")
	fs.BoolVar(&e.json, "json", false, "print JSON (one object, or one event per line)")
	fs.StringVar(&e.address, "address", "", "Temporal frontend host:port (default: TEMPORAL_ADDRESS or localhost:7233)")
	fs.StringVar(&e.namespace, "namespace", "", "Temporal namespace (default: TEMPORAL_NAMESPACE or default)")
	fs.StringVar(&e.queue, "task-queue", signals.DefaultTaskQueue, "task queue of new sessions")
	fs.StringVar(&e.agent, "agent", "", "agent profile of a new session, a name the worker offers ('starter profiles'; default: the worker's default)")
	fs.StringVar(&e.workspace, "workspace", "", "workspace of a new session, inside the worker's workspace roots (default: the session's own folder; relative: in the first root)")
	fs.DurationVar(&e.safetyPoll, "safety-poll", tacpclient.DefaultSafetyPoll, "a followed session's events are queried when its history grows, and at least this often")
	return fs
}

// lookup is the command named name, or nil.
func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// parsed is what a dry parse of a command line finds: its command, the command's flag set
// after parsing (fs.Args() are the positional arguments), and the parse error.
type parsed struct {
	cmd *command
	fs  *flag.FlagSet
	err error
}

// dryParse parses args as run does, through the command's own flag definitions, and runs
// nothing: no connection, no output. Completion and the docs test read commands through it.
func dryParse(args []string) parsed {
	if len(args) == 0 {
		return parsed{err: fmt.Errorf("no command")}
	}
	cmd := lookup(args[0])
	if cmd == nil {
		return parsed{err: fmt.Errorf("unknown command %q", args[0])}
	}
	p := &parsed{cmd: cmd}
	e := &env{out: io.Discard, err: io.Discard, dry: p}
	fs := e.flagSet(cmd)
	p.fs = fs
	cmd.run(context.Background(), e, fs, args[1:])
	return *p
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return exitOK
	}
	cmd := lookup(args[0])
	if cmd == nil {
		fmt.Fprintf(stderr, "%s: unknown command %q\n\n", Name, args[0])
		usage(stderr)
		return exitError
	}
	e := &env{out: stdout, err: stderr}
	fs := e.flagSet(cmd)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer func() {
		if e.tc != nil {
			e.tc.Close()
		}
	}()
	return cmd.run(ctx, e, fs, args[1:])
}

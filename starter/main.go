// Command starter is tacp's command-line client: it sends prompts, steers and cancels to
// sessions, shows their status and journal, serves the ACP face (starter acp) and the deck
// (starter web). It is what an editor launches, so it carries no Temporal server: the demo
// on the embedded server is its own binary, ./demo.
//
// This file is the dispatcher: the command table and how a command line finds its command.
// Each command lives in a file named after it (or its family); env.go holds what they share.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

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
	{"status", "", "show the session's status", cmdStatus},
	{"tail", "[--after SEQ] [--follow]", "print journal events after SEQ", cmdTail},
	{"replay", "", "print the session's transcript from the journal", cmdReplay},
	{"list", "[--awaiting-approval]", "list sessions (from visibility)", cmdList},
	{"deployment", "[current BUILD_ID | drained BUILD_ID [--wait D]]", "show the workers' Worker Deployment (current version, pinned runs left on each), make a build current, or say whether an old build may be stopped", cmdDeployment},
	{"profiles", "", "list the agent profiles the workers offer (what --agent may name)", cmdProfiles},
	{"fork", "[--before-turn N] [--new ID] [--workspace DIR]", "start a new session whose agent starts from this one's conversation (before turn N)", cmdFork},
	{"diff", "[--turn N] [--stat] [--checkpoint-store URL]", "show what a turn changed in the session's workspace, from its workspace checkpoints", cmdDiff},
	{"export", "--branch NAME [--repo DIR] [--turn N] [--checkpoint-store URL]", "write the session's workspace checkpoints into a git repository as a new branch, one commit a turn (its index and work tree untouched)", cmdExport},
	{"close", "[--reason TEXT]", "close the session (cancels its turn, drops its queue)", cmdClose},
	{"delete", "[--with-workspace] [--history]", "close the session and remove what tacp keeps of it on the worker that holds it (its agent's per-session state; its workspace; its history)", cmdDelete},
	{"demo", "", "moved: the demo is 'go run ./demo' (this binary does not carry the Temporal server)", cmdDemo},
	{"setup", "", "register tacp's search attributes on the cluster's namespace", cmdSetup},
	{"acp", "[--session ID] [--observe] | --remote URL --token T", "speak ACP on stdio as the agent of an editor: durable, shared tacp sessions (--remote: through a deck's /acp, no Temporal credentials)", cmdACP},
	{"codec-server", "[--listen ADDR] [--token T]", "serve /encode and /decode of the payload codec for the Temporal UI", cmdCodecServer},
	{"web", "[--listen ADDR] [--token T] [--observer-token T]", "serve the deck: watch, approve, steer and cancel sessions from a browser", cmdWeb},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: starter COMMAND [flags] [args]\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.help)
	}
	fmt.Fprintln(w, "\nCommon flags: --session ID, --json, --address HOST:PORT, --namespace NS, --task-queue Q.\nRun 'starter COMMAND -h' for a command's flags. Every flag falls back to TACP_<NAME>.")
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

package agent

// The command line of tacp-testagent: Main parses the flags into Options, plays the helper
// process of -spawn-child (-hold), leaves a file per start in $TESTAGENT_STARTS_DIR, and
// serves the agent on stdin and stdout until the client goes or a signal arrives.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// StartsDirEnv names a directory where the agent leaves one file per process start.
const StartsDirEnv = "TESTAGENT_STARTS_DIR"

// Main runs the agent on stdin/stdout with command-line args (without the
// program name) and returns the process exit code. Diagnostics go to stderr.
func Main(args []string) int {
	var opts Options
	fset := flag.NewFlagSet(DefaultName, flag.ContinueOnError)
	fset.StringVar(&opts.TranscriptDir, "transcripts", DefaultTranscriptDir(), "directory of session transcripts (<sessionId>.jsonl)")
	fset.BoolVar(&opts.Steering, "steering", false, "advertise and honour the _session/steering extension")
	fset.StringVar(&opts.Name, "name", DefaultName, "agentInfo name reported by initialize")
	spawnChild := fset.Bool("spawn-child", false, "start a helper process in the agent's process group that outlives the agent and ignores SIGTERM, as claude-agent-acp's node children do (/pids names it)")
	hold := fset.Bool("hold", false, "be that helper: ignore SIGINT, SIGTERM and SIGHUP and wait to be killed")
	fset.BoolVar(&opts.IgnoreCancel, "ignore-cancel", false, "ignore session/cancel (a stuck agent, for tests of the client's kill backstop)")
	fset.BoolVar(&opts.Commands, "commands", false, "send available_commands_update right after answering session/new and session/load")
	startDelay := fset.Duration("start-delay", 0, "wait this long before reading the first request, as an agent slow to start does (a cold node, a loaded machine)")
	fset.BoolVar(&opts.Settings, "settings", false, "offer modes (default, acceptEdits, plan) and config options (mode, model) as claude-agent-acp does, and honour set_mode and set_config_option")
	fset.StringVar(&opts.InitialMode, "initial-mode", "", "with -settings: the mode sessions start in (default: default)")
	fset.BoolVar(&opts.IgnoreSetMode, "ignore-set-mode", false, "with -settings: refuse every change of mode, as an agent pinned to its mode by its own settings does")
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fset.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "%s: unexpected arguments %q\n", DefaultName, fset.Args())
		return 2
	}
	if *hold {
		signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		time.Sleep(24 * time.Hour) // until killed
		return 0
	}
	if *spawnChild {
		exe, err := os.Executable()
		if err == nil {
			child := exec.Command(exe, "-hold") // no stdio: the end of ours does not end it
			if err = child.Start(); err == nil {
				opts.ChildPID = child.Process.Pid
				go func() { _ = child.Wait() }()
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: spawn child: %v\n", DefaultName, err)
			return 1
		}
	}
	if dir := os.Getenv(StartsDirEnv); dir != "" {
		// One file per process start: tests count agent starts across worker processes.
		if err := os.MkdirAll(dir, 0o755); err == nil {
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("start-%d-%d", os.Getpid(), time.Now().UnixNano())), nil, 0o644)
		}
	}
	if *startDelay > 0 {
		fmt.Fprintf(os.Stderr, "%s: starting slowly (%s)\n", DefaultName, *startDelay)
		time.Sleep(*startDelay)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	in, out := checkedWire(os.Stdin, os.Stdout)
	if err := Serve(ctx, opts, in, out); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", DefaultName, err)
		return 1
	}
	return 0
}

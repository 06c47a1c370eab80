// Command tacp is tacp in one binary: the client commands of starter/cli (prompt, steer,
// acp, web, ...), the worker (tacp worker) and the demo on the embedded Temporal server
// (tacp dev). It links the Temporal server, for worker -dev and dev; the slim `starter`
// binary runs the same client commands without it (docs/acp.md gives both sizes).
//
//	go install github.com/tacp-dev/tacp/cmd/tacp@latest
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tacp-dev/tacp/demo/democmd"
	"github.com/tacp-dev/tacp/internal/selfagent"
	"github.com/tacp-dev/tacp/starter/cli"
	"github.com/tacp-dev/tacp/worker/workercmd"
)

// own are the commands tacp adds to the client's table; they are listed first and take
// precedence over a client command of the same name (the client's demo only says where
// the demo went).
var own = []cli.Command{
	{Name: "worker", Args: "[flags]", Help: "run session workflows and turns (-dev: on the embedded Temporal server, with its Web UI)"},
	{Name: "dev", Args: "[flags]", Help: "the demo: embedded Temporal server and UI, a worker, a session driven to show tacp at work"},
	{Name: "demo", Args: "[flags]", Help: "the same as dev"},
}

func main() {
	selfagent.MaybeRun() // worker -dev and dev run this binary as their test agent
	cli.Name = "tacp"
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		cli.CommandUsage(stdout, own)
		return 0
	}
	switch args[0] {
	case "worker":
		if err := workercmd.Run("tacp worker", args[1:]); err != nil {
			fmt.Fprintln(stderr, "tacp worker:", err)
			return 1
		}
		return 0
	case "dev", "demo":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return democmd.Run(ctx, "tacp "+args[0], args[1:], stdout, stderr)
	case "completion":
		fs, err := cli.Parse(args)
		if err != nil || fs.NArg() != 1 {
			return cli.Run(args, stdout, stderr) // says what is wrong
		}
		if err := cli.WriteCompletion(stdout, fs.Arg(0), "tacp", specs()); err != nil {
			fmt.Fprintln(stderr, "tacp completion:", err)
			return 1
		}
		return 0
	}
	return cli.Run(args, stdout, stderr)
}

// specs are tacp's commands with their flag sets: its own, then the client's.
func specs() []cli.Spec {
	wfs, _ := workercmd.Parse(nil)
	dfs, _ := democmd.Parse(nil)
	out := []cli.Spec{{Name: "worker", Help: own[0].Help, Flags: wfs}, {Name: "dev", Help: own[1].Help, Flags: dfs}, {Name: "demo", Help: own[2].Help, Flags: dfs}}
	for _, s := range cli.Specs() {
		if s.Name != "demo" {
			out = append(out, s)
		}
	}
	return out
}

// parse parses a tacp command line through the command's own flags and runs nothing.
func parse(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		return nil
	}
	switch args[0] {
	case "worker":
		_, err := workercmd.Parse(args[1:])
		return err
	case "dev", "demo":
		_, err := democmd.Parse(args[1:])
		return err
	}
	_, err := cli.Parse(args)
	return err
}

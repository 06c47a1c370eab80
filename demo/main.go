// Command demo shows tacp at work on one machine (demo/democmd); `tacp dev` is the same
// command.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/tacp-dev/tacp/demo/democmd"
	"github.com/tacp-dev/tacp/internal/selfagent"
)

func main() {
	selfagent.MaybeRun() // the demo's worker runs this binary as its test agent
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(democmd.Run(ctx, "go run ./demo", os.Args[1:], os.Stdout, os.Stderr))
}

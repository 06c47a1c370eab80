// Command worker runs tacp's session workflows and turn runner (worker/workercmd); `tacp
// worker` is the same command.
package main

import (
	"fmt"
	"os"

	"github.com/tacp-dev/tacp/internal/selfagent"
	"github.com/tacp-dev/tacp/worker/workercmd"
)

func main() {
	selfagent.MaybeRun()
	if err := workercmd.Run("worker", os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

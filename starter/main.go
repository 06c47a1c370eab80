// Command starter is the slim build of tacp's client commands (starter/cli): what `tacp`
// runs but without the worker and the embedded Temporal server, so an editor that launches
// `starter acp` starts a small binary. `tacp COMMAND` and `starter COMMAND` take the same
// command lines.
package main

import (
	"os"

	"github.com/tacp-dev/tacp/starter/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr))
}

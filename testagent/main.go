// Command testagent is tacp-testagent, a scripted ACP agent over stdio used by
// tests, demos and benchmarks. See package agent for the prompt directives.
package main

import (
	"os"

	"github.com/tacp-dev/tacp/testagent/agent"
)

func main() { os.Exit(agent.Main(os.Args[1:])) }

// Package selfagent lets a tacp binary be its own test agent: started with the argument
// "testagent" it runs testagent/agent instead of itself, so a worker's default profile
// (`worker -dev`, the demo) needs no other binary built.
package selfagent

import (
	"os"
	"strconv"

	"github.com/tacp-dev/tacp/testagent/agent"
)

// arg is the argument that turns a tacp binary into the built-in test agent.
const arg = "testagent"

// Command is the agent command line that runs this very binary as the test agent (with the
// steering extension), its transcripts under transcripts ("": where $TESTAGENT_TRANSCRIPTS
// says, as a sandboxed profile gives each session a folder of its own).
func Command(transcripts string) string {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := strconv.Quote(exe) + " " + arg + " -steering"
	if transcripts != "" {
		cmd += " -transcripts " + strconv.Quote(transcripts)
	}
	return cmd
}

// MaybeRun runs the test agent and exits when the process was started as one (argv[1] ==
// "testagent"). The mains of binaries whose workers may use Command call it first.
func MaybeRun() {
	if len(os.Args) > 1 && os.Args[1] == arg {
		os.Exit(agent.Main(os.Args[2:]))
	}
}

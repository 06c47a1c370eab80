package agent

// The wire check of what a client sends an agent: with SchemaLogEnv set, the agent watches
// its own connection (acpschema.CheckedWire) and appends every message its client sent that
// does not hold to the pinned ACP v1 schema to the file it names. The e2e suite sets it for
// every test agent it starts, so everything tacp's turn runner sends an agent over the whole
// suite — initialize, session/new and load, prompts, cancels, set_mode, the answers to
// permission requests, questions and file reads — is held to the schema; a violation fails
// the suite.

import (
	"fmt"
	"io"
	"os"

	"github.com/tacp-dev/tacp/testagent/acpschema"
)

// SchemaLogEnv names the file violations are appended to (unset: no check). Not TACP_:
// a worker hides its own variables from agents.
const SchemaLogEnv = "TESTAGENT_SCHEMA_LOG"

// checkedWire returns in and out watched by the check SchemaLogEnv asks for, or as they are.
func checkedWire(in io.Reader, out io.Writer) (io.Reader, io.Writer) {
	path := os.Getenv(SchemaLogEnv)
	if path == "" {
		return in, out
	}
	in, out, err := acpschema.CheckedWire(in, out, acpschema.FromClient, path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: schema check: %v\n", DefaultName, err)
	}
	return in, out
}

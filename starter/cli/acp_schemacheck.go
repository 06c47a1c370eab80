//go:build schemacheck

package cli

// With the schemacheck build tag (the e2e suite's starter), `starter acp` appends every
// message it sends its editor that does not hold to the pinned ACP v1 schema to the file
// STARTER_ACP_SCHEMA_LOG names, so the whole ACP test suite is held to the schema. A
// production build carries neither the schema nor the validator.

import (
	"fmt"
	"io"
	"os"

	"github.com/tacp-dev/tacp/testagent/acpschema"
)

// SchemaLogEnv names the file violations are appended to (unset: no check).
const SchemaLogEnv = "STARTER_ACP_SCHEMA_LOG"

func init() {
	acpWire = func(in io.Reader, out io.Writer) (io.Reader, io.Writer) {
		path := os.Getenv(SchemaLogEnv)
		if path == "" {
			return in, out
		}
		cin, cout, err := acpschema.CheckedWire(in, out, acpschema.FromAgent, path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "starter acp: schema check: %v\n", err)
			return in, out
		}
		return cin, cout
	}
}

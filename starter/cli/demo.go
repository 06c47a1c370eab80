package cli

// starter demo: moved. The demo runs the Temporal server in-process, and starter is what
// editors launch (starter acp): it should not carry a server it never runs.

import (
	"context"
	"flag"
	"fmt"
)

// cmdDemo says where the demo went and exits 2.
func cmdDemo(_ context.Context, e *env, _ *flag.FlagSet, _ []string) int {
	fmt.Fprintln(e.err, "starter: the demo is its own binary now, so that starter carries no Temporal server:\n  go run ./demo          (flags as before: --exit, --dev.db, --dev.port, --dev.ui-port, --data-dir, ...)")
	return exitRejected
}

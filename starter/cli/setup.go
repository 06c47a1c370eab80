package cli

// starter setup: register tacp's search attributes on the cluster's namespace.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/tacp-dev/tacp/tacpclient"
)

// cmdSetup registers tacp's search attributes on the cluster (an admin's credentials).
func cmdSetup(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	if !e.parse(fs, args, false) {
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	ns := e.namespace
	if ns == "" {
		ns = os.Getenv("TEMPORAL_NAMESPACE")
	}
	if ns == "" {
		ns = "default"
	}
	added, err := tacpclient.EnsureSearchAttributes(ctx, e.tc, ns)
	if err != nil {
		return e.fail(err)
	}
	if len(added) == 0 {
		fmt.Fprintf(e.out, "search attributes of %s: already registered\n", ns)
	} else {
		fmt.Fprintf(e.out, "search attributes of %s: registered %s\n", ns, strings.Join(added, ", "))
	}
	return exitOK
}

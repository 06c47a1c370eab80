package cli

// What every command shares: the connection flags, the session client, and how results and
// refusals are printed.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tacp-dev/tacp/codec"
	"github.com/tacp-dev/tacp/internal/dial"
	"github.com/tacp-dev/tacp/internal/flagenv"
	"github.com/tacp-dev/tacp/internal/transcript"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
	"github.com/tacp-dev/tacp/tacpclient"
)

// env is what every command shares: the connection flags and output.
type env struct {
	session   string
	json      bool
	address   string
	namespace string
	queue     string
	agent     string
	workspace string
	// safetyPoll is how long a command that follows a session (prompt, tail --follow, acp,
	// web) goes without an events query while the session's history wakes nothing.
	safetyPoll time.Duration
	out, err   io.Writer

	tc client.Client
	c  *tacpclient.Client

	// dry, when set, makes parse record its result there and stop the command (dryParse).
	dry *parsed
}

// parse parses the command's flags; it returns false (after printing why) when the command
// should stop with exitError.
func (e *env) parse(fs *flag.FlagSet, args []string, needSession bool) bool {
	if e.dry != nil {
		e.dry.fs, e.dry.err = fs, flagenv.Parse(fs, args)
		return false
	}
	if err := flagenv.Parse(fs, args); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(e.err, Name+":", err)
		}
		return false
	}
	if needSession {
		if e.session == "" {
			fmt.Fprintln(e.err, Name+": --session is required")
			return false
		}
		if err := signals.ValidateSessionID(e.session); err != nil {
			fmt.Fprintln(e.err, Name+":", err)
			return false
		}
	}
	return true
}

// connect dials Temporal once.
func (e *env) connect(ctx context.Context) error {
	if e.c != nil {
		return nil
	}
	tc, err := dial.Client(ctx, e.address, e.namespace, nil)
	if err != nil {
		return err
	}
	e.tc, e.c = tc, e.client(tc)
	return nil
}

// client is the session client of this command over tc.
func (e *env) client(tc client.Client) *tacpclient.Client {
	c := tacpclient.NewClient(tc, e.queue)
	c.SafetyPoll = e.safetyPoll
	c.Confidential = codec.Configured()
	return c
}

// fail prints err and returns the exit code it deserves.
func (e *env) fail(err error) int {
	if rej, ok := rejection.As(err); ok {
		if e.json {
			e.printJSON(map[string]any{"rejected": rej.Type, "message": rej.Message, "details": rej.Details})
		} else {
			fmt.Fprintf(e.err, "rejected: %s\n", rej.Error())
			if d, ok := rej.Details.(signals.StaleTurnDetails); ok {
				fmt.Fprintf(e.err, "  expected %s, actual %s\n", d.Expected, d.Actual)
			}
		}
		return exitRejected
	}
	fmt.Fprintln(e.err, Name+":", err)
	return exitError
}

func (e *env) printJSON(v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintln(e.out, string(b))
}

func textArg(args []string, stdin io.Reader) (string, error) {
	if len(args) == 1 && args[0] == "-" {
		b, err := io.ReadAll(io.LimitReader(stdin, signals.MaxTextBytes+1))
		return string(b), err
	}
	return strings.Join(args, " "), nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// textAndConnect reads a command's text (its arguments, or stdin for "-") and connects.
func (e *env) textAndConnect(ctx context.Context, fs *flag.FlagSet) (string, error) {
	text, err := textArg(fs.Args(), os.Stdin)
	if err != nil {
		return "", err
	}
	return text, e.connect(ctx)
}

// show prints an event as JSON (--json) or through r for a person.
func (e *env) show(r *transcript.Renderer) func(signals.Event) {
	return func(ev signals.Event) {
		if e.json {
			e.printJSON(ev)
		} else {
			r.Render(ev)
		}
	}
}

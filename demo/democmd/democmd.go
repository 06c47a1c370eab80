// Package democmd is the demo (`go run ./demo`, `tacp dev`): it shows tacp at work on one machine: it starts the real Temporal server
// in-process (devserver/, SQLite) with its Web UI, a worker with the built-in test agent,
// and a session; it streams a reply, steers a long turn (a stale token is refused, the live
// one delivered), cancels it, replays the transcript from the journal, and stays up until
// interrupted (or exits with --exit) so the session can be read in the UI or driven with
// `tacp ...` (or `go run ./starter ...`).
//
// It carries the Temporal server: `tacp` links it, the slim `starter` does not.
package democmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tacp-dev/tacp/codec"
	"github.com/tacp-dev/tacp/devserver"
	"github.com/tacp-dev/tacp/internal/flagenv"
	"github.com/tacp-dev/tacp/internal/transcript"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

// Run runs the demo with args (without the program name); name is how usage calls it
// ("go run ./demo", "tacp dev"). The program's main calls selfagent.MaybeRun first: the
// demo's worker runs the binary itself as its test agent.
func Run(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	return run(ctx, name, args, stdout, stderr, nil)
}

// Parse parses args through the demo's flags and runs nothing.
func Parse(args []string) (*flag.FlagSet, error) {
	var fs *flag.FlagSet
	err := errors.New("no parse")
	run(context.Background(), "demo", args, io.Discard, io.Discard, func(f *flag.FlagSet, e error) { fs, err = f, e })
	return fs, err
}

// run runs the demo; with dry set it parses args, hands dry the result and returns.
func run(ctx context.Context, name string, args []string, stdout, stderr io.Writer, dry func(*flag.FlagSet, error)) int {
	dataDir := tacpworker.DefaultDataDir()
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: "+name+" [flags]\n\nStart the embedded Temporal server, a worker and a session, and show tacp at work.\nEvery flag falls back to TACP_<NAME>.")
		fs.PrintDefaults()
	}
	db := fs.String("dev.db", filepath.Join(dataDir, "dev.db"), "SQLite file of the embedded server")
	port := fs.Int("dev.port", 7233, "gRPC port of the embedded server (0: any free port)")
	uiPort := fs.Int("dev.ui-port", 8233, "Web UI port (0: no UI)")
	data := fs.String("data-dir", dataDir, "directory for workspaces and agent transcripts")
	exit := fs.Bool("exit", false, "exit when the demo script is done instead of staying up")
	session := fs.String("session", "", "session id (default: demo-<unix time>)")
	queue := fs.String("task-queue", signals.DefaultTaskQueue, "task queue of the worker and the session")
	agent := fs.String("agent", "", "agent command line of the worker's default profile (default: the built-in test agent)")
	workspace := fs.String("workspace", "", "workspace of the session, inside the worker's workspace roots")
	if dry != nil {
		dry(fs, flagenv.Parse(fs, args))
		return 0
	}
	if err := flagenv.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	d := &demo{out: stdout, session: *session}
	if err := d.run(ctx, options{db: *db, port: *port, uiPort: *uiPort, data: *data, exit: *exit, queue: *queue, agent: *agent, workspace: *workspace}); err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	return 0
}

type options struct {
	db, data, queue, agent, workspace string
	port, uiPort                      int
	exit                              bool
}

type demo struct {
	out     io.Writer
	session string
	c       *tacpclient.Client
}

func (d *demo) step(format string, args ...any) { fmt.Fprintf(d.out, "\n== "+format+"\n", args...) }

func (d *demo) run(ctx context.Context, o options) error {
	d.step("starting the embedded Temporal server (%s)", o.db)
	srv, err := devserver.Start(ctx, devserver.Options{DBPath: o.db, Port: o.port, UIPort: o.uiPort})
	if err != nil {
		return err
	}
	defer func() { _ = srv.Stop() }()
	dc, err := codec.DataConverterFromEnv()
	if err != nil {
		return err
	}
	tc, err := srv.NewClient(ctx, client.Options{DataConverter: dc})
	if err != nil {
		return err
	}
	defer tc.Close()
	d.c = tacpclient.NewClient(tc, o.queue)
	// The demo is its own worker's operator: --agent is the command of its default profile.
	w, err := tacpworker.Start(tc, tacpworker.Options{TaskQueue: o.queue, Agent: o.agent, DataDir: o.data, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer w.Stop()
	if d.session == "" {
		d.session = fmt.Sprintf("demo-%d", time.Now().Unix())
	}
	fmt.Fprintf(d.out, "server %s, worker on task queue %s, session %s\n", srv.HostPort(), o.queue, d.session)

	d.step("1. a prompt: the test agent streams its reply through the session workflow")
	cfg := signals.SessionConfig{SessionID: d.session, Workspace: o.workspace}
	res, err := d.c.Prompt(ctx, cfg, signals.PromptRequest{Text: "Hello from tacp! Every chunk of this reply was journaled by a Temporal workflow before you saw it."})
	if err != nil {
		return err
	}
	if err := d.follow(ctx, res.TurnID); err != nil {
		return err
	}

	d.step("2. a long turn (/sleep 30s), steered: a stale token is refused, the live one delivered")
	res, err = d.c.Prompt(ctx, cfg, signals.PromptRequest{Text: "/sleep 30s"})
	if err != nil {
		return err
	}
	st, err := d.c.Status(ctx, d.session)
	for err == nil && (st.State != signals.StateRunning || st.TurnID != res.TurnID || st.SteerToken == "") {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		st, err = d.c.Status(ctx, d.session)
	}
	if err != nil {
		return err
	}
	for _, token := range []string{"1", st.SteerToken} {
		fmt.Fprintf(d.out, "steer expecting turn %s: ", token)
		sr, err := d.c.Steer(ctx, d.session, signals.SteerRequest{Text: "focus on the tests", ExpectedTurnID: token, ClientMsgID: signals.NewID()})
		if rej, ok := rejection.As(err); ok {
			fmt.Fprintf(d.out, "rejected %s (%s)\n", rej.Type, rej.Message)
		} else if err != nil {
			return err
		} else {
			fmt.Fprintf(d.out, "%s, next token %s\n", sr.Outcome, sr.NextExpectedTurnID)
		}
	}

	d.step("3. cancel the running turn")
	select { // a moment to read the steer's delivery before the cancel
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Second):
	}
	c, err := d.c.Cancel(ctx, d.session, signals.CancelRequest{})
	if err != nil {
		return err
	}
	fmt.Fprintln(d.out, "cancel:", c.Outcome)
	if err := d.follow(ctx, res.TurnID); err != nil {
		return err
	}

	d.step("4. the transcript, replayed from the journal")
	r := transcript.NewRenderer(d.out, d.out)
	if err := transcript.Page(ctx, d.c, d.session, 0, nil, r.Render); err != nil {
		return err
	}
	r.Flush()

	d.step("done")
	if srv.UIURL() != "" {
		fmt.Fprintf(d.out, "Temporal UI: %s/namespaces/default/workflows/%s\n", srv.UIURL(), signals.SessionWorkflowID(d.session))
	}
	d.nextSteps(srv.UIURL())
	if o.exit {
		return nil
	}
	fmt.Fprintln(d.out, "The server and worker stay up until Ctrl-C.")
	<-ctx.Done()
	return nil
}

// follow prints turn turnID's events from the journal's start until the turn ends.
func (d *demo) follow(ctx context.Context, turnID int64) error {
	r := transcript.NewRenderer(d.out, d.out)
	_, err := transcript.FollowTurn(ctx, d.c, d.session, 0, turnID, r.Render)
	r.Flush()
	return err
}

// nextSteps prints what to do next: attach an editor, open the deck, find the sessions in
// the Temporal UI, and drive this one from a terminal. Every command is `go run ./starter`,
// which needs no install and starts fast; `tacp` takes the same command lines.
func (d *demo) nextSteps(uiURL string) {
	fmt.Fprintf(d.out, "\nNext, in another terminal (`go install ./cmd/tacp`, and each `go run ./starter` below is `tacp`):\n")
	fmt.Fprintf(d.out, "  1. attach an editor:  go run ./starter acp --session %s   (set-ups to paste: docs/acp.md)\n", d.session)
	fmt.Fprintf(d.out, "  2. open the deck:     go run ./starter web   (then the URL and token it prints)\n")
	if uiURL != "" {
		q := url.QueryEscape(fmt.Sprintf("WorkflowType = '%s'", signals.SessionWorkflowType))
		fmt.Fprintf(d.out, "  3. tacp's sessions in the Temporal UI: %s/namespaces/default/workflows?query=%s\n", uiURL, q)
	}
	fmt.Fprintf(d.out, "Or drive this session:\n  go run ./starter prompt --session %s \"/chunks 5 every 200ms\"\n  go run ./starter status --session %s\n", d.session, d.session)
}

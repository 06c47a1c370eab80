package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tacp-dev/tacp/codec"
	"github.com/tacp-dev/tacp/devserver"
	"github.com/tacp-dev/tacp/internal/tacpworker"
	"github.com/tacp-dev/tacp/signals"
)

// cmdDemo starts the embedded Temporal server and Web UI, a worker with the built-in test
// agent, and a session; it runs a prompt, a rejected steer and a cancel, prints the
// transcript and the UI's address, and stays up until interrupted (or exits with --exit).
func cmdDemo(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	dataDir := tacpworker.DefaultDataDir()
	db := fs.String("dev.db", filepath.Join(dataDir, "dev.db"), "SQLite file of the embedded server")
	port := fs.Int("dev.port", 7233, "gRPC port of the embedded server (0: any free port)")
	uiPort := fs.Int("dev.ui-port", 8233, "Web UI port (0: no UI)")
	data := fs.String("data-dir", dataDir, "directory for workspaces and agent transcripts")
	exit := fs.Bool("exit", false, "exit when the demo script is done instead of staying up")
	if !e.parse(fs, args, false) {
		return exitError
	}
	step := func(format string, args ...any) { fmt.Fprintf(e.out, "\n== "+format+"\n", args...) }

	step("starting the embedded Temporal server (%s)", *db)
	srv, err := devserver.Start(ctx, devserver.Options{DBPath: *db, Port: *port, UIPort: *uiPort})
	if err != nil {
		return e.fail(err)
	}
	defer func() { _ = srv.Stop() }()
	dc, err := codec.DataConverterFromEnv()
	if err != nil {
		return e.fail(err)
	}
	tc, err := srv.NewClient(ctx, client.Options{DataConverter: dc})
	if err != nil {
		return e.fail(err)
	}
	e.tc, e.c = tc, signals.NewClient(tc, e.queue)
	// The demo is its own worker's operator: --agent is the command of its default profile.
	w, err := tacpworker.Start(tc, tacpworker.Options{TaskQueue: e.queue, Agent: e.agent, DataDir: *data, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return e.fail(err)
	}
	defer w.Stop()
	if e.session == "" {
		e.session = fmt.Sprintf("demo-%d", time.Now().Unix())
	}
	fmt.Fprintf(e.out, "server %s, worker on task queue %s, session %s\n", srv.HostPort(), e.queue, e.session)

	step("1. a prompt: the test agent streams its reply through the session workflow")
	cfg := signals.SessionConfig{SessionID: e.session, Workspace: e.workspace}
	res, err := e.c.Prompt(ctx, cfg, signals.PromptRequest{Text: "Hello from tacp! Every chunk of this reply was journaled by a Temporal workflow before you saw it."})
	if err != nil {
		return e.fail(err)
	}
	e.follow(ctx, 0, res.TurnID)

	step("2. a long turn (/sleep 30s), steered: a stale token is refused, the live one delivered")
	st, _ := e.c.Status(ctx, e.session)
	res, err = e.c.Prompt(ctx, cfg, signals.PromptRequest{Text: "/sleep 30s"})
	if err != nil {
		return e.fail(err)
	}
	for st.State != signals.StateRunning || st.TurnID != res.TurnID || st.SteerToken == "" {
		time.Sleep(50 * time.Millisecond)
		if st, err = e.c.Status(ctx, e.session); err != nil {
			return e.fail(err)
		}
	}
	for _, token := range []string{"1", st.SteerToken} {
		fmt.Fprintf(e.out, "steer expecting turn %s: ", token)
		sr, err := e.c.Steer(ctx, e.session, signals.SteerRequest{Text: "focus on the tests", ExpectedTurnID: token, ClientMsgID: signals.NewID()})
		if rej, ok := signals.AsRejection(err); ok {
			fmt.Fprintf(e.out, "rejected %s (%s)\n", rej.Type, rej.Message)
		} else if err != nil {
			return e.fail(err)
		} else {
			fmt.Fprintf(e.out, "%s, next token %s\n", sr.Outcome, sr.NextExpectedTurnID)
		}
	}

	step("3. cancel the running turn")
	time.Sleep(time.Second)
	if c, err := e.c.Cancel(ctx, e.session, signals.CancelRequest{}); err != nil {
		return e.fail(err)
	} else {
		fmt.Fprintln(e.out, "cancel:", c.Outcome)
	}
	e.follow(ctx, 0, res.TurnID)

	step("4. the transcript, replayed from the journal")
	e.replay(ctx)

	step("done")
	if srv.UIURL() != "" {
		fmt.Fprintf(e.out, "Temporal UI: %s/namespaces/default/workflows/%s\n", srv.UIURL(), signals.SessionWorkflowID(e.session))
	}
	fmt.Fprintf(e.out, "Try, in another terminal:\n  go run ./starter prompt --session %s \"/chunks 5 every 200ms\"\n  go run ./starter status --session %s\n", e.session, e.session)
	if *exit {
		return exitOK
	}
	fmt.Fprintln(e.out, "The server and worker stay up until Ctrl-C.")
	<-ctx.Done()
	return exitOK
}

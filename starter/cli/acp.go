package cli

// starter acp: tacp's ACP face (gateway/) on this process's stdio, for an editor to start
// as its agent. Stdout carries JSON-RPC only; diagnostics go to stderr. With --remote it
// holds no Temporal connection: it relays the editor's ACP to a deck's /acp over a
// WebSocket (remote/), reconnecting and resuming by journal seq.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/gateway"
	"github.com/tacp-dev/tacp/internal/dial"
	"github.com/tacp-dev/tacp/remote"
	"github.com/tacp-dev/tacp/signals"
)

func cmdACP(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	observe := fs.Bool("observe", false, "attach as an observer: see everything, prompt, steer, cancel and answer nothing")
	caps := fs.String("prompt-capabilities", "", "override what initialize advertises (by default what the worker learned of its agent) of the content blocks besides text and resource links the agent takes: a comma list of image, audio, embedded_context, or none")
	logLevel := fs.String("log.level", "warn", "stderr log level: debug, info, warn, error")
	remoteURL := fs.String("remote", "", "a deck's ACP endpoint (ws[s]://host:port/acp): relay to it over a WebSocket instead of dialing Temporal")
	token := fs.String("token", "", "with --remote: the deck token (an observer token observes)")
	maxBackoff := fs.Duration("remote.max-backoff", 5*time.Second, "with --remote: the longest wait between reconnection attempts")
	if !e.parse(fs, args, false) {
		return exitError
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return e.fail(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if *remoteURL != "" {
		if *observe || *caps != "" || e.session != "" || e.agent != "" || e.workspace != "" {
			// The deck's gateway decides these (starter web --agent, --workspace) and the
			// token decides the role.
			logger.Warn("--observe, --prompt-capabilities, --session, --agent and --workspace are the deck's with --remote; ignored")
		}
		in, out := acpWire(os.Stdin, os.Stdout)
		err := remote.Run(ctx, in, out, remote.Options{URL: *remoteURL, Token: *token, MaxBackoff: *maxBackoff, Logger: logger})
		if err != nil {
			return e.fail(err)
		}
		return exitOK
	}
	pc, err := promptCapabilities(*caps)
	if err != nil {
		return e.fail(err)
	}
	if e.session != "" {
		if err := signals.ValidateSessionID(e.session); err != nil {
			return e.fail(err)
		}
	}
	tc, err := dial.Client(ctx, e.address, e.namespace, logger)
	if err != nil {
		return e.fail(err)
	}
	e.tc = tc
	g := gateway.New(gateway.Options{
		Client:             e.client(tc),
		Session:            e.session,
		Observe:            *observe,
		Agent:              e.agent,
		Workspace:          e.workspace,
		PromptCapabilities: pc,
		Logger:             logger,
	})
	in, out := acpWire(os.Stdin, os.Stdout)
	if err := g.Serve(ctx, in, out); err != nil {
		return e.fail(err)
	}
	return exitOK
}

// promptCapabilities reads --prompt-capabilities: nil (what the worker learned) when empty.
func promptCapabilities(list string) (*acp.PromptCapabilities, error) {
	if list == "" {
		return nil, nil
	}
	pc := &acp.PromptCapabilities{}
	for _, c := range strings.Split(list, ",") {
		switch strings.TrimSpace(c) {
		case "", "none":
		case "image":
			pc.Image = true
		case "audio":
			pc.Audio = true
		case "embedded_context":
			pc.EmbeddedContext = true
		default:
			return nil, fmt.Errorf("--prompt-capabilities: unknown %q (want image, audio, embedded_context or none)", c)
		}
	}
	return pc, nil
}

// acpWire is the editor's end of `starter acp` as the command serves it: stdin and stdout
// as they are, except in a build with the schemacheck tag (acp_schemacheck.go), where what
// tacp sends the editor is held to the ACP schema.
var acpWire = func(in io.Reader, out io.Writer) (io.Reader, io.Writer) { return in, out }

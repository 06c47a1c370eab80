package main

// starter acp: tacp's ACP face (gateway/) on this process's stdio, for an editor to start
// as its agent. Stdout carries JSON-RPC only; diagnostics go to stderr.

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/gateway"
	"github.com/tacp-dev/tacp/internal/app"
	"github.com/tacp-dev/tacp/signals"
)

func cmdACP(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	observe := fs.Bool("observe", false, "attach as an observer: see everything, prompt, steer, cancel and answer nothing")
	caps := fs.String("prompt-capabilities", "", "content blocks besides text and resource links the agent takes: a comma list of image, audio, embedded_context")
	logLevel := fs.String("log.level", "warn", "stderr log level: debug, info, warn, error")
	if !e.parse(fs, args, false) {
		return exitError
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return e.fail(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	pc, err := promptCapabilities(*caps)
	if err != nil {
		return e.fail(err)
	}
	if e.session != "" {
		if err := signals.ValidateSessionID(e.session); err != nil {
			return e.fail(err)
		}
	}
	tc, err := app.Dial(ctx, e.address, e.namespace, logger)
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
	if err := g.Serve(ctx, os.Stdin, os.Stdout); err != nil {
		return e.fail(err)
	}
	return exitOK
}

func promptCapabilities(list string) (acp.PromptCapabilities, error) {
	var pc acp.PromptCapabilities
	for _, c := range strings.Split(list, ",") {
		switch strings.TrimSpace(c) {
		case "":
		case "image":
			pc.Image = true
		case "audio":
			pc.Audio = true
		case "embedded_context":
			pc.EmbeddedContext = true
		default:
			return pc, fmt.Errorf("--prompt-capabilities: unknown %q (want image, audio, embedded_context)", c)
		}
	}
	return pc, nil
}

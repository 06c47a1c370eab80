package e2e

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/gateway"
	"github.com/tacp-dev/tacp/signals"
)

// An editor left open on an idle session costs no renewals: its viewer lease lapses once
// the session has no work, and the next turn, whoever prompts it, takes it again at once
// and keeps it while the turn runs (gateway/leases.go). A 3 s lease stands for the default
// 2 minutes.
func TestAnIdleEditorLetsItsLeaseLapseAndATurnTakesItAgain(t *testing.T) {
	t.Parallel()
	gw := gateway.New(gateway.Options{Client: sc, Agent: gatewayAgent(), IgnoreClientCwd: true, Lease: 3 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	toGW, fromClient := io.Pipe()
	toClient, fromGW := io.Pipe()
	go func() { _ = gw.Serve(ctx, toGW, fromGW) }()
	p := &acpPeer{t: t}
	p.conn = acp.NewClientSideConnection(p, fromClient, toClient)
	_, err := p.conn.Initialize(ctxFor(t, 30*time.Second), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	require.NoError(t, err)
	id := p.newSession()
	_, err = p.prompt(id, "/chunks 1")
	require.NoError(t, err)

	viewers := func() []string {
		st, err := sc.Status(ctxFor(t, 10*time.Second), id)
		require.NoError(t, err)
		var out []string
		for _, v := range st.Viewers {
			out = append(out, v.ViewerID)
		}
		return out
	}
	require.Eventually(t, func() bool { return len(viewers()) == 0 }, time.Minute, 100*time.Millisecond,
		"the idle session's lease lapses: nothing renews it")
	idle, err := sc.Actions(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)

	// Another client's turn: the editor sees it start and takes its lease again.
	res, err := sc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "/chunks 40 every 150ms", ClientMessageID: signals.NewID()})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(viewers()) == 1 }, 30*time.Second, 50*time.Millisecond,
		"turn %d's start renews the editor's lease", res.TurnID)
	evs := turnEnd(t, id, res.TurnID)
	require.Positive(t, countKindIn(evs, signals.EventAgentUpdate, res.TurnID))
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return slices.ContainsFunc(p.updates, func(n acp.SessionNotification) bool { return n.Update.AgentMessageChunk != nil })
	}, 30*time.Second, 50*time.Millisecond, "the editor got the turn's chunks")
	ran, err := sc.Actions(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	// While the 6 s turn ran the lease was renewed each second: several updates, not one.
	require.GreaterOrEqual(t, ran.Updates-idle.Updates, int64(3), "the prompt, the renewal at its start, and renewals while it ran")
}

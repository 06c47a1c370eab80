package e2e

// Every message tacp's ACP face sends, checked against the pinned ACP v1 schema
// (testagent/acpschema: the official TypeScript SDK 2.4.0's, which its clients hold what
// an agent sends to). A client on acp-go-sdk drives `starter acp` through a representative
// session — initialize, session/new, streaming, a permission request, a question, set_mode,
// session/list, a second client's session/load, a cancelled turn — over pipes that record
// every line both ways; a message the schema rejects fails the test.

import (
	"bufio"
	"context"
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/testagent/acpschema"
)

// startCheckedACP is startAskedACPWith whose messages, both ways, pass through conv.
func startCheckedACP(t *testing.T, conv *acpschema.Conversation, caps acp.ClientCapabilities, args ...string) *askedPeer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := starterCmd(ctx, append([]string{"acp"}, args...)...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &testLog{t: t, prefix: "starter acp: "}
	require.NoError(t, cmd.Start())
	p := &askedPeer{acpPeer: &acpPeer{t: t, cmd: cmd}, withdrawn: make(chan struct{})}
	// What the client writes is observed line by line on its way in; what tacp writes, on
	// its way out, before the client reads it.
	inR, inW := io.Pipe()
	go func() {
		r := bufio.NewReaderSize(inR, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				conv.Observe(acpschema.FromClient, line)
				if _, werr := stdin.Write(line); werr != nil {
					return
				}
			}
			if err != nil {
				_ = stdin.Close()
				return
			}
		}
	}()
	outR, outW := io.Pipe()
	go func() {
		r := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				conv.Observe(acpschema.FromAgent, line)
				if _, werr := outW.Write(line); werr != nil {
					return
				}
			}
			if err != nil {
				_ = outW.CloseWithError(err)
				return
			}
		}
	}()
	p.conn = acp.NewClientSideConnection(p, inW, outR)
	t.Cleanup(func() {
		_ = inW.Close()
		waitOrCancel(cmd, cancel)
	})
	_, err = p.conn.Initialize(ctxFor(t, 30*time.Second), acp.InitializeRequest{
		ProtocolVersion: acp.ProtocolVersionNumber, ClientCapabilities: caps,
		ClientInfo: &acp.Implementation{Name: "schema-check", Version: "1.0"},
	})
	require.NoError(t, err)
	return p
}

func TestEveryMessageOfTheACPFaceHoldsToTheSchema(t *testing.T) {
	t.Parallel()
	s, err := acpschema.LoadV1()
	require.NoError(t, err)
	conv := &acpschema.Conversation{Schema: s, Checked: acpschema.FromAgent}
	caps := acp.ClientCapabilities{Elicitation: &acp.ElicitationCapabilities{Form: &acp.ElicitationFormCapabilities{}, Url: &acp.ElicitationUrlCapabilities{}}}
	p := startCheckedACP(t, conv, caps, "--agent", profileSettings)
	p.answer = &acp.UnstableCreateElicitationResponse{Accept: &acp.UnstableCreateElicitationAccept{Action: "accept", Content: map[string]any{"answer": "dev"}}}
	p.acpPeer.answer = func(r acp.RequestPermissionRequest) acp.RequestPermissionResponse {
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(r.Options[0].OptionId)}
	}
	ctx := ctxFor(t, 3*time.Minute)

	id := p.newSession()
	for _, prompt := range []string{"/chunks 3", "/permission edit", "/elicit-form Which branch?", "/elicit-url https://example.invalid/sign-in", "/usage"} {
		res, err := p.prompt(id, prompt)
		require.NoError(t, err, prompt)
		require.Equal(t, acp.StopReasonEndTurn, res.StopReason, prompt)
	}
	_, err = p.conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: acp.SessionId(id), ModeId: "plan"})
	require.NoError(t, err)
	_, err = p.conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: acp.SessionId(id), ModeId: "no-such-mode"})
	require.Error(t, err, "an error answer is checked too")
	cwd := editorCwd()
	list, err := p.conn.ListSessions(ctx, acp.ListSessionsRequest{Cwd: &cwd})
	require.NoError(t, err)
	require.NotEmpty(t, list.Sessions)
	_, err = p.conn.ListSessions(ctx, acp.ListSessionsRequest{})
	require.NoError(t, err)

	// A second client loads the session (the whole journal replayed) and watches a turn
	// that the first cancels.
	q := startCheckedACP(t, conv, caps, "--agent", profileSettings)
	require.NoError(t, q.load(id))
	done := make(chan acp.PromptResponse, 1)
	go func() {
		res, err := p.prompt(id, "/sleep 30s")
		if err == nil {
			done <- res
		}
		close(done)
	}()
	waitFor(t, id, func(ev signals.Event) bool {
		return ev.Kind == signals.EventAgentUpdate && strings.Contains(string(ev.Data), `"."`)
	})
	require.NoError(t, p.conn.Cancel(ctx, acp.CancelNotification{SessionId: acp.SessionId(id)}))
	select {
	case res := <-done:
		require.Equal(t, acp.StopReasonCancelled, res.StopReason)
	case <-time.After(time.Minute):
		t.Fatal("the cancelled turn never answered")
	}
	_, err = q.prompt("acp-no-such-session", "hello")
	require.Error(t, err)

	counts := conv.CheckedCounts()
	methods := make([]string, 0, len(counts))
	total := 0
	for m, n := range counts {
		methods = append(methods, m)
		total += n
	}
	sort.Strings(methods)
	t.Logf("checked %d messages of tacp's against %s: %v", total, acpschema.PinnedVersion, counts)
	for _, m := range []string{"initialize result", "session/new result", "session/update", "session/request_permission", "elicitation/create", "session/set_mode result", "session/list result", "session/load result", "session/prompt result"} {
		require.Contains(t, methods, m, "the flow has a %s", m)
	}
	for _, v := range conv.Violations() {
		t.Errorf("schema violation: %s", v)
	}
}

package e2e

// A question through the ACP face: two editors attached to the same Claude session through
// `starter acp`, both advertising form elicitation, are both asked (elicitation/create); the
// first answer wins and reaches the model, and the other's copy is withdrawn. An editor that
// does not advertise elicitation is never asked.

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/internal/testkit/fakemodel"
	"github.com/tacp-dev/tacp/signals"
)

// askedPeer is an ACP client that advertises elicitation: answer decides its questions
// (nil: they wait until withdrawn).
type askedPeer struct {
	*acpPeer
	qmu       sync.Mutex
	questions []acp.UnstableCreateElicitationRequest
	answer    *acp.UnstableCreateElicitationResponse
	withdrawn chan struct{}
	completed []string // the elicitation/complete notifications' ids
}

func (p *askedPeer) UnstableCompleteElicitation(_ context.Context, n acp.UnstableCompleteElicitationNotification) error {
	p.qmu.Lock()
	p.completed = append(p.completed, string(n.ElicitationId))
	p.qmu.Unlock()
	return nil
}

func (p *askedPeer) UnstableCreateElicitation(ctx context.Context, r acp.UnstableCreateElicitationRequest) (acp.UnstableCreateElicitationResponse, error) {
	p.qmu.Lock()
	p.questions = append(p.questions, r)
	ans := p.answer
	p.qmu.Unlock()
	if ans != nil {
		return *ans, nil
	}
	<-ctx.Done()
	close(p.withdrawn)
	return acp.UnstableCreateElicitationResponse{}, ctx.Err()
}

func (p *askedPeer) asked() int {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	return len(p.questions)
}

// startAskedACP is startACP for a client named name that advertises elicitation (form) when
// elicit is set.
func startAskedACP(t *testing.T, name string, elicit bool, args ...string) *askedPeer {
	t.Helper()
	caps := acp.ClientCapabilities{}
	if elicit {
		caps.Elicitation = &acp.ElicitationCapabilities{Form: &acp.ElicitationFormCapabilities{}}
	}
	return startAskedACPWith(t, name, caps, args...)
}

// startAskedACPWith is startAskedACP with the client's capabilities as given.
func startAskedACPWith(t *testing.T, name string, caps acp.ClientCapabilities, args ...string) *askedPeer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := starterCmd(ctx, append([]string{"acp"}, args...)...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &testLog{t: t, prefix: "starter acp " + name + ": "}
	require.NoError(t, cmd.Start())
	p := &askedPeer{acpPeer: &acpPeer{t: t, cmd: cmd}, withdrawn: make(chan struct{})}
	p.conn = acp.NewClientSideConnection(p, stdin, stdout)
	t.Cleanup(func() {
		_ = stdin.Close()
		waitOrCancel(cmd, cancel)
	})
	_, err = p.conn.Initialize(ctxFor(t, 30*time.Second), acp.InitializeRequest{
		ProtocolVersion: acp.ProtocolVersionNumber, ClientCapabilities: caps,
		ClientInfo: &acp.Implementation{Name: name, Version: "1.0"},
	})
	require.NoError(t, err)
	return p
}

func waitOrCancel(cmd *exec.Cmd, cancel context.CancelFunc) {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cancel()
		<-done
	}
	cancel()
}

func TestRealAgentClaudeQuestionReachesEveryEditorFirstAnswerWins(t *testing.T) {
	w := startRealAgentWorker(t, fakemodel.Claude)
	queue := w.sc.TaskQueue
	id := session(t)
	turn := w.prompt(t, signals.SessionConfig{SessionID: id}, "tool: ask Which branch? | main | dev")
	q := elicited(t, id, turn)

	zed := startAskedACP(t, "Zed", true, "--task-queue", queue)
	zed.answer = &acp.UnstableCreateElicitationResponse{Accept: &acp.UnstableCreateElicitationAccept{Action: "accept", Content: map[string]any{"question_0": "dev"}}}
	other := startAskedACP(t, "Other", true, "--task-queue", queue)
	plain := startAskedACP(t, "Plain", false, "--task-queue", queue)
	// The slow editor first: it is asked and holds the question until it is withdrawn.
	require.NoError(t, other.load(id))
	require.NoError(t, plain.load(id))
	require.Eventually(t, func() bool { return other.asked() == 1 }, time.Minute, 20*time.Millisecond, "the second editor is asked too")
	require.NoError(t, zed.load(id))

	evs := endedWith(t, id, turn, "end_turn")
	select {
	case <-other.withdrawn:
	case <-time.After(time.Minute):
		t.Fatal("the other editor's copy of the question was never withdrawn")
	}
	require.Equal(t, 1, zed.asked())
	require.Equal(t, 0, plain.asked(), "an editor that does not advertise elicitation is not asked")
	require.Equal(t, 1, countKindIn(evs, signals.EventElicitationResolved, turn))
	require.Contains(t, journalDump(evs), `"answered_by":"acp:Zed 1.0 (viewer acp-`, "who answered: the editor's clientInfo")
	last := w.fm.MainRequests()[len(w.fm.MainRequests())-1]
	require.True(t, last.Contains("tool", "dev"), "the answer reached the model")
	_ = q
}

// A url elicitation (an agent's sign-in in a browser): the editor that takes url questions
// is asked to open the page, answers, and is told when the agent completed it
// (elicitation/complete, journaled as elicitation.completed).
func TestAURLQuestionIsOpenedAnsweredAndCompletedInTheEditor(t *testing.T) {
	t.Parallel()
	p := startAskedACPWith(t, "zed", acp.ClientCapabilities{Elicitation: &acp.ElicitationCapabilities{Url: &acp.ElicitationUrlCapabilities{}}})
	p.answer = &acp.UnstableCreateElicitationResponse{Accept: &acp.UnstableCreateElicitationAccept{Action: "accept"}}
	ctx := ctxFor(t, time.Minute)
	sess, err := p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: editorCwd(), McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	_, err = p.conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("/elicit-url https://example.invalid/sign-in")}})
	require.NoError(t, err)
	id := string(sess.SessionId)
	// The runner's report of the completion and the turn's end race: wait for the event.
	waitFor(t, id, func(ev signals.Event) bool { return ev.Kind == signals.EventElicitationCompleted })
	evs := allEvents(t, id) // the turn ended before Prompt answered
	require.Contains(t, strings.Join(agentTexts(t, evs, 1), ""), "url elicitation: accept, completed")
	var asked signals.ElicitationRequestedData
	var done signals.ElicitationCompletedData
	for _, ev := range evs {
		switch ev.Kind {
		case signals.EventElicitationRequested:
			require.NoError(t, json.Unmarshal(ev.Data, &asked))
		case signals.EventElicitationCompleted:
			require.NoError(t, json.Unmarshal(ev.Data, &done))
		}
	}
	require.Equal(t, signals.ElicitationURL, asked.Mode)
	require.Equal(t, "https://example.invalid/sign-in", asked.URL)
	require.Equal(t, asked.ElicitationID, done.ElicitationID)
	require.Equal(t, asked.RequestID, done.RequestID)
	require.Eventually(t, func() bool {
		p.qmu.Lock()
		defer p.qmu.Unlock()
		return len(p.completed) == 1 && p.completed[0] == asked.RequestID
	}, 30*time.Second, 20*time.Millisecond, "the editor was told the agent completed it")
	require.Equal(t, 1, p.asked())
	require.Equal(t, "https://example.invalid/sign-in", p.questions[0].Url.Url)
}

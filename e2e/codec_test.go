package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tacp-dev/tacp/codec"
	"github.com/tacp-dev/tacp/devserver"
	"github.com/tacp-dev/tacp/internal/freeport"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
	sessioncore "github.com/tacp-dev/tacp/workflows/session"
)

func newKeys(t *testing.T, id string) codec.Keys {
	t.Helper()
	keys, _ := newKeySpec(t, id)
	return keys
}

// newKeySpec returns a fresh keyring of one key and its TACP_CODEC_KEYS spelling.
func newKeySpec(t *testing.T, id string) (codec.Keys, string) {
	t.Helper()
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	spec := id + ":" + base64.StdEncoding.EncodeToString(key)
	keys, err := codec.ParseKeys(spec)
	require.NoError(t, err)
	return keys, spec
}

// rawHistory returns a session's history as protojson, read by a client without the codec.
func rawHistory(t *testing.T, id string) (string, []*commonpb.Payload) {
	t.Helper()
	iter := tc.GetWorkflowHistory(ctxFor(t, 10*time.Second), signals.SessionWorkflowID(id), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var sb strings.Builder
	var updates []*commonpb.Payload
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		b, err := protojson.Marshal(ev)
		require.NoError(t, err)
		sb.Write(b)
		if a := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil {
			updates = append(updates, a.GetAcceptedRequest().GetInput().GetArgs().GetPayloads()...)
		}
	}
	return sb.String(), updates
}

func TestEncryptedPayloadsHideTranscriptsFromTheRawHistory(t *testing.T) {
	t.Parallel()
	keys := newKeys(t, "k1")
	cc, err := srv.NewClient(ctxFor(t, 10*time.Second), client.Options{DataConverter: codec.DataConverter(keys)})
	require.NoError(t, err)
	t.Cleanup(cc.Close)
	ctx := ctxFor(t, 60*time.Second)
	ec, cfg := confidentialSession(t, ctx, cc, testAgentCmd("-steering"))
	id := cfg.SessionID
	_, err = ec.Prompt(ctx, cfg, signals.PromptRequest{Text: "/sleep 1s"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := ec.Steer(ctx, id, signals.SteerRequest{Text: "XYZZY-STEER", ExpectedTurnID: "2"})
		return err == nil
	}, 30*time.Second, 50*time.Millisecond)
	waitEncrypted(t, ec, id, 2)
	_, err = ec.Prompt(ctx, cfg, signals.PromptRequest{Text: "/permission edit"})
	require.NoError(t, err)
	var req signals.PermissionRequestedData
	require.Eventually(t, func() bool {
		st, err := ec.Status(ctx, id)
		require.NoError(t, err)
		if len(st.PendingPermissions) == 0 {
			return false
		}
		req.RequestID = st.PendingPermissions[0].RequestID
		return true
	}, 30*time.Second, 50*time.Millisecond)
	// What the Temporal UI shows of the session, decoded as its codec server decodes it,
	// holds no word of the prompt, the title or the agent's request: the UI renders it
	// through its own server with the text in a URL.
	shown := uiMetadata(t, cc, codec.DataConverter(keys), id)
	require.Contains(t, shown, "waiting for approval of")
	for _, secret := range []string{"XYZZY", "README.md"} {
		require.NotContains(t, shown, secret, "the Temporal UI's metadata shows %q", secret)
	}
	_, err = ec.PermissionRespond(ctx, id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: "allow"})
	require.NoError(t, err)
	waitEncrypted(t, ec, id, 3)

	raw, updates := rawHistory(t, id)
	for _, secret := range []string{"XYZZY", "README.md", "permission: selected"} {
		require.NotContains(t, raw, secret, "the raw history shows %q", secret)
	}
	// A client without the key cannot read the journal.
	_, err = sc.Events(ctx, id, 0, 0)
	require.Error(t, err)
	// A client with another key under the same id is told so.
	wrong, err := srv.NewClient(ctx, client.Options{DataConverter: codec.DataConverter(newKeys(t, "k1"))})
	require.NoError(t, err)
	defer wrong.Close()
	_, err = tacpclient.NewClient(wrong, ec.TaskQueue).Status(ctx, id)
	require.ErrorContains(t, err, "failed to decrypt")

	// Through the codec server (as the Temporal UI uses it) the prompt decodes.
	cs := httptest.NewServer(codec.NewServer(keys, "s3cret", nil))
	defer cs.Close()
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: updates[:1]})
	require.NoError(t, err)
	post := func(token string) *http.Response {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, cs.URL+"/decode", bytes.NewReader(body))
		require.NoError(t, err)
		r.Header.Set("Content-Type", "application/json")
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(r)
		require.NoError(t, err)
		return resp
	}
	resp := post("")
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp = post("s3cret")
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var decoded commonpb.Payloads
	require.NoError(t, protojson.Unmarshal(out, &decoded))
	require.Contains(t, string(decoded.GetPayloads()[0].GetData()), "XYZZY-PROMPT")
}

// uiMetadata is what the Temporal UI shows of session id beside its payloads, decoded with
// c's codec: its static summary and details, and its Current Details.
func uiMetadata(t *testing.T, c client.Client, dc converter.DataConverter, id string) string {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	desc, err := c.DescribeWorkflowExecution(ctx, signals.SessionWorkflowID(id), "")
	require.NoError(t, err)
	md := desc.GetExecutionConfig().GetUserMetadata()
	var summary, details string
	require.NoError(t, dc.FromPayload(md.GetSummary(), &summary))
	require.NoError(t, dc.FromPayload(md.GetDetails(), &details))
	v, err := c.QueryWorkflow(ctx, signals.SessionWorkflowID(id), "", "__temporal_workflow_metadata")
	require.NoError(t, err)
	var wm sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&wm))
	require.Contains(t, summary, id)
	return summary + "\n" + details + "\n" + wm.GetCurrentDetails()
}

// waitEncrypted waits for turn's terminal event through the codec client.
func waitEncrypted(t *testing.T, c *tacpclient.Client, id string, turn int64) {
	t.Helper()
	err := c.Watch(ctxFor(t, 60*time.Second), id, 0, func(ev signals.Event) bool {
		return !(ev.TurnID == turn && signals.IsTerminal(ev.Kind))
	})
	require.NoError(t, err)
}

// TestTemporalUIDecodesAnEncryptedSessionThroughTheCodecServer is the documented set-up for
// the Temporal UI: `starter codec-server` without a token (loopback, the UI's origin only)
// as the UI's codec endpoint. In headless Chromium the session's page shows its input
// decoded, through the codec server, and no request the page makes carries the prompt, the
// title or the agent's request in its URL.
func TestTemporalUIDecodesAnEncryptedSessionThroughTheCodecServer(t *testing.T) {
	t.Parallel()
	bctx := browser(t)
	keys, spec := newKeySpec(t, "k1")
	ports, err := freeport.Take("127.0.0.1", 2)
	require.NoError(t, err)
	uiURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	codecURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])

	ctx := ctxFor(t, 3*time.Minute)
	cs := exec.CommandContext(ctx, starterBin, "codec-server", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[1]), "--origins", uiURL)
	cs.Env = append(os.Environ(), codec.EnvKeys+"="+spec)
	var csErr bytes.Buffer
	cs.Stderr = &csErr
	require.NoError(t, cs.Start())
	t.Cleanup(func() { _ = cs.Process.Kill(); _ = cs.Wait() })
	require.Eventually(t, func() bool {
		resp, err := http.Get(codecURL + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "the codec server listens: %s", &csErr)

	ui, err := devserver.Start(ctx, devserver.Options{UIPort: ports[0], UICodecEndpoint: codecURL})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ui.Stop() })
	cc, err := ui.NewClient(ctx, client.Options{DataConverter: codec.DataConverter(keys)})
	require.NoError(t, err)
	t.Cleanup(cc.Close)
	ec, cfg := confidentialSession(t, ctx, cc, testAgentCmd())
	id := cfg.SessionID
	_, err = ec.Prompt(ctx, cfg, signals.PromptRequest{Text: "/permission edit"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := ec.Status(ctx, id)
		return err == nil && len(st.PendingPermissions) == 1
	}, 30*time.Second, 50*time.Millisecond)

	var mu sync.Mutex
	var urls []string
	require.NoError(t, chromedp.Listen(bctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			urls = append(urls, e.Request.URL)
			mu.Unlock()
		}
	}))
	_, err = chromedp.Run(bctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{})
		return err
	}))
	require.NoError(t, err)

	d, err := cc.DescribeWorkflowExecution(ctx, signals.SessionWorkflowID(id), "")
	require.NoError(t, err)
	run := uiURL + "/namespaces/" + ui.Namespace() + "/workflows/" + signals.SessionWorkflowID(id) + "/" + d.WorkflowExecutionInfo.Execution.RunId
	// The workflow's input, decoded: the session's config names its policy, which the raw
	// (encrypted) history does not show.
	uiShows(t, bctx, run+"/history", `"policy": "ask_always"`)
	uiShows(t, bctx, run+"/user-metadata", "waiting for approval of", "suspended")

	mu.Lock()
	defer mu.Unlock()
	decoded := false
	for _, u := range urls {
		plain, err := neturl.QueryUnescape(u)
		if err != nil {
			plain = u
		}
		for _, secret := range []string{"XYZZY", "README.md"} {
			require.NotContains(t, plain, secret, "the page sent %q in a URL: %s", secret, u)
		}
		decoded = decoded || strings.HasPrefix(u, codecURL+"/decode")
	}
	require.True(t, decoded, "the page decoded through the codec server; it asked:\n%s", strings.Join(urls, "\n"))
}

// uiShows opens url in the browser and waits until the page's text holds every want.
func uiShows(t *testing.T, ctx context.Context, url string, want ...string) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Navigate(url))
	require.NoError(t, err)
	var text string
	deadline := time.Now().Add(60 * time.Second)
	for {
		text, err = chromedp.Run(ctx, chromedp.Evaluate[string](pageText))
		if err == nil && containsAll(text, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the UI at %s does not show %q; it shows:\n%s", url, want, text)
		}
		// The page renders asynchronously: wait for its next state.
		_, _ = chromedp.Run(ctx, chromedp.Poll[bool](`new Promise((r) => setTimeout(() => r(true), 250))`, chromedp.WithPollingTimeout(time.Second)))
	}
}

func containsAll(s string, want []string) bool {
	for _, w := range want {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// confidentialSession runs a worker of cc with the Confidential build and a session on it
// whose first turn has ended and whose title is set, both with marker text (XYZZY-PROMPT,
// XYZZY-TITLE) that nothing unencrypted may show; it returns a confidential client of cc and
// the session's config, asking policy.
func confidentialSession(t *testing.T, ctx context.Context, cc client.Client, agent string) (*tacpclient.Client, signals.SessionConfig) {
	t.Helper()
	_, ec := extraWorker(t, cc, tacpworker.Options{Agent: agent, Build: sessioncore.Build{Confidential: true}})
	ec.Confidential = true
	cfg := signals.SessionConfig{SessionID: session(t), Policy: "ask_always"}
	_, err := ec.Prompt(ctx, cfg, signals.PromptRequest{Text: "/echo\nXYZZY-PROMPT"})
	require.NoError(t, err)
	waitEncrypted(t, ec, cfg.SessionID, 1)
	_, err = tacpclient.Call(ctx, ec, cfg.SessionID, signals.Updates.SetTitle, signals.SetTitleRequest{Title: "XYZZY-TITLE"})
	require.NoError(t, err)
	return ec, cfg
}

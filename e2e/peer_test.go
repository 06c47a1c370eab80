package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

// peerAgent is the official TypeScript ACP SDK's example agent (@agentclientprotocol/sdk
// 1.9.0 under the alias acp-sdk-examples), installed by .ci/peers with npm into .ci/npm: an
// agent nobody on this team wrote. It streams text, makes a read tool call, then asks
// permission for an edit.
func peerAgent(t *testing.T) string {
	t.Helper()
	script := requirePeer(t, "acp-sdk-examples/dist/examples/agent.js")
	node, err := exec.LookPath("node")
	require.NoError(t, err)
	return node + " " + script
}

func TestTypeScriptSDKExampleAgentEndToEnd(t *testing.T) {
	t.Parallel()
	// A worker whose default profile is the example agent.
	_, qc := extraWorker(t, tc, tacpworker.Options{Agent: peerAgent(t)})
	id := session(t)
	ctx := ctxFor(t, 60*time.Second)
	_, err := qc.Prompt(ctx, signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "please improve the config"})
	require.NoError(t, err)
	req := permissionRequested(t, id)
	kinds := map[string]string{}
	for _, o := range req.Options {
		kinds[o.Kind] = o.OptionID
	}
	require.Contains(t, kinds, "allow_once")
	res, err := qc.PermissionRespond(ctx, id, signals.PermissionRespondRequest{RequestID: req.RequestID, OptionID: kinds["allow_once"]})
	require.NoError(t, err)
	require.Equal(t, "selected", res.Resolution.Outcome)

	evs := turnEnd(t, id, 1)
	kind, data := terminalData(t, evs)
	require.Equal(t, signals.EventTurnEnded, kind)
	require.Equal(t, "end_turn", data["stop_reason"])
	text := strings.Join(agentTexts(t, evs, 1), "")
	require.Contains(t, text, "Let me start by reading some files")
	var tools int
	for _, ev := range evs {
		if ev.Kind == signals.EventAgentUpdate && strings.Contains(string(ev.Data), `"sessionUpdate":"tool_call"`) {
			tools++
		}
	}
	require.Equal(t, 2, tools, "both tool calls relayed")
	checkInvariants(t, allEvents(t, id))
}

package e2e

// Forks (contract §3 "Forks", issue 27): a new durable session whose agent starts from
// another's conversation before a turn, through the CLI (`starter fork`) and ACP's
// session/fork (`starter acp`); the fork's journal says what it was taken from and what was
// carried, and bad input starts nothing.

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

func TestForkAtTurnTwoOfThreeSeesTurnsOneAndTwoOnly(t *testing.T) {
	t.Parallel()
	origin := session(t)
	cfg := signals.SessionConfig{SessionID: origin}
	for _, text := range []string{"one-alpha", "two-bravo", "three-charlie"} {
		res := prompt(t, cfg, text)
		endedWith(t, origin, res.TurnID, "end_turn")
	}

	t.Run("ByTheCLI", func(t *testing.T) {
		fork := origin + "-fork"
		out, errOut, code := starter(t, "fork", "--session", origin, "--before-turn", "3", "--new", fork)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "forked "+origin+" into "+fork)
		res := prompt(t, signals.SessionConfig{SessionID: fork}, "/received")
		evs := endedWith(t, fork, res.TurnID, "end_turn")
		received := strings.Join(agentTexts(t, evs, res.TurnID), "")
		require.Contains(t, received, "fork of session "+origin)
		require.Contains(t, received, "one-alpha")
		require.Contains(t, received, "two-bravo")
		require.NotContains(t, received, "three-charlie", "turn 3 is after the fork")

		// The journal says what the fork was taken from and what its agent was given.
		var started signals.SessionStartedData
		var lost signals.AgentContextLostData
		for _, ev := range evs {
			switch ev.Kind {
			case signals.EventSessionStarted:
				require.NoError(t, json.Unmarshal(ev.Data, &started))
			case signals.EventAgentContextLost:
				require.NoError(t, json.Unmarshal(ev.Data, &lost))
			}
		}
		require.Equal(t, &signals.ForkOrigin{SessionID: origin, BeforeTurn: 3}, started.ForkOf)
		require.Contains(t, lost.Reason, "a fork of session "+origin)
		require.Positive(t, lost.Carried)

		// A second turn of the fork loads its own agent session: nothing carried again.
		res = prompt(t, signals.SessionConfig{SessionID: fork}, "four-delta")
		evs = endedWith(t, fork, res.TurnID, "end_turn")
		require.Equal(t, 1, countKindIn(allEvents(t, fork), signals.EventAgentContextLost, 1), "one seed, at the fork's first turn")
		require.Zero(t, countKindIn(evs, signals.EventAgentContextLost, res.TurnID))
	})

	t.Run("BadInputStartsNothing", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--session", "no-such-" + signals.NewID()}, "unknown_session"},
			{[]string{"--session", origin, "--before-turn", "9"}, "has 3 turns"},
			{[]string{"--session", origin, "--before-turn", "-1"}, "before_turn -1"},
			{[]string{"--session", origin, "--new", origin}, "exists"},
		} {
			_, errOut, code := starter(t, append([]string{"fork"}, c.args...)...)
			require.NotEqual(t, 0, code, "%v", c.args)
			require.Contains(t, errOut, c.want, "%v", c.args)
		}
	})

	t.Run("ByACPSessionFork", func(t *testing.T) {
		p := startACP(t)
		ctx := ctxFor(t, time.Minute)
		res, err := p.conn.UnstableForkSession(ctx, acp.UnstableForkSessionRequest{
			SessionId: acp.SessionId(origin), Cwd: editorCwd(), Meta: map[string]any{"tacp": map[string]any{"before_turn": 2}},
		})
		require.NoError(t, err)
		fork := string(res.SessionId)
		require.NotEqual(t, origin, fork)
		_, err = p.conn.Prompt(ctx, acp.PromptRequest{SessionId: res.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("/received")}})
		require.NoError(t, err)
		evs := allEvents(t, fork)
		received := strings.Join(agentTexts(t, evs, 1), "")
		require.Contains(t, received, "one-alpha")
		require.NotContains(t, received, "two-bravo", "before turn 2: turn 1 only")

		_, err = p.conn.UnstableForkSession(ctx, acp.UnstableForkSessionRequest{SessionId: "no-such-session", Cwd: editorCwd()})
		require.ErrorContains(t, err, "no-such-session")
	})
}

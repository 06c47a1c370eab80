package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/workflows/session"
)

// TestStreamCostTable prints what a streamed minute costs in billable actions when a person
// follows the turn and when nobody does (signals.PromptRequest.Unwatched, `starter prompt
// --no-wait`): two sessions of the test agent stream the same reply side by side, one chunk
// every 50 ms for TACP_BENCH_STREAM_SECONDS (60), and each session's actions are read from
// its history (tacpclient.Client.Actions).
//
//	TACP_BENCH=1 go test ./bench -run TestStreamCostTable -v
func TestStreamCostTable(t *testing.T) {
	if os.Getenv("TACP_BENCH") != "1" {
		t.Skip("set TACP_BENCH=1 to measure a streamed minute's actions")
	}
	secs := 60
	if v, err := strconv.Atoi(os.Getenv("TACP_BENCH_STREAM_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	const every = 50 * time.Millisecond
	chunks := int(time.Duration(secs) * time.Second / every)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second*4+2*time.Minute)
	defer cancel()

	type result struct {
		a       tacpclient.Actions
		queries int64 // asked of the session by its viewer, woken by history
		minutes float64
		err     error
	}
	stream := func(unwatched bool) (r result) {
		id := fmt.Sprintf("bench-stream-%v-%s", unwatched, signals.NewID()[:8])
		res, err := env.sc.Prompt(ctx, signals.SessionConfig{SessionID: id}, signals.PromptRequest{
			Text: fmt.Sprintf("/chunks %d every %s", chunks, every), ClientMessageID: signals.NewID(), Unwatched: unwatched,
		})
		if err != nil {
			return result{err: err}
		}
		var started, ended time.Time
		err = env.sc.Watch(ctx, id, 0, func(ev signals.Event) bool {
			if ev.TurnID == res.TurnID && ev.Kind == signals.EventTurnStarted {
				started = ev.At
			}
			if ev.TurnID == res.TurnID && signals.IsTerminal(ev.Kind) {
				ended = ev.At
				return false
			}
			return true
		})
		if err != nil {
			return result{err: err}
		}
		r.minutes = ended.Sub(started).Minutes()
		r.queries = env.queries.all(id)
		r.a, r.err = env.sc.Actions(ctx, id)
		return r
	}
	done := make(chan result, 1)
	go func() { done <- stream(true) }()
	watched := stream(false)
	unwatched := <-done
	require.NoError(t, watched.err)
	require.NoError(t, unwatched.err)

	// Activity heartbeats are billable too and no history shows them: the SDK sends at most
	// one per 80 % of the heartbeat timeout, the same for both turns.
	beats := 60 / (0.8 * session.TurnHeartbeat.Seconds())
	perMin := func(r result, n int64) string { return fmt.Sprintf("%.0f", float64(n)/r.minutes) }
	fmt.Printf("\nA streamed minute's billable actions, from each session's history (%d s, one chunk every %s; load %s)\n", secs, every, loadAvg())
	fmt.Printf("| per streamed minute | watched (a person follows) | unwatched (--no-wait) |\n|---|---|---|\n")
	row := func(name string, w, u int64) {
		fmt.Printf("| %s | %s | %s |\n", name, perMin(watched, w), perMin(unwatched, u))
	}
	row("turn_events signals", watched.a.SignalsByName[signals.SignalTurnEvents], unwatched.a.SignalsByName[signals.SignalTurnEvents])
	row("all signals", watched.a.Signals, unwatched.a.Signals)
	row("updates, activities, timers, starts", watched.a.Total-watched.a.Signals, unwatched.a.Total-unwatched.a.Signals)
	row("**actions in history**", watched.a.Total, unwatched.a.Total)
	fmt.Printf("| activity heartbeats (not in history; at most) | %.1f | %.1f |\n", beats, beats)
	row("a viewer's queries (not in history)", watched.queries, unwatched.queries)
	billed := func(r result) string {
		return fmt.Sprintf("%.0f", (float64(r.a.Total)+float64(r.queries))/r.minutes+beats)
	}
	fmt.Printf("| **billed, one viewer's queries and the heartbeats included** | %s | %s |\n", billed(watched), billed(unwatched))
	fmt.Printf("| history events | %s | %s |\n", perMin(watched, watched.a.HistoryEvents), perMin(unwatched, unwatched.a.HistoryEvents))
	fmt.Printf("(streamed %.2f / %.2f minutes; each session followed by one viewer woken by history (tacpclient.Client.Watch), which takes no lease: the unwatched one's queries are that follower's, waiting for the end, which a `--no-wait` prompt does not have)\n", watched.minutes, unwatched.minutes)
}

// TestPermissionCostTable prints what a tool call that asks a person costs: the billable
// actions in the history of a session whose one turn asks once and is answered, beside one
// whose one turn asks nothing, both under ask_always, side by side.
func TestPermissionCostTable(t *testing.T) {
	if os.Getenv("TACP_BENCH") != "1" {
		t.Skip("set TACP_BENCH=1 to measure what a permission costs")
	}
	const rounds = 5
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	turn := func(text string, ask bool) tacpclient.Actions {
		id := fmt.Sprintf("bench-permission-%v-%s", ask, signals.NewID()[:8])
		res, err := env.sc.Prompt(ctx, signals.SessionConfig{SessionID: id, Policy: "ask_always"}, signals.PromptRequest{Text: text})
		require.NoError(t, err)
		err = env.sc.Watch(ctx, id, 0, func(ev signals.Event) bool {
			if ask && ev.Kind == signals.EventPermissionRequested {
				var d signals.PermissionRequestedData
				require.NoError(t, json.Unmarshal(ev.Data, &d))
				_, err := env.sc.PermissionRespond(ctx, id, signals.PermissionRespondRequest{RequestID: d.RequestID, OptionID: "allow", ClientMsgID: signals.NewID()})
				require.NoError(t, err)
			}
			return !(ev.TurnID == res.TurnID && signals.IsTerminal(ev.Kind))
		})
		require.NoError(t, err)
		a, err := env.sc.Actions(ctx, id)
		require.NoError(t, err)
		return a
	}
	var plain, asked []tacpclient.Actions
	for range rounds {
		plain = append(plain, turn("/chunks 1", false))
		asked = append(asked, turn("/permission edit", true))
	}
	fmt.Printf("\nA tool call that asks a person, in billable actions from the session's history (%d rounds, load %s)\n", rounds, loadAvg())
	fmt.Printf("| a session's first turn | asks nothing | asks once, answered | the ask |\n|---|---|---|---|\n")
	printBeside(plain, asked, actionRows{
		{"signals", func(a tacpclient.Actions) int64 { return a.Signals }},
		{"updates", func(a tacpclient.Actions) int64 { return a.Updates }},
		{"timers", func(a tacpclient.Actions) int64 { return a.Timers }},
		{"activities", func(a tacpclient.Actions) int64 { return a.Activities }},
		{"upserts, side effects, local activities", func(a tacpclient.Actions) int64 { return a.Other }},
		{"**actions in history**", func(a tacpclient.Actions) int64 { return a.Total }},
	})
	fmt.Println("(the asking client's own queries and the agent's heartbeats are not in history)")
}

// actionRows are the rows of a table of sessions' actions, each a count read from one
// session's Actions.
type actionRows []struct {
	name string
	of   func(tacpclient.Actions) int64
}

// printBeside prints, for each row, its mean over the sessions base and over the sessions
// other (as many, side by side), and the difference.
func printBeside(base, other []tacpclient.Actions, rows actionRows) {
	n := float64(len(base))
	for _, r := range rows {
		var b, o int64
		for i := range base {
			b, o = b+r.of(base[i]), o+r.of(other[i])
		}
		fmt.Printf("| %s | %.1f | %.1f | %+.1f |\n", r.name, float64(b)/n, float64(o)/n, float64(o-b)/n)
	}
}

// TestIdleCostTable prints what an idle session costs in billable actions: after one short
// turn, a session nobody holds, beside one the real `starter acp` holds open for an editor
// (its viewer lease renewed only while the session has work: gateway/leases.go). Each idles
// for TACP_BENCH_IDLE_SECONDS (180: past the lapse of a 2-minute lease), then for a minute
// more, which is taken to a day. Actions are read from the histories; the events queries
// of the gateway's follower are counted on the server.
//
//	TACP_BENCH=1 go test ./bench -run TestIdleCostTable -v
func TestIdleCostTable(t *testing.T) {
	if os.Getenv("TACP_BENCH") != "1" {
		t.Skip("set TACP_BENCH=1 to measure an idle session's actions")
	}
	secs := 180
	if v, err := strconv.Atoi(os.Getenv("TACP_BENCH_IDLE_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second+6*time.Minute)
	defer cancel()
	g := startGateway(ctx, t)
	held := string(g.sid)
	if _, err := g.prompt(ctx, "/chunks 1"); err != nil {
		t.Fatal(err)
	}
	alone := fmt.Sprintf("bench-idle-%s", signals.NewID()[:8])
	res, err := env.sc.Prompt(ctx, signals.SessionConfig{SessionID: alone}, signals.PromptRequest{Text: "/chunks 1", ClientMessageID: signals.NewID()})
	require.NoError(t, err)
	require.NoError(t, env.sc.Watch(ctx, alone, 0, func(ev signals.Event) bool {
		return !(ev.TurnID == res.TurnID && signals.IsTerminal(ev.Kind))
	}))
	type mark struct {
		a       tacpclient.Actions
		queries int64
	}
	at := func(id string) mark {
		a, err := env.sc.Actions(ctx, id)
		require.NoError(t, err)
		return mark{a, env.queries.count(signals.QueryEvents, id)}
	}
	h0, a0 := at(held), at(alone)
	sleepCtx(ctx, time.Duration(secs)*time.Second)
	h1, a1 := at(held), at(alone)
	sleepCtx(ctx, time.Minute)
	h2, a2 := at(held), at(alone)

	fmt.Printf("\nAn idle session's billable actions, from its history (%d s after a short turn, then a minute taken to a day; load %s)\n", secs, loadAvg())
	fmt.Printf("| idle | in the first %d s: actions (updates, timers) | queries | then, per day: actions | queries | at $50 per million |\n|---|---|---|---|---|---|\n", secs)
	for _, r := range []struct {
		name       string
		m0, m1, m2 mark
	}{{"nobody holds it", a0, a1, a2}, {"`starter acp` holds it open for an editor", h0, h1, h2}} {
		day := func(n int64) float64 { return float64(n) * 24 * 60 }
		acts, qs := day(r.m2.a.Total-r.m1.a.Total), day(r.m2.queries-r.m1.queries)
		fmt.Printf("| %s | %d (%d, %d) | %d | %.0f | %.0f | $%.4f |\n", r.name,
			r.m1.a.Total-r.m0.a.Total, r.m1.a.Updates-r.m0.a.Updates, r.m1.a.Timers-r.m0.a.Timers, r.m1.queries-r.m0.queries,
			acts, qs, (acts+qs)*50/1e6)
	}
}

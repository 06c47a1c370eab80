package e2e

// The steer storm (issue 7): a thousand steers at once against one live turn, 100
// client_msg_ids sent 10 times each, some with the live token and most with stale ones. The
// compare-and-swap of contract §6 makes the outcome counts independent of the order in which
// the session happens to serialize them, as long as one token is live per storm:
//
//   - dedup comes first: every copy of an id after its acceptance is a duplicate with the
//     original ref, whatever token it carries;
//   - the first request with the live token (say "1") is accepted and swaps the token to
//     "1.1": every later request with "1" is stale_turn {expected "1", actual "1.1"}, except
//     copies of the accepted id;
//   - a token that is never live is always stale_turn.
//
// So a storm of n ids with the live token and m ids with stale ones, 10 copies each, accepts
// exactly 1 steer, answers exactly 9 duplicates (plus 10 for every copy of an id accepted in
// an earlier storm) and rejects the rest stale_turn. Two storms run back to back; the second
// replays the first one's winner with its old token, which must still get its original ref.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
)

type stormSteer struct {
	id, token string
}

type stormOutcome struct {
	stormSteer
	res signals.SteerResult
	rej *signals.Rejection
	err error
}

func stormText(id string) string { return "steer " + id }

// storm sends every steer at once (one goroutine each, released together) and returns the
// answers. The client holds its updates to one session to tacpclient.MaxInFlightUpdates in
// flight (the server admits 10 per run; past that a burst like this one stalled the
// session), so the thousand queue in the client, not at the server.
func storm(t *testing.T, session string, steers []stormSteer) []stormOutcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out := make([]stormOutcome, len(steers))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, s := range steers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := sc.Steer(ctx, session, signals.SteerRequest{Text: stormText(s.id), ExpectedTurnID: s.token, ClientMsgID: s.id})
			o := stormOutcome{stormSteer: s, res: res, err: err}
			if err != nil {
				if rej, ok := rejection.As(err); ok {
					o.rej, o.err = rej, nil
				}
			}
			out[i] = o
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// stormSet is 10 copies of each id with its token, interleaved so that copies of one id do
// not leave the client together.
func stormSet(ids map[string]string) []stormSteer {
	var out []stormSteer
	for range 10 {
		for id, token := range ids { // map order: a different interleaving every run
			out = append(out, stormSteer{id: id, token: token})
		}
	}
	return out
}

// tally checks each answer against the CAS rules and counts outcomes. live is the token
// before the storm, next the token after its one accepted steer; accepted holds the refs of
// ids accepted so far (in earlier storms too) and gains this storm's.
func tally(t *testing.T, outs []stormOutcome, live, next string, accepted map[string]signals.SteerRef) map[string]int {
	t.Helper()
	counts := map[string]int{}
	var winners []stormOutcome
	errs := map[string]int{}
	for _, o := range outs {
		if o.err != nil {
			errs[o.err.Error()]++
		}
	}
	require.Empty(t, errs, "answers that are not rejections")
	for _, o := range outs {
		if o.rej != nil {
			counts[o.rej.Type]++
			require.Equal(t, signals.RejectStaleTurn, o.rej.Type, "steer %s with token %q: %v", o.id, o.token, o.rej)
			d, ok := o.rej.Details.(signals.StaleTurnDetails)
			require.True(t, ok, "stale_turn details: %#v", o.rej.Details)
			require.Equal(t, o.token, d.Expected)
			require.Contains(t, []string{live, next}, d.Actual, "the live token is one of the storm's two")
			require.NotEqual(t, d.Expected, d.Actual)
			if o.token == live {
				require.Equal(t, next, d.Actual, "a live-token steer is stale only after the accept")
			}
			continue
		}
		counts[o.res.Outcome]++
		switch o.res.Outcome {
		case signals.SteerAccepted:
			winners = append(winners, o)
		case signals.SteerDuplicate:
		default:
			t.Fatalf("steer %s: outcome %q", o.id, o.res.Outcome)
		}
	}
	require.Len(t, winners, 1, "exactly one steer of a storm with one live token is accepted")
	w := winners[0]
	require.Equal(t, live, w.token, "the accepted steer carried the live token")
	require.Equal(t, next, w.res.NextExpectedTurnID)
	require.Equal(t, w.id, w.res.Ref.ClientMsgID)
	_, before := accepted[w.id]
	require.False(t, before, "id %s accepted twice", w.id)
	accepted[w.id] = w.res.Ref
	for _, o := range outs {
		if o.rej == nil && o.res.Outcome == signals.SteerDuplicate {
			ref, ok := accepted[o.id]
			require.True(t, ok, "duplicate of %s, which was never accepted", o.id)
			require.Equal(t, ref, o.res.Ref, "a duplicate gets the original ref")
		}
	}
	return counts
}

func TestSteerStormOutcomesAreExactlyAsTheCASRulesPredict(t *testing.T) {
	t.Parallel()
	id := session(t)
	prompt(t, signals.SessionConfig{SessionID: id, Agent: steeringAgent()}, "/sleep 600s")
	st := waitRunning(t, id, 1)
	require.Equal(t, "1", st.SteerToken)
	accepted := map[string]signals.SteerRef{}

	// Storm 1: 30 ids with the live token "1", 70 with tokens that are never live.
	ids := map[string]string{}
	stale1 := []string{"0", "2", "1.0", "01", "1.2", "x"}
	for i := range 100 {
		if i < 30 {
			ids[fmt.Sprintf("a%02d", i)] = "1"
		} else {
			ids[fmt.Sprintf("a%02d", i)] = stale1[i%len(stale1)]
		}
	}
	counts := tally(t, storm(t, id, stormSet(ids)), "1", "1.1", accepted)
	require.Equal(t, map[string]int{signals.SteerAccepted: 1, signals.SteerDuplicate: 9, signals.RejectStaleTurn: 990}, counts)
	var first string
	for k := range accepted {
		first = k
	}
	t.Logf("storm 1: %v, accepted %s", counts, first)

	// Storm 2: the first storm's winner again with its old token (dedup comes first), 30 new
	// ids with the live token "1.1", 69 with tokens not live now (the old "1" among them).
	ids = map[string]string{first: "1"}
	stale2 := []string{"1", "0", "1.3", "1.10", "2.1"}
	for i := range 99 {
		if i < 30 {
			ids[fmt.Sprintf("b%02d", i)] = "1.1"
		} else {
			ids[fmt.Sprintf("b%02d", i)] = stale2[i%len(stale2)]
		}
	}
	counts = tally(t, storm(t, id, stormSet(ids)), "1.1", "1.2", accepted)
	require.Equal(t, map[string]int{signals.SteerAccepted: 1, signals.SteerDuplicate: 19, signals.RejectStaleTurn: 980}, counts)
	t.Logf("storm 2: %v", counts)

	// The session agrees: two steers accepted, journaled once each with the refs the clients
	// got, delivered once each, and the token is the second one's next.
	st, err := sc.Status(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	require.Equal(t, "1.2", st.SteerToken)
	var journaled []signals.SteerRef
	for _, ev := range allEvents(t, id) {
		if ev.Kind == signals.EventSteerAccepted {
			var d signals.SteerAcceptedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			journaled = append(journaled, d.Ref)
			require.Equal(t, stormText(d.Ref.ClientMsgID), d.Text)
		}
	}
	require.Len(t, journaled, 2)
	for _, ref := range journaled {
		require.Equal(t, accepted[ref.ClientMsgID], ref)
	}
	require.Equal(t, []int{1, 2}, []int{journaled[0].Offset, journaled[1].Offset})
	for _, d := range delivered(t, id, 2) {
		require.Equal(t, signals.HowInjected, d.How)
	}
	_, err = sc.Cancel(ctxFor(t, 10*time.Second), id, signals.CancelRequest{})
	require.NoError(t, err)
	turnEnd(t, id, 1)
	checkInvariants(t, allEvents(t, id))
}

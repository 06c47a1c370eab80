package session

// A randomized test of the session core: random inputs from clients, the turn runner, the
// delivery lane and the clock, driven synchronously, with the journal checked against the
// invariants of contract §5 and §6 after a run is brought to rest. Each case is a fixed seed:
// `go test -run 'TestCore_Random/seed=N$'` replays it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// Reference: contract §5 (every turn.started has exactly one later terminal event; seq is
// contiguous), §6 Steer delivery (every accepted steer gets exactly one steer.delivered,
// before its turn's end) and Permissions (every request is resolved exactly once, before its
// turn's end).
func TestCore_RandomInputsKeepTheInvariants(t *testing.T) {
	for seed := uint64(1); seed <= 1000; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runRandomCore(t, seed, 60) })
	}
}

// runRandomCore feeds steps random inputs drawn from seed, brings the core to rest and
// checks its journal.
func runRandomCore(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	policies := []string{"allow_all", "ask_for_risky", "ask_always"}
	r := newCoreRig(t, signals.SessionConfig{SessionID: "rnd", Policy: policies[rng.IntN(3)], GraceWindow: "20s", PermissionTimeout: "30s", TurnDeadline: "2m"})
	var log []string
	for range steps {
		log = append(log, randomInput(r, rng))
		r.settle()
	}
	rest(r, rng)
	checkCoreJournal(t, r.core.Journal.Events, log)
}

// randomInput feeds one random input and says what it was.
func randomInput(r *coreRig, rng *rand.Rand) string {
	c := r.core
	t := c.Turn
	n := rng.IntN(16)
	switch {
	case n == 0:
		id := fmt.Sprintf("m%d", rng.IntN(8))
		_, _ = r.update(signals.UpdatePrompt, signals.PromptRequest{Text: "p " + id, ClientMessageID: id})
		return "prompt " + id
	case n == 1 && t != nil:
		tok := c.Steer.Token()
		if rng.IntN(4) == 0 {
			tok = "1"
		}
		_, _ = r.update(signals.UpdateSteer, signals.SteerRequest{Text: "s", ExpectedTurnID: tok})
		return "steer " + tok
	case n == 2 && t != nil && rng.IntN(3) == 0:
		_, _ = r.update(signals.UpdateCancel, signals.CancelRequest{})
		return "cancel"
	case n == 3 && t != nil:
		attempt := t.Attempt
		if rng.IntN(5) == 0 {
			attempt++
		}
		r.signal(signals.SignalTurnStarted, signals.TurnStartedSignal{TurnID: t.TurnID, Attempt: attempt, HostQueue: fmt.Sprintf("host%d", attempt)})
		return fmt.Sprintf("turn_started %d.%d", t.TurnID, attempt)
	case n == 4 && t != nil:
		r.signal(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: t.TurnID, Attempt: t.Attempt, Batch: t.LastBatch + 1, Events: []json.RawMessage{chunk("x")}})
		return "turn_events"
	case n == 5 && t != nil:
		r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: t.TurnID, Attempt: t.Attempt, StopReason: "end_turn", Batches: t.LastBatch + int64(rng.IntN(2))})
		return "turn_finished"
	case n == 6 && t != nil:
		id := fmt.Sprintf("p%d", rng.IntN(1000))
		r.signal(signals.SignalPermissionRequested, signals.PermissionRequestedSignal{TurnID: t.TurnID, Attempt: t.Attempt, RequestID: id,
			ToolCall: json.RawMessage(`{"kind":"edit","title":"e"}`), Options: []signals.PermissionOption{{OptionID: "y", Kind: "allow_once"}, {OptionID: "n", Kind: "reject_once"}}})
		return "permission_requested " + id
	case n == 7 && len(c.Permissions) > 0:
		p := c.Permissions[rng.IntN(len(c.Permissions))]
		_, _ = r.update(signals.UpdatePermissionRespond, signals.PermissionRespondRequest{RequestID: p.RequestID, OptionID: "y"})
		return "respond " + p.RequestID
	case n == 8 && r.sent != nil:
		return "answer " + answerRandomly(r, rng)
	case n == 9 && (len(c.Awaiting) > 0 || c.delivering):
		var d signals.Delivery
		if len(c.Awaiting) > 0 && (!c.delivering || rng.IntN(2) == 0) {
			d = c.Awaiting[rng.IntN(len(c.Awaiting))]
		} else {
			d = c.inFlight
		}
		how := []string{signals.HowInjected, signals.HowInterrupted, signals.HowFailed}[rng.IntN(3)]
		r.signal(signals.SignalDeliveryOutcome, signals.DeliveryOutcome{DeliveryID: d.DeliveryID, Kind: d.Kind, TurnID: d.TurnID, Attempt: d.Attempt, How: how})
		return "outcome " + d.DeliveryID
	case n == 10 && t != nil && rng.IntN(3) == 0:
		if rng.IntN(2) == 0 {
			r.input(DriveEnded{TurnID: t.TurnID})
			return "drive ended"
		}
		r.input(DriveEnded{TurnID: t.TurnID, Failure: "terminated"})
		return "drive failed"
	case n == 11:
		_, _ = r.update(signals.UpdateAttach, signals.AttachRequest{ViewerID: fmt.Sprintf("v%d", rng.IntN(2)), Role: signals.RoleController, LeaseSeconds: 1 + rng.IntN(40)})
		return "attach"
	case n == 12:
		_, _ = r.update(signals.UpdateDetach, signals.DetachRequest{ViewerID: fmt.Sprintf("v%d", rng.IntN(2))})
		return "detach"
	case n == 13 && rng.IntN(10) == 0:
		_, _ = r.update(signals.UpdateClose, signals.CloseRequest{})
		return "close"
	case n == 14 && r.alarm != nil:
		r.ring()
		return "alarm"
	}
	r.advance(time.Duration(rng.IntN(5000)) * time.Millisecond)
	return "advance"
}

func answerRandomly(r *coreRig, rng *rand.Rand) string {
	switch rng.IntN(5) {
	case 0, 1:
		r.answer(signals.DeliveryResult{Taken: true}, nil, false)
		return "taken"
	case 2:
		r.answer(signals.DeliveryResult{How: signals.HowInjected}, nil, false)
		return "injected"
	case 3:
		r.answer(signals.DeliveryResult{}, errors.New("boom"), false)
		return "error"
	}
	r.answer(signals.DeliveryResult{}, errors.New("schedule-to-start"), true)
	return "host gone"
}

// rest brings the core to rest: every delivery answered, every turn reported ended, every
// alarm rung.
func rest(r *coreRig, rng *rand.Rand) {
	for range 200 {
		r.settle()
		switch {
		case r.closed && r.sent == nil:
			return
		case r.sent != nil:
			answerRandomly(r, rng)
		case r.core.Turn != nil && (r.core.Turn.Finished == nil || r.core.Turn.Finished.Attempt < r.core.Turn.Attempt):
			t := r.core.Turn
			r.signal(signals.SignalTurnFinished, signals.TurnFinishedSignal{TurnID: t.TurnID, Attempt: t.Attempt, StopReason: "end_turn", Batches: t.LastBatch})
		case r.core.Turn != nil && r.core.Turn.Finished.Batches > r.core.Turn.LastBatch && r.core.Turn.Finished.Attempt == r.core.Turn.Attempt:
			t := r.core.Turn
			r.signal(signals.SignalTurnEvents, signals.TurnEventsSignal{TurnID: t.TurnID, Attempt: t.Attempt, Batch: t.LastBatch + 1, Events: []json.RawMessage{chunk("late")}})
		case r.core.Turn != nil && r.alarm != nil:
			r.ring()
		case r.core.Turn != nil:
			r.input(DriveEnded{TurnID: r.core.Turn.TurnID})
		case len(r.core.Queue.Items) > 0 || len(r.core.Deliveries) > 0:
		default:
			return
		}
	}
	c := r.core
	r.t.Fatalf("the core did not come to rest: awaiting %+v finished %+v turn %+v queue %d deliveries %+v delivering %t next %s alarm %s\n%s", c.Awaiting, c.Turn.Finished, c.Turn, len(c.Queue.Items), c.Deliveries, c.delivering, c.next(RunInfo{}), r.alarm, describe(c.Journal.Events))
}

// checkCoreJournal checks the journal of a core at rest.
func checkCoreJournal(t *testing.T, evs []signals.Event, log []string) {
	t.Helper()
	type key struct {
		turn   int64
		offset int
	}
	started := map[int64]int{}
	ended := map[int64]int{} // index of the terminal event
	steers := map[key]int{}
	delivered := map[key][]int{}
	requested := map[string]int64{}
	resolved := map[string][]int{}
	for i, e := range evs {
		require.Equal(t, int64(i+1), e.Seq, "seq is contiguous\n%v", log)
		if _, done := ended[e.TurnID]; done && e.TurnID != 0 && e.Kind != signals.EventPromptAccepted {
			t.Fatalf("%s of turn %d after its end (seq %d)\n%s\n%v", e.Kind, e.TurnID, e.Seq, describe(evs), log)
		}
		switch e.Kind {
		case signals.EventTurnStarted:
			started[e.TurnID]++
		case signals.EventTurnEnded, signals.EventTurnFailed:
			_, dup := ended[e.TurnID]
			require.False(t, dup, "turn %d has two terminal events\n%s", e.TurnID, describe(evs))
			ended[e.TurnID] = i
		case signals.EventSteerAccepted:
			var d signals.SteerAcceptedData
			require.NoError(t, json.Unmarshal(e.Data, &d))
			steers[key{e.TurnID, d.Ref.Offset}] = i
		case signals.EventSteerDelivered:
			var d signals.SteerDeliveredData
			require.NoError(t, json.Unmarshal(e.Data, &d))
			delivered[key{e.TurnID, d.Offset}] = append(delivered[key{e.TurnID, d.Offset}], i)
		case signals.EventPermissionRequested:
			var d signals.PermissionRequestedData
			require.NoError(t, json.Unmarshal(e.Data, &d))
			requested[d.RequestID] = e.TurnID
		case signals.EventPermissionResolved:
			var d signals.PermissionResolution
			require.NoError(t, json.Unmarshal(e.Data, &d))
			resolved[d.RequestID] = append(resolved[d.RequestID], i)
		}
	}
	for turn, n := range started {
		require.Equal(t, 1, n, "turn %d started once", turn)
		_, ok := ended[turn]
		require.True(t, ok, "turn %d has a terminal event\n%s\n%v", turn, describe(evs), log)
	}
	for k := range steers {
		require.Len(t, delivered[k], 1, "steer %d.%d has exactly one steer.delivered\n%s\n%v", k.turn, k.offset, describe(evs), log)
		require.Less(t, delivered[k][0], ended[k.turn], "steer %d.%d is delivered before its turn's end", k.turn, k.offset)
	}
	for id, turn := range requested {
		require.Len(t, resolved[id], 1, "request %s is resolved once", id)
		require.Less(t, resolved[id][0], ended[turn], "request %s is resolved before its turn's end", id)
	}
}

// FuzzCoreInputs runs the randomized test from the fuzzer's seeds (go test -fuzz
// FuzzCoreInputs ./workflows).
func FuzzCoreInputs(f *testing.F) {
	for _, seed := range []uint64{1, 8, 261, 368} {
		f.Add(seed, uint8(60))
	}
	f.Fuzz(func(t *testing.T, seed uint64, steps uint8) { runRandomCore(t, seed, int(steps)) })
}

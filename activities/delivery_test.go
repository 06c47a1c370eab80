package activities

// Tests of Deliver into a turn run by the real testagent: an Async steer is answered Taken
// as soon as the turn has it, and its outcome follows by delivery_outcome before the turn's
// attempt returns its result (the turn's report); a steer without Async is answered when it
// is done.

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// turnEnd is the end of a turn run in the background: its error, and the signals sent by
// the time its activity returned.
type turnEnd struct {
	err  error
	sent []recordedSignal
}

// outcomes returns the delivery_outcome signals sent by the time the activity returned.
func (e turnEnd) outcomes() []signals.DeliveryOutcome { return outcomesOf(e.sent) }

// startTurn runs a turn in the background; the returned channel yields its end.
func (r *turnRig) startTurn(in signals.RunTurnInput) <-chan turnEnd {
	done := make(chan turnEnd, 1)
	go func() {
		_, err := r.run(in)
		done <- turnEnd{err: err, sent: r.rec.all()}
	}()
	// The turn is live once the agent streams its first tick.
	require.Eventually(r.t, func() bool {
		return slices.Contains(messageTexts(decodeUpdates(r.t, r.rec.events(in.TurnID))), ".")
	}, 30*time.Second, 5*time.Millisecond)
	return done
}

// outcomes returns the delivery_outcome signals sent, in order.
func (c *signalRecorder) outcomes() []signals.DeliveryOutcome { return outcomesOf(c.all()) }

// outcomesOf returns the delivery_outcome signals among sent, in order.
func outcomesOf(sent []recordedSignal) []signals.DeliveryOutcome {
	var out []signals.DeliveryOutcome
	for _, s := range sent {
		if o, ok := s.arg.(signals.DeliveryOutcome); ok {
			out = append(out, o)
		}
	}
	return out
}

// deliverCtx bounds a delivery as the session's StartToClose would: a broken delivery fails
// the test instead of hanging it.
func deliverCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func asyncSteer(session string, turn int64, text, id string, offset int) signals.Delivery {
	return signals.Delivery{
		Kind: signals.DeliverSteer, SessionID: session, TurnID: turn, Text: text,
		Async: true, DeliveryID: id, Offset: offset,
	}
}

// An Async steer is answered Taken at once, even by an agent that never lets the interrupt
// finish (it ignores session/cancel): the delivery no longer holds up the next one. Its
// outcome (failed: the turn was cancelled under it) reaches the session before the attempt
// returns the turn's end.
func TestAsyncSteerIsTakenAtOnceAndReportedBeforeTheTurnsEnd(t *testing.T) {
	rig := newTurnRig(t, "")
	rig.runner.CancelGrace = 200 * time.Millisecond
	done := rig.startTurn(turnInput("s1", 1, rig.agent("-ignore-cancel"), "/sleep 60s"))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := rig.host.Deliver(ctx, asyncSteer("s1", 1, "go left", "d1", 1))
	require.NoError(t, err)
	require.Equal(t, signals.DeliveryResult{Taken: true}, res)
	require.Empty(t, rig.rec.outcomes(), "taken, not done: the interrupt is still waiting for the agent")

	// Without Async the same steer is answered only when it is done: here, never in time.
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	_, err = rig.host.Deliver(short, signals.Delivery{Kind: signals.DeliverSteer, SessionID: "s1", TurnID: 1, Text: "sync"})
	require.ErrorIs(t, err, context.DeadlineExceeded)

	res, err = rig.host.Deliver(ctx, signals.Delivery{Kind: signals.DeliverCancel, SessionID: "s1", TurnID: 1, Async: true})
	require.NoError(t, err)
	require.True(t, res.Taken)
	end := <-done
	require.NoError(t, end.err)
	require.Equal(t, []signals.DeliveryOutcome{{
		DeliveryID: "d1", Kind: signals.DeliverSteer, TurnID: 1, Attempt: 1, Offset: 1,
		How: signals.HowFailed, Error: "the turn was cancelled",
	}}, end.outcomes(), "the steer's outcome went out before the turn's end")
}

// An Async steer delivered by interrupt-and-continue reports `interrupted`, with its
// delivery id and offset, before the turn (continued with the steer text) returns its end.
func TestAsyncSteerByInterruptReportsInterrupted(t *testing.T) {
	rig := newTurnRig(t, "")
	// The server takes its time with delivery_outcome: a turn that did not wait for it
	// would return its end first.
	rig.rec.before = func(name string) {
		if name == signals.SignalDeliveryOutcome {
			time.Sleep(time.Second)
		}
	}
	done := rig.startTurn(turnInput("s1", 1, rig.agent(), "/sleep 60s"))
	res, err := rig.host.Deliver(deliverCtx(t), asyncSteer("s1", 1, "/echo\nsteered", "d7", 3))
	require.NoError(t, err)
	require.True(t, res.Taken)
	end := <-done
	require.NoError(t, end.err)
	require.Equal(t, []signals.DeliveryOutcome{{
		DeliveryID: "d7", Kind: signals.DeliverSteer, TurnID: 1, Attempt: 1, Offset: 3, How: signals.HowInterrupted,
	}}, end.outcomes(), "the steer's outcome went out before the turn's end")
	require.Contains(t, joinedTexts(t, rig.rec.events(1))[0], "steered")
}

// A steer without Async is answered when it is done, with how it went (the old contract:
// sessions recorded before Async replay against this worker).
func TestSyncSteerIsAnsweredWhenDelivered(t *testing.T) {
	rig := newTurnRig(t, "")
	done := rig.startTurn(turnInput("s1", 1, rig.agent(), "/sleep 60s"))
	res, err := rig.host.Deliver(deliverCtx(t), signals.Delivery{Kind: signals.DeliverSteer, SessionID: "s1", TurnID: 1, Text: "/echo\nsteered"})
	require.NoError(t, err)
	require.Equal(t, signals.DeliveryResult{How: signals.HowInterrupted}, res)
	require.NoError(t, (<-done).err)
	require.Empty(t, rig.rec.outcomes(), "no delivery_outcome for a steer answered in place")
}

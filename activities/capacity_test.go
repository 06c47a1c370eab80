package activities

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
)

// A worker's turns, of the session queue (slots its pollers reserve) and of its host queue
// (affinity), count against one capacity: a poller asks for a turn only while there is room,
// and a host turn is refused only by running turns, never by a poller's idle reservation.
func TestTurnGate_OneCapacityForBothQueues(t *testing.T) {
	g := NewTurnGate(2, nil)
	slots := g.TurnSlots()

	p1 := slots.TryReserveSlot(nil)
	require.NotNil(t, p1, "a poller reserves a slot")
	require.True(t, g.tryHost(), "an idle reservation leaves room for a host turn")
	require.Nil(t, slots.TryReserveSlot(nil), "a reservation and a host turn fill two slots")

	g.markUsed(p1)
	require.Equal(t, 2, g.Running())
	require.False(t, g.tryHost(), "two running turns: the host turn goes back to the session queue")

	// A poller waiting for room gets it when a turn ends.
	got := make(chan *worker.SlotPermit)
	go func() {
		p, err := slots.ReserveSlot(context.Background(), nil)
		require.NoError(t, err)
		got <- p
	}()
	g.doneHost()
	require.NotNil(t, <-got)
	g.release(p1)
	require.Equal(t, 0, g.Running())
	require.True(t, g.tryHost())
}

func TestTurnGate_UnboundedAdmitsEverything(t *testing.T) {
	g := NewTurnGate(-1, nil)
	for range 100 {
		require.True(t, g.tryHost())
		require.NotNil(t, g.TurnSlots().TryReserveSlot(nil))
	}
	var nilGate *TurnGate
	require.True(t, nilGate.tryHost(), "a runner without a gate admits every turn")
}

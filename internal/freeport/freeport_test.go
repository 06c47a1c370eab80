package freeport

import (
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTakeGivesDistinctBindablePortsBelowTheEphemeralRange(t *testing.T) {
	var wg sync.WaitGroup
	got := make([][]int, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ports, err := Take("127.0.0.1", 9)
			require.NoError(t, err)
			got[i] = ports
		}()
	}
	wg.Wait()
	seen := map[int]bool{}
	for _, ports := range got {
		require.Len(t, ports, 9)
		for _, p := range ports {
			require.False(t, seen[p], "port %d handed out twice", p)
			seen[p] = true
			require.True(t, p >= Low && p < High, "port %d outside [%d, %d)", p, Low, High)
		}
	}
	// A port Take gave is free to bind.
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(got[0][0])))
	require.NoError(t, err)
	require.NoError(t, l.Close())
}

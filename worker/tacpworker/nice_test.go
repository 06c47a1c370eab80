package tacpworker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A nice outside 0–19 is refused before anything starts: an agent never runs above its worker.
func TestStartRefusesANiceOutsideTheRange(t *testing.T) {
	for _, n := range []int{-1, 20} {
		_, err := Start(nil, Options{AgentNice: n, DataDir: t.TempDir()})
		require.ErrorContains(t, err, "want 0 (the worker's priority) to 19")
	}
}

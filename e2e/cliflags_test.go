package e2e

// The real CLI takes each command's flags after its positional arguments, as the docs write
// them; text that begins with '-' is sent after '--' and refused before it.

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

func TestCLIFlagsAfterPositionalArguments(t *testing.T) {
	t.Parallel()
	id := session(t)

	out, errOut, code := starter(t, "prompt", "hello after flags", "--session", id)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "hello after flags")

	out, errOut, code = starter(t, "prompt", "--session", id, "queued", "--no-wait")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "queued at position")

	_, errOut, code = starter(t, "prompt", "--session", id, "--not-a-flag")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "-- --not-a-flag")

	out, errOut, code = starter(t, "prompt", "--session", id, "--", "--not-a-flag")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "--not-a-flag")

	_, errOut, code = starter(t, "title", "a title", "given last", "--session", id)
	require.Equal(t, 0, code, errOut)
	out, errOut, code = starter(t, "status", "--json", "--session", id)
	require.Equal(t, 0, code, errOut)
	var st signals.Status
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, "a title given last", st.Title)

	// The request does not exist: the session refuses it (exit 2), which it can only do
	// when the id and the field reached it.
	_, errOut, code = starter(t, "answer", "no-such-request", "--field", "a=b", "--session", id)
	require.Equal(t, 2, code, errOut)

	// deployment drained BUILD_ID --wait D, its usage as written: it asks, not prints usage.
	_, errOut, code = starter(t, "deployment", "drained", "no-such-build", "--wait", "1s")
	require.NotContains(t, errOut, "usage", "the flag after the build id parses")
	require.NotEqual(t, 1, code, errOut)
}

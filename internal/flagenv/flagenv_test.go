package flagenv

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNameIsTACPAndTheFlagInUpperCase(t *testing.T) {
	require.Equal(t, "TACP_DEV_UI_PORT", Name("dev.ui-port"))
	require.Equal(t, "TACP_SESSION", Name("session"))
}

func TestParseTakesTheEnvironmentOnlyForFlagsNotGiven(t *testing.T) {
	t.Setenv("TACP_SESSION", "from-env")
	t.Setenv("TACP_QUEUE", "env-queue")
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	session := fs.String("session", "", "")
	queue := fs.String("queue", "default", "")
	require.NoError(t, Parse(fs, []string{"--queue", "given"}))
	require.Equal(t, "from-env", *session)
	require.Equal(t, "given", *queue, "a flag on the command line wins over its variable")
}

func TestParseNamesTheVariableABadValueCameFrom(t *testing.T) {
	t.Setenv("TACP_N", "many")
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Int("n", 1, "")
	require.ErrorContains(t, Parse(fs, nil), `TACP_N="many"`)
}

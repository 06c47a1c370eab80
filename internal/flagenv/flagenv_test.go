package flagenv

import (
	"flag"
	"io"
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

func newSet() (*flag.FlagSet, *string, *bool, *[]string) {
	fs := flag.NewFlagSet("starter prompt", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	session := fs.String("session", "", "")
	noWait := fs.Bool("no-wait", false, "")
	var fields []string
	fs.Func("field", "", func(v string) error { fields = append(fields, v); return nil })
	return fs, session, noWait, &fields
}

func TestParseTakesFlagsAnywhere(t *testing.T) {
	for name, tc := range map[string]struct {
		args    []string
		session string
		noWait  bool
		fields  []string
		rest    []string
	}{
		"flags before":             {[]string{"--session", "s", "--no-wait", "hi"}, "s", true, nil, []string{"hi"}},
		"flags after":              {[]string{"hi", "--session", "s", "--no-wait"}, "s", true, nil, []string{"hi"}},
		"flags between":            {[]string{"--session", "s", "hi", "--no-wait", "there"}, "s", true, nil, []string{"hi", "there"}},
		"equals form":              {[]string{"hi", "--session=s"}, "s", false, nil, []string{"hi"}},
		"single dash":              {[]string{"-session", "s", "hi", "-no-wait"}, "s", true, nil, []string{"hi"}},
		"bool with value":          {[]string{"hi", "--no-wait=false"}, "", false, nil, []string{"hi"}},
		"repeated after":           {[]string{"REQ", "--field", "a=b", "--field=c=d"}, "", false, []string{"a=b", "c=d"}, []string{"REQ"}},
		"double dash ends flags":   {[]string{"--session", "s", "--", "--not-a-flag", "-x"}, "s", false, nil, []string{"--not-a-flag", "-x"}},
		"dash alone is positional": {[]string{"-", "--no-wait"}, "", true, nil, []string{"-"}},
		"value that looks a flag":  {[]string{"--session", "-odd", "hi"}, "-odd", false, nil, []string{"hi"}},
	} {
		t.Run(name, func(t *testing.T) {
			fs, session, noWait, fields := newSet()
			require.NoError(t, Parse(fs, tc.args))
			require.Equal(t, tc.session, *session)
			require.Equal(t, tc.noWait, *noWait)
			require.Equal(t, tc.fields, *fields)
			require.Equal(t, tc.rest, fs.Args())
		})
	}
}

func TestParseRefusesATextThatLooksLikeAFlagBeforeDoubleDash(t *testing.T) {
	fs, _, _, _ := newSet()
	err := Parse(fs, []string{"--session", "s", "--not-a-flag"})
	require.ErrorIs(t, err, ErrUnknownFlag)
	require.ErrorContains(t, err, "starter prompt -- --not-a-flag")
}

func TestParseAnswersHelpAnywhere(t *testing.T) {
	for _, h := range []string{"-h", "--help", "-help"} {
		fs, _, _, _ := newSet()
		require.ErrorIs(t, Parse(fs, []string{"hi", h}), flag.ErrHelp)
	}
}

func TestParseSaysAFlagAtTheEndWantsItsValue(t *testing.T) {
	fs, _, _, _ := newSet()
	require.ErrorContains(t, Parse(fs, []string{"hi", "--session"}), "needs an argument")
}

func TestParseTakesTheEnvironmentWithFlagsAfterArguments(t *testing.T) {
	t.Setenv("TACP_SESSION", "from-env")
	fs, session, noWait, _ := newSet()
	require.NoError(t, Parse(fs, []string{"hi", "--no-wait"}))
	require.Equal(t, "from-env", *session)
	require.True(t, *noWait)
}

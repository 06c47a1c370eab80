// Package flagenv parses a command's flags with environment fallbacks: every flag not given
// on the command line takes TACP_<NAME> when it is set. worker/, starter/ and demo/ parse
// their flags with it.
package flagenv

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// Name is the environment variable a flag falls back to: TACP_ and the flag's name in
// upper case with dots and dashes as underscores (-dev.ui-port → TACP_DEV_UI_PORT).
func Name(flagName string) string {
	return "TACP_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(flagName))
}

// Parse parses args into fs; every flag not given on the command line takes its TACP_
// environment variable when that is set.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		if v, ok := os.LookupEnv(Name(f.Name)); ok {
			if serr := f.Value.Set(v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", Name(f.Name), v, serr)
			}
		}
	})
	return err
}

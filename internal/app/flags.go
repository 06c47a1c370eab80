package app

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// EnvName is the environment variable a flag falls back to: TACP_ and the flag's name in
// upper case with dots and dashes as underscores (-dev.ui-port → TACP_DEV_UI_PORT).
func EnvName(flagName string) string {
	return "TACP_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(flagName))
}

// ParseFlags parses args into fs; every flag not given on the command line takes its
// TACP_ environment variable when that is set.
func ParseFlags(fs *flag.FlagSet, args []string) error {
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
		if v, ok := os.LookupEnv(EnvName(f.Name)); ok {
			if serr := f.Value.Set(v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", EnvName(f.Name), v, serr)
			}
		}
	})
	return err
}

// NewLogger returns a JSON slog logger on stderr at level.
func NewLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

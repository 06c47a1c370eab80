// Package flagenv parses a command's flags the way Temporal's CLI, kubectl and gh take them,
// with environment fallbacks: flags stand before or after positional arguments, as
// --flag=value or --flag value, "--" ends the flags, and every flag not given on the command
// line takes TACP_<NAME> when it is set. worker/, starter/ and demo/ parse their flags with it.
package flagenv

import (
	"errors"
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

// ErrUnknownFlag is the error of an argument that looks like a flag (it begins with "-" and
// is not "-" alone) and names none of the command's flags. Text that begins with "-" goes
// after "--".
var ErrUnknownFlag = errors.New("unknown flag")

// Parse parses args into fs with flags anywhere among the positional arguments; every flag
// not given on the command line takes its TACP_ environment variable when that is set.
// fs.Args() holds the positional arguments in their order.
func Parse(fs *flag.FlagSet, args []string) error {
	ordered, err := Interspersed(fs, args)
	if err != nil {
		fmt.Fprintln(fs.Output(), err)
		fs.Usage()
		return err
	}
	if err := fs.Parse(ordered); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
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

// Interspersed reorders args so that the standard flag package, which stops at the first
// positional argument, sees every flag: the flags (each with its value when the value is the
// next argument), then "--", then the positional arguments in their order. An argument after
// "--" is positional whatever it looks like; before it, one that begins with "-" (and is not
// "-" alone, which names stdin) must be a flag of fs, -h or --help.
func Interspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			positional = append(positional, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		f := fs.Lookup(name)
		if f == nil {
			if name == "h" || name == "help" {
				flags = append(flags, a)
				continue
			}
			return nil, fmt.Errorf("%w %s (a text argument that begins with '-' goes after '--': %s -- %s)", ErrUnknownFlag, a, fs.Name(), a)
		}
		flags = append(flags, a)
		if !hasValue && !IsBool(f) {
			if i+1 == len(args) {
				return nil, fmt.Errorf("flag needs an argument: %s", a)
			}
			flags = append(flags, args[i+1])
			i++
		}
	}
	return append(append(flags, "--"), positional...), nil
}

// IsBool says whether f is a flag given without a value (--json rather than --json=true).
func IsBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

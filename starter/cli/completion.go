package cli

// completion: shell completion scripts for bash, zsh and fish, generated from the command
// table (and a program's own commands), so a command added to the table completes with its
// flags without touching this file.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Spec is a command as completion and the docs test see it: its name, its help and its flag
// set (nil for a command without flags).
type Spec struct {
	Name, Help string
	Flags      *flag.FlagSet
}

// Specs are the command table's commands with their flag sets.
func Specs() []Spec {
	var out []Spec
	for _, c := range commands {
		fs, _ := Parse([]string{c.name})
		out = append(out, Spec{c.name, c.help, fs})
	}
	return out
}

// tableSpecs is Specs, reached through a variable set at init: the table names
// cmdCompletion, so cmdCompletion cannot name the table directly.
var tableSpecs func() []Spec

func init() { tableSpecs = Specs }

// Shells are the shells WriteCompletion writes for.
var Shells = []string{"bash", "zsh", "fish"}

func cmdCompletion(_ context.Context, e *env, fs *flag.FlagSet, args []string) int {
	if !e.parse(fs, args, false) {
		return exitError
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(e.err, "%s completion: want one of %s\n", Name, strings.Join(Shells, ", "))
		return exitError
	}
	if err := WriteCompletion(e.out, fs.Arg(0), Name, tableSpecs()); err != nil {
		fmt.Fprintf(e.err, "%s completion: %v\n", Name, err)
		return exitError
	}
	return exitOK
}

// flagInfo is one flag for a script: its name, whether it takes a value, its help's first
// clause.
type flagInfo struct {
	name  string
	value bool
	help  string
}

func flagsOf(fs *flag.FlagSet) []flagInfo {
	var out []flagInfo
	if fs == nil {
		return out
	}
	fs.VisitAll(func(f *flag.Flag) {
		_, isBool := f.Value.(interface{ IsBoolFlag() bool })
		help, _, _ := strings.Cut(f.Usage, " (")
		help, _, _ = strings.Cut(help, ": ")
		if len(help) > 60 {
			help = help[:57] + "..."
		}
		out = append(out, flagInfo{f.Name, !isBool, help})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// WriteCompletion writes the completion script of shell for the program prog and its
// commands.
func WriteCompletion(w io.Writer, shell, prog string, specs []Spec) error {
	fn := "_" + strings.NewReplacer("-", "_", ".", "_").Replace(prog)
	var b strings.Builder
	switch shell {
	case "bash":
		names := make([]string, len(specs))
		for i, s := range specs {
			names[i] = s.Name
		}
		fmt.Fprintf(&b, "# bash completion for %s: source <(%s completion bash)\n", prog, prog)
		fmt.Fprintf(&b, "%s() {\n\tlocal cur=${COMP_WORDS[COMP_CWORD]}\n", fn)
		fmt.Fprintf(&b, "\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n\t\tCOMPREPLY=($(compgen -W '%s' -- \"$cur\"))\n\t\treturn\n\tfi\n", strings.Join(names, " "))
		fmt.Fprintf(&b, "\tlocal words=''\n\tcase ${COMP_WORDS[1]} in\n")
		for _, s := range specs {
			var fl []string
			for _, f := range flagsOf(s.Flags) {
				fl = append(fl, "--"+f.name)
			}
			if s.Name == "completion" {
				fmt.Fprintf(&b, "\t%s) [[ $cur != -* ]] && { COMPREPLY=($(compgen -W '%s' -- \"$cur\")); return; } ;;\n", s.Name, strings.Join(Shells, " "))
			}
			if s.Name != "completion" {
				fmt.Fprintf(&b, "\t%s) words='%s' ;;\n", s.Name, strings.Join(fl, " "))
			}
		}
		fmt.Fprintf(&b, "\tesac\n\tif [[ $cur == -* ]]; then\n\t\tCOMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n\tfi\n}\n")
		fmt.Fprintf(&b, "complete -o default -F %s %s\n", fn, prog)
	case "zsh":
		fmt.Fprintf(&b, "#compdef %s\n# zsh completion for %s: source <(%s completion zsh)\n", prog, prog, prog)
		fmt.Fprintf(&b, "%s() {\n\tlocal -a cmds flags\n\tcmds=(\n", fn)
		for _, s := range specs {
			fmt.Fprintf(&b, "\t\t%s\n", shQuote(s.Name+":"+s.Help))
		}
		fmt.Fprintf(&b, "\t)\n\tif (( CURRENT == 2 )); then\n\t\t_describe command cmds\n\t\treturn\n\tfi\n\tcase $words[2] in\n")
		for _, s := range specs {
			if s.Name == "completion" {
				fmt.Fprintf(&b, "\t%s) [[ $PREFIX != -* ]] && { compadd -- %s; return } ;;\n", s.Name, strings.Join(Shells, " "))
				continue
			}
			var fl []string
			for _, f := range flagsOf(s.Flags) {
				fl = append(fl, shQuote("--"+strings.ReplaceAll(f.name, ":", "\\:")+":"+f.help))
			}
			fmt.Fprintf(&b, "\t%s) flags=(%s) ;;\n", s.Name, strings.Join(fl, " "))
		}
		fmt.Fprintf(&b, "\tesac\n\tif [[ $PREFIX == -* ]]; then\n\t\t_describe flag flags\n\telse\n\t\t_files\n\tfi\n}\n")
		fmt.Fprintf(&b, "if (( $+functions[compdef] )); then compdef %s %s; fi\n", fn, prog)
	case "fish":
		fmt.Fprintf(&b, "# fish completion for %s: %s completion fish | source\n", prog, prog)
		for _, s := range specs {
			fmt.Fprintf(&b, "complete -c %s -n __fish_use_subcommand -f -a %s -d %s\n", prog, s.Name, shQuote(s.Help))
		}
		for _, s := range specs {
			cond := shQuote("__fish_seen_subcommand_from " + s.Name)
			if s.Name == "completion" {
				fmt.Fprintf(&b, "complete -c %s -n %s -f -a %s\n", prog, cond, shQuote(strings.Join(Shells, " ")))
			}
			for _, f := range flagsOf(s.Flags) {
				r := ""
				if f.value {
					r = " -r"
				}
				fmt.Fprintf(&b, "complete -c %s -n %s -l %s%s -d %s\n", prog, cond, f.name, r, shQuote(f.help))
			}
		}
	default:
		return fmt.Errorf("unknown shell %q: want one of %s", shell, strings.Join(Shells, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// shQuote quotes s for sh, zsh and fish alike: in single quotes, an embedded one written
// '\” (close, an escaped quote, reopen), which all three read as one quote.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

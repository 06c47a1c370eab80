package cli

// starter answer: answer a question the agent asked (an elicitation): accept with the form's
// fields as JSON (--content '{"question_0":"right"}') or one flag per field (--field
// question_0=right, repeated; a value that is a JSON number, boolean or list is taken as
// one), or --decline / --cancel. The session checks the answer against the question's form:
// a bad one is refused with the reason and the question stays open.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"sort"
	"strings"

	"github.com/tacp-dev/tacp/signals"
)

// fieldFlags collects --field NAME=VALUE.
type fieldFlags []string

func (f *fieldFlags) String() string     { return strings.Join(*f, ",") }
func (f *fieldFlags) Set(v string) error { *f = append(*f, v); return nil }

func cmdAnswer(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	content := fs.String("content", "", "the answer's fields as a JSON object")
	var fields fieldFlags
	fs.Var(&fields, "field", "NAME=VALUE: one field of the answer (repeat it)")
	decline := fs.Bool("decline", false, "decline to answer")
	cancel := fs.Bool("cancel", false, "cancel the question")
	as := fs.String("as", "", "who answers, as the journal records it (default: cli:USER@HOST)")
	if !e.parse(fs, args, true) {
		return exitError
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(e.err, Name+" answer: want one REQUEST_ID (status lists the open questions)")
		return exitError
	}
	req := signals.ElicitationRespondRequest{RequestID: fs.Arg(0), Action: signals.ActionAccept, AnsweredBy: cliIdentity(*as)}
	switch {
	case *decline && *cancel:
		fmt.Fprintln(e.err, Name+" answer: --decline or --cancel, not both")
		return exitError
	case *decline:
		req.Action = signals.ActionDecline
	case *cancel:
		req.Action = signals.ActionCancel
	default:
		raw, err := answerContent(*content, fields)
		if err != nil {
			fmt.Fprintln(e.err, Name+" answer:", err)
			return exitError
		}
		req.Content = raw
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	res, err := e.c.ElicitationRespond(ctx, e.session, req)
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(res)
	} else {
		fmt.Fprintf(e.out, "%s: %s (by %s)\n", res.RequestID, res.Resolution.Action, orDash(res.Resolution.AnsweredBy))
	}
	return exitOK
}

// answerContent builds the answer's JSON object from --content and the --field flags.
func answerContent(content string, fields []string) (json.RawMessage, error) {
	obj := map[string]any{}
	if content != "" {
		if err := json.Unmarshal([]byte(content), &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("--content: want a JSON object of the form's fields")
		}
	}
	for _, f := range fields {
		name, value, ok := strings.Cut(f, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--field %q: want NAME=VALUE", f)
		}
		var v any
		if json.Unmarshal([]byte(value), &v) == nil {
			switch v.(type) {
			case float64, bool, []any:
				obj[name] = v
				continue
			}
		}
		obj[name] = value
	}
	if len(obj) == 0 {
		return nil, fmt.Errorf("an answer needs --content or --field (or --decline, --cancel)")
	}
	return json.Marshal(obj)
}

// formFields describes a form's fields for status: NAME=one|of|these, or NAME=… for free text.
func formFields(schema json.RawMessage) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]string, 0, len(names))
	for _, n := range names {
		if c := signals.ElicitationChoices(schema, n); len(c) > 0 {
			out = append(out, n+"="+strings.Join(c, "|"))
		} else {
			out = append(out, n+"=…")
		}
	}
	return out
}

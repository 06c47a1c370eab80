package fakemodel

// The script: the directive a user message's text carries (see the package doc), and the
// plan the server makes of it for one request: text in chunks, a call of one of the tools
// the request offers, or a JSON object that fits a structured-output schema.

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Directive is what the script asks of one reply.
type Directive struct {
	// Kind is "reply", "slow", "tool" or "echo".
	Kind string
	// Text is the reply's text (reply, echo) or the slow chunks' stem.
	Text string
	// N is the number of chunks of a slow reply.
	N int
	// Tool is "write", "read" or "bash"; Path, Content and Command its arguments.
	Tool    string
	Path    string
	Content string
	Command string
	// Options are the choices of an ask (Text is its question).
	Options []string
}

// ParseDirective reads the script of a user message's text (see the package doc).
func ParseDirective(text string) Directive {
	lines := strings.Split(text, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if d, ok := parseLine(strings.TrimSpace(lines[i])); ok {
			return d
		}
	}
	last := ""
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			last = l
			break
		}
	}
	return Directive{Kind: "echo", Text: "echo: " + last}
}

func parseLine(l string) (Directive, bool) {
	verb, rest, ok := strings.Cut(l, ":")
	if !ok {
		return Directive{}, false
	}
	rest = strings.TrimSpace(rest)
	switch verb {
	case "reply":
		return Directive{Kind: "reply", Text: rest}, rest != ""
	case "slow":
		nStr, stem, _ := strings.Cut(rest, " ")
		n, err := strconv.Atoi(nStr)
		if err != nil || n <= 0 {
			return Directive{}, false
		}
		if stem = strings.TrimSpace(stem); stem == "" {
			stem = "chunk"
		}
		return Directive{Kind: "slow", N: n, Text: stem}, true
	case "tool":
		tool, args, _ := strings.Cut(rest, " ")
		args = strings.TrimSpace(args)
		switch tool {
		case "write":
			path, content, _ := strings.Cut(args, " ")
			return Directive{Kind: "tool", Tool: "write", Path: path, Content: content}, path != ""
		case "read":
			return Directive{Kind: "tool", Tool: "read", Path: args}, args != ""
		case "bash":
			return Directive{Kind: "tool", Tool: "bash", Command: args}, args != ""
		case "ask":
			return parseAsk(args)
		case "mcp-ask":
			d, ok := parseAsk(args)
			d.Tool = "mcp-ask"
			return d, ok
		}
	}
	return Directive{}, false
}

// toolResultReply is the final text after a tool result came back.
func toolResultReply(result string) string {
	one := strings.Join(strings.Fields(result), " ")
	if len(one) > 300 {
		one = one[:300]
	}
	return "tool result: " + one
}

// chunksOf splits text into about n pieces at word boundaries (at least one).
func chunksOf(text string, n int) []string {
	words := strings.SplitAfter(text, " ")
	if len(words) <= n {
		return words
	}
	per := (len(words) + n - 1) / n
	var out []string
	for i := 0; i < len(words); i += per {
		end := min(i+per, len(words))
		out = append(out, strings.Join(words[i:end], ""))
	}
	return out
}

// plan is what the server will send for one request.
type plan struct {
	chunks []string // text chunks (empty when a tool is called)
	delay  time.Duration
	tool   *toolCall
}

func (p plan) text() string { return strings.Join(p.chunks, "") }

// toolCall is a call of one of the agent's tools.
type toolCall struct {
	Name string
	Args map[string]any
	// Freeform is the raw input of a freeform (custom) tool such as Codex's apply_patch;
	// Args is nil then.
	Freeform string
}

// tool is one tool a request offers: its name and the properties of its parameters.
type tool struct {
	Name   string
	Props  map[string]any
	Custom bool // a freeform tool (OpenAI custom tool): takes raw text
}

// decide turns the conversation's last user text (or tool result) into a plan.
func (s *Server) decide(lastUser string, toolResult *string, tools []tool, schema json.RawMessage) plan {
	d := ParseDirective(lastUser)
	if toolResult != nil && d.Kind == "echo" {
		return plan{chunks: chunksOf(toolResultReply(*toolResult), 3)}
	}
	if len(schema) > 0 {
		return plan{chunks: []string{jsonForSchema(schema, d)}}
	}
	switch d.Kind {
	case "slow":
		p := plan{delay: s.ChunkDelay}
		for i := 1; i <= d.N; i++ {
			p.chunks = append(p.chunks, fmt.Sprintf("%s %d ", d.Text, i))
		}
		return p
	case "tool":
		if tc := pickTool(d, tools); tc != nil {
			return plan{tool: tc}
		}
		return plan{chunks: chunksOf("no tool offered for "+d.Tool, 3)}
	default:
		return plan{chunks: chunksOf(d.Text, 4)}
	}
}

// Tool names each agent gives its tools, by directive.
var toolNames = map[string][]string{
	"write": {"Write", "write", "write_file", "apply_patch"},
	"read":  {"Read", "read", "read_file"},
	"bash":  {"Bash", "bash", "run_shell_command", "exec_command", "shell", "shell_command"},
}

// pickTool builds the call of d's tool from the tools offered, nil when none fits. A shell
// tool stands in for a missing write or read tool.
func pickTool(d Directive, tools []tool) *toolCall {
	switch d.Tool {
	case "ask":
		return pickAsk(d, tools)
	case "mcp-ask":
		return pickMCPAsk(d, tools)
	}
	find := func(kind string) *tool {
		for _, name := range toolNames[kind] {
			for i := range tools {
				if tools[i].Name == name {
					return &tools[i]
				}
			}
		}
		return nil
	}
	if t := find(d.Tool); t != nil && !isShell(t.Name) {
		if t.Name == "apply_patch" {
			patch := "*** Begin Patch\n*** Add File: " + d.Path + "\n+" + d.Content + "\n*** End Patch\n"
			if t.Custom {
				return &toolCall{Name: t.Name, Freeform: patch}
			}
			return &toolCall{Name: t.Name, Args: map[string]any{"input": patch}}
		}
		args := map[string]any{}
		setArg(args, t, d.Path, "file_path", "filePath", "absolute_path", "path")
		if d.Tool == "write" {
			setArg(args, t, d.Content, "content", "text")
		}
		return &toolCall{Name: t.Name, Args: args}
	}
	t := find("bash")
	if t == nil {
		return nil
	}
	cmd := d.Command
	switch d.Tool {
	case "write":
		cmd = fmt.Sprintf("printf '%%s' %s > %s", shellQuote(d.Content), shellQuote(d.Path))
	case "read":
		cmd = "cat " + shellQuote(d.Path)
	}
	args := map[string]any{}
	setArg(args, t, cmd, "command", "cmd")
	setArg(args, t, "a command the fake model runs", "description")
	if _, ok := t.Props["sandbox_permissions"]; ok {
		// Codex runs commands in its sandbox unasked and asks only for the ones the model
		// wants run outside it: so does this model, for every command it runs.
		args["sandbox_permissions"] = "require_escalated"
		args["justification"] = "the fake model's script asks to run this"
	}
	return &toolCall{Name: t.Name, Args: args}
}

// setArg sets value under the first of names that t's schema has.
func setArg(args map[string]any, t *tool, value string, names ...string) {
	for _, n := range names {
		if _, ok := t.Props[n]; ok {
			args[n] = value
			return
		}
	}
}

func isShell(name string) bool {
	for _, n := range toolNames["bash"] {
		if n == name {
			return true
		}
	}
	return false
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// jsonForSchema answers a structured-output request with an object that fits schema: the
// directive's text for string properties, zero values for the rest.
func jsonForSchema(schema json.RawMessage, d Directive) string {
	var sc struct {
		Properties map[string]struct {
			Type any   `json:"type"`
			Enum []any `json:"enum"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(schema, &sc)
	text := d.Text
	if text == "" {
		text = "fake"
	}
	obj := map[string]any{}
	for name, p := range sc.Properties {
		typ, _ := p.Type.(string) // Gemini's schemas spell types in capitals
		switch {
		case len(p.Enum) > 0:
			obj[name] = p.Enum[0]
		case strings.EqualFold(typ, "boolean"):
			obj[name] = false
		case strings.EqualFold(typ, "number"), strings.EqualFold(typ, "integer"):
			obj[name] = 0
		case strings.EqualFold(typ, "array"):
			obj[name] = []any{}
		case strings.EqualFold(typ, "object"):
			obj[name] = map[string]any{}
		default:
			obj[name] = text
		}
	}
	b, _ := json.Marshal(obj)
	return string(b)
}

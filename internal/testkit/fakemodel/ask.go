package fakemodel

// Asking the person: the script line
//
//	tool: ask QUESTION | OPTION | OPTION...
//
// calls the agent's tool for a question to its user (Claude Code's AskUserQuestion) with
// one single-select question and its options. claude-agent-acp offers the tool only to a
// client that advertises form elicitation, and asks that client with elicitation/create;
// the answer comes back as the tool's result ("User has answered your questions: …"),
// which the model then echoes ("tool result: …").

import "strings"

// askTools are the agents' question tools.
var askTools = []string{"AskUserQuestion"}

func parseAsk(args string) (Directive, bool) {
	parts := strings.Split(args, "|")
	d := Directive{Kind: "tool", Tool: "ask", Text: strings.TrimSpace(parts[0])}
	for _, p := range parts[1:] {
		if p = strings.TrimSpace(p); p != "" {
			d.Options = append(d.Options, p)
		}
	}
	return d, d.Text != "" && len(d.Options) > 0
}

// pickAsk calls the question tool, nil when the request offers none.
func pickAsk(d Directive, tools []tool) *toolCall {
	for _, name := range askTools {
		for _, t := range tools {
			if t.Name != name {
				continue
			}
			opts := make([]any, len(d.Options))
			for i, o := range d.Options {
				opts[i] = map[string]any{"label": o, "description": "option " + o}
			}
			return &toolCall{Name: name, Args: map[string]any{"questions": []any{map[string]any{
				"question": d.Text, "header": "Choice", "options": opts, "multiSelect": false,
			}}}}
		}
	}
	return nil
}

// pickMCPAsk calls an MCP server's ask tool (testagent/mcpask, offered as mcp__NAME__ask),
// nil when the request offers none.
func pickMCPAsk(d Directive, tools []tool) *toolCall {
	for _, t := range tools {
		if strings.HasPrefix(t.Name, "mcp__") && strings.HasSuffix(t.Name, "__ask") {
			opts := make([]any, len(d.Options))
			for i, o := range d.Options {
				opts[i] = o
			}
			return &toolCall{Name: t.Name, Args: map[string]any{"question": d.Text, "options": opts}}
		}
	}
	return nil
}

// resumeMarker begins tacp's prompt to an agent whose turn it resumes after a lost worker
// (activities.ResumeText).
const resumeMarker = "[tacp: the worker running this turn was lost"

// askAgain is what a model does when told to continue a turn whose question was never
// answered: it asks again. When the last user message is tacp's resume prompt and the
// latest earlier user message with a directive asked a question, that message decides.
func askAgain(lastUser string, userTexts []string) (string, bool) {
	if !strings.Contains(lastUser, resumeMarker) {
		return "", false
	}
	for i := len(userTexts) - 1; i >= 0; i-- {
		if strings.Contains(userTexts[i], resumeMarker) {
			continue
		}
		d := ParseDirective(userTexts[i])
		if d.Kind == "echo" {
			continue
		}
		return userTexts[i], d.Kind == "tool" && d.Tool == "ask"
	}
	return "", false
}

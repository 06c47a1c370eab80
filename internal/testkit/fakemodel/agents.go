package fakemodel

// How to run each real agent against a fake model: its binary (installed by .ci/peers
// under .ci/npm/node_modules/.bin), the API it speaks, the provider settings it reads from a
// HOME of its own and the environment it needs. Setup writes nothing about permissions: with
// their own defaults claude-agent-acp 0.101.0 (mode "auto"), codex-acp 2.6.0 ("agent", shown
// as "Auto review") and OpenCode approve their own writes, and it is tacp's worker that
// makes them ask (activities/modes.go), as it does for a worker set up by the README. A
// client that runs an agent directly does what tacp does: AskingMode, AskingEnv.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tacp-dev/tacp/activities"
)

// Agent is one real agent as the tests run it.
type Agent struct {
	// Name is the agent's short name in test and benchmark names.
	Name string
	// Package and Version are its npm package.
	Package, Version string
	// Bin is its executable under node_modules/.bin; Args its arguments for ACP over stdio.
	Bin  string
	Args []string
	// Provider is the API it calls.
	Provider Provider
	// AskingMode is the ACP session mode in which it asks before writes and commands;
	// empty for an agent without modes.
	AskingMode string
	// AskingEnv makes an agent without modes ask before writes and commands.
	AskingEnv []string
	// ReportsUsage is whether it reports token usage in its session/prompt answers.
	ReportsUsage bool
	// Steering is whether it advertises the steering extension (_meta.steering.supported),
	// which takes the prompt as content blocks; tacp interrupts the others to steer them.
	Steering bool
	// setup writes the agent's settings under home and returns its extra environment.
	setup func(home string, s *Server) ([]string, error)
}

// Setup prepares home (created if missing) as the agent's HOME against s, and returns the
// whole environment the agent needs besides PATH: HOME, the fake model's address and key,
// and the agent's own variables.
func (a Agent) Setup(home string, s *Server) ([]string, error) {
	if s.Provider != a.Provider {
		return nil, fmt.Errorf("%s speaks %s, not %s", a.Name, a.Provider, s.Provider)
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	env, err := a.setup(home, s)
	if err != nil {
		return nil, fmt.Errorf("%s setup: %w", a.Name, err)
	}
	return append([]string{"HOME=" + home}, env...), nil
}

// CommandLine is the agent's command line for a tacp worker (WorkerOptions.Agent): the
// agent's executable under binDir, started by /usr/bin/env with env (tacp's agent command
// is not a shell, so the variables go through env(1)). Each word is quoted for
// activities.SplitCommand.
func (a Agent) CommandLine(binDir string, env []string) string {
	words := []string{"/usr/bin/env"}
	words = append(words, env...)
	words = append(words, filepath.Join(binDir, a.Bin))
	words = append(words, a.Args...)
	for i, w := range words {
		words[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(words, " ")
}

// Claude is Claude Code behind claude-agent-acp, on the Anthropic API.
//
// Quirks: Claude Code refuses to run as root unless IS_SANDBOX=1. It starts sessions in its
// "auto" mode, where it approves its own tool calls; the ACP mode "default" (shown as
// "Manual") asks. Non-essential traffic (telemetry, update checks) is switched off: it has
// nowhere to go.
var Claude = Agent{
	Name: "claude", Package: "@agentclientprotocol/claude-agent-acp", Version: "0.101.0",
	Bin: "claude-agent-acp", Provider: Anthropic, AskingMode: "default", ReportsUsage: true, Steering: true,
	setup: func(home string, s *Server) ([]string, error) {
		return append(s.Env(),
			"IS_SANDBOX=1",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"DISABLE_AUTOUPDATER=1",
			// A provider's limit is tacp's to wait out on a durable timer, not the agent's
			// to retry in memory (activities/limits.go).
			"CLAUDE_CODE_MAX_RETRIES=0",
		), nil
	},
}

// CodexModel is the model Codex is configured with: one its catalog knows (an unknown one
// makes it print a warning into the reply) whose tools are the classic function tools
// (exec_command, apply_patch), not the code-mode tool of the newest models.
const CodexModel = "gpt-5.5"

// Codex is Codex (`codex app-server`) behind codex-acp, on the OpenAI Responses API.
//
// Quirks: it reads its provider from $CODEX_HOME/config.toml: a custom provider ("fakemodel",
// wire_api "responses", its key from FAKEMODEL_API_KEY) needs no login, where the built-in
// OpenAI provider answers session/new with "Authentication required" until the client
// calls authenticate. It starts sessions in mode "agent" ("Auto review": it approves its own
// writes inside the workspace); mode read-only asks before every write (apply_patch) and
// every command run outside its sandbox.
var Codex = Agent{
	Name: "codex", Package: "@agentclientprotocol/codex-acp", Version: "2.6.0",
	Bin: "codex-acp", Provider: OpenAI, AskingMode: "read-only", ReportsUsage: true, Steering: true,
	setup: func(home string, s *Server) ([]string, error) {
		dir := filepath.Join(home, ".codex")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		config := fmt.Sprintf(`model = %q
model_provider = "fakemodel"
check_for_update_on_startup = false

[model_providers.fakemodel]
name = "fakemodel"
base_url = %q
wire_api = "responses"
env_key = "FAKEMODEL_API_KEY"
request_max_retries = 0
stream_max_retries = 0
`, CodexModel, s.URL+"/v1")
		if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(config), 0o644); err != nil {
			return nil, err
		}
		return []string{
			"CODEX_HOME=" + dir,
			"FAKEMODEL_API_KEY=" + APIKey,
		}, nil
	},
}

// GeminiCLI is Gemini CLI in its ACP mode (--acp), on the Gemini API.
//
// Quirks: GOOGLE_GEMINI_BASE_URL selects its "gateway" authentication, which needs no login
// (GEMINI_API_KEY is sent as the key). Its default mode ("default") asks before edits and
// commands. It reports token usage only in the prompt answer's _meta.quota, so tacp sums
// none. It advertises no steering extension. It keeps a session for session/load only once
// a turn of it has ended. Offered the client's fs/*, it reads and writes through them, but
// cannot create a file that way (it does not take the client's "Resource not found" error as
// a missing file).
var GeminiCLI = Agent{
	Name: "gemini", Package: "@google/gemini-cli", Version: "0.61.0",
	Bin: "gemini", Args: []string{"--acp"}, Provider: Gemini, AskingMode: "default",
	setup: func(home string, s *Server) ([]string, error) {
		return s.Env(), nil
	},
}

// OpenCode is OpenCode (`opencode acp`), here on the Anthropic API through its bundled
// anthropic provider, pointed at the fake by ~/.config/opencode/opencode.json.
//
// Quirks: it offers no modes; its permission settings decide, and they allow edits and
// commands unless the configuration says "ask" (AskingEnv). OPENCODE_DISABLE_MODELS_FETCH
// keeps it from fetching its model catalog from the network (it falls back to the one it
// ships). It calls fs/write_text_file on the client even when the client did not offer it,
// and writes the file itself when refused. It advertises no steering extension.
var OpenCode = Agent{
	Name: "opencode", Package: "opencode-ai", Version: "1.18.33",
	Bin: "opencode", Args: []string{"acp"}, Provider: Anthropic, ReportsUsage: true,
	AskingEnv: []string{"OPENCODE_PERMISSION=" + activities.OpenCodeAsks},
	setup: func(home string, s *Server) ([]string, error) {
		dir := filepath.Join(home, ".config", "opencode")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		config := fmt.Sprintf(`{
  "model": "anthropic/claude-sonnet-4-5",
  "autoupdate": false,
  "share": "disabled",
  "provider": {"anthropic": {"options": {"baseURL": %q, "apiKey": %q}}}
}
`, s.URL+"/v1", APIKey)
		if err := os.WriteFile(filepath.Join(dir, "opencode.json"), []byte(config), 0o644); err != nil {
			return nil, err
		}
		return []string{
			"OPENCODE_DISABLE_MODELS_FETCH=1",
			"OPENCODE_DISABLE_AUTOUPDATE=1",
			// No default plugins (installed from the npm registry at start), no language
			// server downloads, no reading of Claude Code's files in the same HOME.
			"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
			"OPENCODE_DISABLE_CLAUDE_CODE=1",
		}, nil
	},
}

// Agents are the real agents, in the order tests run them.
var Agents = []Agent{Claude, Codex, GeminiCLI, OpenCode}

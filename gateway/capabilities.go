package gateway

// What initialize advertises of the agent behind the sessions: promptCapabilities,
// mcpCapabilities and authMethods come from what the worker learned of its agent (the
// profile the gateway's sessions run — Options.Agent, else the worker's default — as its
// last agent start answered, signals.ProfileInfo), asked once per connection within a
// bound. A worker that has not started that agent yet, or none that answers, leaves them
// empty; Options.PromptCapabilities / McpCapabilities override them.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

// profilesTimeout bounds asking the workers in initialize.
const profilesTimeout = 3 * time.Second

// agentOffer is what initialize advertises of the agent.
type agentOffer struct {
	prompt acp.PromptCapabilities
	mcp    acp.McpCapabilities
	auth   []acp.AuthMethod
	// settings is the agent's offer in a new session (ProfileInfo.Settings): what
	// session/new answers before the session's agent has run.
	settings *signals.AgentSettings
}

// learnOffer asks the workers what they learned of the gateway's agent profile.
func (c *conn) learnOffer(ctx context.Context) agentOffer {
	var out agentOffer
	if c.g.o.Client != nil {
		pctx, cancel := context.WithTimeout(ctx, profilesTimeout)
		infos, err := c.client().Profiles(pctx)
		cancel()
		if err != nil {
			c.g.o.Logger.Debug("initialize: the workers' agent capabilities are unknown", "error", err)
		}
		if info, ok := pickProfile(infos, c.g.o.Agent); ok {
			_ = json.Unmarshal(info.PromptCapabilities, &out.prompt)
			_ = json.Unmarshal(info.McpCapabilities, &out.mcp)
			out.settings = info.Settings
			for _, raw := range info.AuthMethods {
				var m acp.AuthMethod
				if json.Unmarshal(raw, &m) == nil {
					out.auth = append(out.auth, m)
				}
			}
		}
	}
	if o := c.g.o.PromptCapabilities; o != nil {
		out.prompt = *o
	}
	if o := c.g.o.McpCapabilities; o != nil {
		out.mcp = *o
	}
	return out
}

// pickProfile is the profile named name, or the default one when name is empty.
func pickProfile(infos []signals.ProfileInfo, name string) (signals.ProfileInfo, bool) {
	for _, p := range infos {
		if (name != "" && p.Name == name) || (name == "" && p.Default) {
			return p, true
		}
	}
	return signals.ProfileInfo{}, false
}

// authMethodID is an auth method's id, whatever its kind.
func authMethodID(m acp.AuthMethod) string {
	switch {
	case m.EnvVar != nil:
		return m.EnvVar.Id
	case m.Terminal != nil:
		return m.Terminal.Id
	case m.Agent != nil:
		return m.Agent.Id
	}
	return ""
}

// authenticateRefusal answers authenticate: tacp runs the agent on the worker, so no method
// a client completes reaches it; the message says what the worker's operator must set.
func authenticateRefusal(methods []acp.AuthMethod, id string) error {
	var vars []string
	known := false
	for _, m := range methods {
		if authMethodID(m) != id {
			continue
		}
		known = true
		if m.EnvVar != nil {
			for _, v := range m.EnvVar.Vars {
				if !v.Optional {
					vars = append(vars, v.Name)
				}
			}
		}
	}
	what := "log the agent in on the worker, as the user the worker runs as"
	if len(vars) > 0 {
		what = fmt.Sprintf("set %s in the agent profile's env or env_files on the worker", strings.Join(vars, ", "))
	}
	if !known {
		what = "authenticate the agent on the worker (set its API key in the agent profile's env or env_files, or log it in there)"
	}
	return &acp.RequestError{Code: -32000, Message: fmt.Sprintf(
		"authentication %q cannot complete through tacp: the agent runs on the worker, not beside this editor; the worker's operator must %s", id, what)}
}

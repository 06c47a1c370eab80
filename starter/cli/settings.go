package cli

// starter mode and starter config: the agent's modes and config options as the session
// keeps them (status.agent_settings), and set_mode / set_config_option to change them.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/tacp-dev/tacp/signals"
)

func cmdMode(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	as := fs.String("as", "", "who sets the mode, as the journal records it (default: cli:USER@HOST)")
	if !e.parse(fs, args, true) {
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	if fs.NArg() == 0 {
		v, err := e.agentSettings(ctx)
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			e.printJSON(map[string]any{"current_mode_id": v.CurrentModeID, "modes": v.Modes})
			return exitOK
		}
		for _, raw := range v.Modes {
			var m struct{ ID, Name string }
			_ = json.Unmarshal(raw, &m)
			mark := " "
			if m.ID == v.CurrentModeID {
				mark = "*"
			}
			fmt.Fprintf(e.out, "%s %s\t%s\n", mark, m.ID, m.Name)
		}
		if len(v.Modes) == 0 {
			fmt.Fprintln(e.out, "the agent offers no modes (yet: it reports them when a turn first runs)")
		}
		return exitOK
	}
	res, err := e.c.SetMode(ctx, e.session, signals.SetModeRequest{ModeID: fs.Arg(0), By: cliIdentity(*as)})
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(res)
	} else {
		fmt.Fprintln(e.out, res.ModeID)
	}
	return exitOK
}

func cmdConfig(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	as := fs.String("as", "", "who sets the option, as the journal records it (default: cli:USER@HOST)")
	if !e.parse(fs, args, true) {
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	switch fs.NArg() {
	case 0:
		v, err := e.agentSettings(ctx)
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			e.printJSON(map[string]any{"config_options": v.ConfigOptions, "models": v.Models})
			return exitOK
		}
		for _, raw := range v.ConfigOptions {
			var o struct {
				ID           string          `json:"id"`
				Name         string          `json:"name"`
				CurrentValue json.RawMessage `json:"currentValue"`
			}
			_ = json.Unmarshal(raw, &o)
			fmt.Fprintf(e.out, "%s = %s\t%s\n", o.ID, o.CurrentValue, o.Name)
		}
		if len(v.ConfigOptions) == 0 && len(v.Models) > 0 {
			fmt.Fprintf(e.out, "model (legacy session/set_model): %s\n", v.Models)
		}
		if len(v.ConfigOptions) == 0 && len(v.Models) == 0 {
			fmt.Fprintln(e.out, "the agent offers no config options (yet: it reports them when a turn first runs)")
		}
		return exitOK
	case 2:
		res, err := e.c.SetConfigOption(ctx, e.session, signals.SetConfigOptionRequest{ConfigID: fs.Arg(0), Value: fs.Arg(1), By: cliIdentity(*as)})
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			e.printJSON(res)
		} else {
			fmt.Fprintf(e.out, "%s = %s\n", res.ConfigID, res.Value)
		}
		return exitOK
	}
	fmt.Fprintln(e.err, Name+" config: want no arguments (show) or ID VALUE (set)")
	return exitError
}

// agentSettings is the session's agent settings from its status (empty when the agent has
// offered none yet).
func (e *env) agentSettings(ctx context.Context) (*signals.AgentSettings, error) {
	st, err := e.c.Status(ctx, e.session)
	if err != nil {
		return nil, err
	}
	if st.AgentSettings == nil {
		return &signals.AgentSettings{}, nil
	}
	return st.AgentSettings, nil
}

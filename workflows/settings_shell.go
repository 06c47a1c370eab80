package workflows

// The session's side of the agent's offer (settings.go is the core): what the runner
// reports after session/new or session/load and every settings update of the agent are fed
// to the core and journaled as agent.settings when the view changes; set_mode and
// set_config_option are checked by the core, journaled, and delivered into the live agent
// (the next turn's TurnInput carries them otherwise, and to every new agent process).

import (
	"encoding/json"

	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
)

// agentSettingsChange guards journaling agent.settings: a history recorded before it
// journaled none, and its replay must number the journal as it did.
const agentSettingsChange = "agent-settings"

// settingsOn reports whether this run keeps the agent's offer (asked once per run, the
// first time the offer would change).
func (s *session) settingsOn(ctx workflow.Context) bool {
	if s.settingsVersion == nil {
		v := workflow.GetVersion(ctx, agentSettingsChange, workflow.DefaultVersion, 1)
		s.settingsVersion = &v
	}
	return *s.settingsVersion > workflow.DefaultVersion
}

func (s *session) settings() *Settings {
	if s.Settings == nil {
		s.Settings = &Settings{}
	}
	return s.Settings
}

// offered takes the runner's report of a new agent session.
func (s *session) offered(ctx workflow.Context, turnID int64, o *signals.AgentSettings) {
	if o == nil || !s.settingsOn(ctx) {
		return
	}
	if s.settings().Offered(*o) {
		s.journal(ctx, signals.EventAgentSettings, turnID, s.Settings.View())
	}
}

// observeSettings feeds one agent.update to the core.
func (s *session) observeSettings(ctx workflow.Context, turnID int64, ev json.RawMessage) {
	if !IsSettingsUpdate(ev) || !s.settingsOn(ctx) {
		return
	}
	if s.settings().Observe(ev) {
		s.journal(ctx, signals.EventAgentSettings, turnID, s.Settings.View())
	}
}

// --- set_mode ---

func (s *session) checkSetMode(req signals.SetModeRequest) *signals.Rejection {
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return rej
	}
	return s.settings().CheckMode(req.ModeID)
}

func (s *session) validateSetMode(ctx workflow.Context, req signals.SetModeRequest) error {
	if rej := s.checkSetMode(req); rej != nil {
		return rej.ApplicationError()
	}
	return nil
}

func (s *session) setMode(ctx workflow.Context, req signals.SetModeRequest) (signals.SetModeResult, error) {
	s.updates++
	if rej := s.checkSetMode(req); rej != nil {
		return signals.SetModeResult{}, rej.ApplicationError()
	}
	// Setting the mode it has records the choice (re-applied to new agent processes) and
	// journals nothing.
	if prev := s.Settings.SetMode(req.ModeID); prev != req.ModeID {
		s.journal(ctx, signals.EventModeChanged, s.turnID(), signals.ModeChangedData{ModeID: req.ModeID, Previous: prev, ViewerID: req.ViewerID})
		s.deliverSettings(signals.SessionChoices{ModeID: req.ModeID})
	}
	return signals.SetModeResult{ModeID: req.ModeID}, nil
}

// --- set_config_option ---

func (s *session) checkSetConfig(req signals.SetConfigOptionRequest) *signals.Rejection {
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return rej
	}
	return s.settings().CheckConfig(req.ConfigID, req.Value)
}

func (s *session) validateSetConfig(ctx workflow.Context, req signals.SetConfigOptionRequest) error {
	if rej := s.checkSetConfig(req); rej != nil {
		return rej.ApplicationError()
	}
	return nil
}

func (s *session) setConfig(ctx workflow.Context, req signals.SetConfigOptionRequest) (signals.SetConfigOptionResult, error) {
	s.updates++
	if rej := s.checkSetConfig(req); rej != nil {
		return signals.SetConfigOptionResult{}, rej.ApplicationError()
	}
	if prev := s.Settings.SetConfig(req.ConfigID, req.Value); prev != req.Value {
		s.journal(ctx, signals.EventConfigOptionChanged, s.turnID(), signals.ConfigOptionChangedData{ConfigID: req.ConfigID, Value: req.Value, Previous: prev, ViewerID: req.ViewerID})
		s.deliverSettings(signals.SessionChoices{ConfigOptions: []signals.ConfigChoice{{ConfigID: req.ConfigID, Value: req.Value}}})
	}
	return signals.SetConfigOptionResult{ConfigID: req.ConfigID, Value: req.Value}, nil
}

// deliverSettings sends a choice into the live turn's agent; with no turn live (or one
// whose runner has already answered) the next turn's TurnInput carries it.
func (s *session) deliverSettings(c signals.SessionChoices) {
	if s.Turn == nil || s.Turn.Finished != nil || s.Turn.Cancelling {
		return
	}
	s.queueDelivery(signals.Delivery{Kind: signals.DeliverSettings, Choices: &c})
}

// settingsSignals are the signal twins of set_mode and set_config_option: a refused one
// changes nothing and journals nothing.
func (s *session) settingsSignals() []signalReceiver {
	return []signalReceiver{
		{name: signals.UpdateSetMode, handle: decoded(func(ctx workflow.Context, req signals.SetModeRequest) {
			if s.checkSetMode(req) == nil {
				_, _ = s.setMode(ctx, req)
			}
		})},
		{name: signals.UpdateSetConfigOption, handle: decoded(func(ctx workflow.Context, req signals.SetConfigOptionRequest) {
			if s.checkSetConfig(req) == nil {
				_, _ = s.setConfig(ctx, req)
			}
		})},
	}
}

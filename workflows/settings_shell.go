package workflows

// The session's side of the agent's offer (settings.go is the core): what the runner
// reports after session/new or session/load and every settings update of the agent are fed
// to the core and journaled as agent.settings when the view changes; set_mode and
// set_config_option are checked by the core, journaled, and delivered into the live agent
// (the next turn's TurnInput carries them otherwise, and to every new agent process).

import (
	"bytes"
	"encoding/json"
	"slices"

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

// settingsReassertChange guards delivering, to a turn's new attempt, the choices made since
// the turn's input was built (a history recorded before it queued no such delivery).
const settingsReassertChange = "settings-reassert"

// offered takes the runner's report of a new agent session. The report shows what the
// turn's input carried (LiveTurn.Choices): a choice a client made since is newer, so it is
// kept in the view rather than followed back to the report, and it reaches this attempt's
// agent — by the settings delivery queued when it was made, or, when that went to an
// earlier attempt, by one queued now.
func (s *session) offered(ctx workflow.Context, turnID int64, o *signals.AgentSettings) {
	if o == nil || !s.settingsOn(ctx) {
		return
	}
	st := s.settings()
	var sent *signals.SessionChoices
	if s.Turn != nil && s.Turn.TurnID == turnID {
		sent = s.Turn.Choices
	}
	later := laterChoices(st.Choices, sent)
	before := st.snapshot()
	st.Offered(*o)
	kept := signals.SessionChoices{}
	if later.ModeID != "" && st.CheckMode(later.ModeID) == nil {
		st.SetMode(later.ModeID)
		kept.ModeID = later.ModeID
	}
	for _, c := range later.ConfigOptions {
		if st.CheckConfig(c.ConfigID, c.Value) == nil {
			st.SetConfig(c.ConfigID, c.Value)
			kept.ConfigOptions = append(kept.ConfigOptions, c)
		}
	}
	if !bytes.Equal(before, st.snapshot()) {
		s.journal(ctx, signals.EventAgentSettings, turnID, st.View())
	}
	if kept = laterChoices(kept, s.pendingSettings(turnID)); kept.Empty() {
		return
	}
	if workflow.GetVersion(ctx, settingsReassertChange, workflow.DefaultVersion, 1) > workflow.DefaultVersion {
		s.deliverSettings(kept)
	}
}

// laterChoices is what was chosen and differs from what a turn's input (or a delivery)
// carried.
func laterChoices(chosen signals.SessionChoices, sent *signals.SessionChoices) signals.SessionChoices {
	if sent == nil {
		sent = &signals.SessionChoices{}
	}
	var out signals.SessionChoices
	if chosen.ModeID != sent.ModeID {
		out.ModeID = chosen.ModeID
	}
	for _, c := range chosen.ConfigOptions {
		if !slices.Contains(sent.ConfigOptions, c) {
			out.ConfigOptions = append(out.ConfigOptions, c)
		}
	}
	return out
}

// pendingSettings is what the settings deliveries waiting for the live attempt of turnID
// carry (the latest of each setting).
func (s *session) pendingSettings(turnID int64) *signals.SessionChoices {
	out := &signals.SessionChoices{}
	for _, d := range s.Deliveries {
		if d.Kind != signals.DeliverSettings || d.Choices == nil || d.TurnID != turnID || s.Turn == nil || d.Attempt != s.Turn.Attempt {
			continue
		}
		if d.Choices.ModeID != "" {
			out.ModeID = d.Choices.ModeID
		}
		out.ConfigOptions = append(out.ConfigOptions, d.Choices.ConfigOptions...)
	}
	return out
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

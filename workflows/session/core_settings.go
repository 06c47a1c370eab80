package session

// The session core's side of the agent's offer (settings.go holds the offer itself): what
// the runner reports after session/new or session/load and every settings update of the
// agent are fed to the offer and journaled as agent.settings when the view changes;
// set_mode and set_config_option are checked, journaled, and delivered into the live agent
// (the next turn's TurnInput carries them otherwise, and to every new agent process).

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

func (s *Core) settings() *Settings {
	if s.Settings == nil {
		s.Settings = &Settings{}
	}
	return s.Settings
}

// offered takes the runner's report of a new agent session. The report shows what the
// turn's input carried (LiveTurn.Choices): a choice a client made since is newer, so it is
// kept in the view rather than followed back to the report, and it reaches this attempt's
// agent — by the settings delivery queued when it was made, or, when that went to an
// earlier attempt, by one queued now.
func (s *Core) offered(now time.Time, turnID int64, o *signals.AgentSettings) {
	if o == nil {
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
		s.journal(now, signals.EventAgentSettings, turnID, st.View())
	}
	s.keepUnderCeiling(now)
	if kept = laterChoices(kept, s.pendingSettings(turnID)); kept.Empty() {
		return
	}
	s.deliverSettings(kept)
}

// settingsApplied takes the runner's report of the agent's offer after a settings delivery
// was applied in the live agent. Choices made since, still to be delivered, are newer than
// the report and stay in the view.
func (s *Core) settingsApplied(now time.Time, turnID int64, o *signals.AgentSettings) {
	st := s.settings()
	before := st.snapshot()
	later := s.pendingSettings(turnID)
	st.Offered(*o)
	if later.ModeID != "" && st.CheckMode(later.ModeID) == nil {
		st.SetMode(later.ModeID)
	}
	for _, c := range later.ConfigOptions {
		if st.CheckConfig(c.ConfigID, c.Value) == nil {
			st.SetConfig(c.ConfigID, c.Value)
		}
	}
	if !bytes.Equal(before, st.snapshot()) {
		s.journal(now, signals.EventAgentSettings, turnID, st.View())
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
func (s *Core) pendingSettings(turnID int64) *signals.SessionChoices {
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
func (s *Core) observeSettings(now time.Time, turnID int64, ev json.RawMessage) {
	if !IsSettingsUpdate(ev) {
		return
	}
	if s.settings().Observe(ev) {
		s.journal(now, signals.EventAgentSettings, turnID, s.Settings.View())
	}
}

func (s *Core) checkSetMode(req signals.SetModeRequest) *signals.Rejection {
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return rej
	}
	if err := signals.ValidateBy(req.By); err != nil {
		return signals.Reject(signals.RejectInvalidRequest, "%v", err)
	}
	if rej := s.settings().CheckMode(req.ModeID); rej != nil {
		return rej
	}
	return s.Settings.CheckModePolicy(s.Policy.Level, req.ModeID)
}

func (s *Core) setMode(now time.Time, req signals.SetModeRequest) (signals.SetModeResult, error) {
	// Setting the mode it has records the choice (re-applied to new agent processes) and
	// journals nothing.
	if prev := s.Settings.SetMode(req.ModeID); prev != req.ModeID {
		s.journal(now, signals.EventModeChanged, s.turnID(), signals.ModeChangedData{ModeID: req.ModeID, Previous: prev, ViewerID: req.ViewerID, By: req.By})
		s.deliverSettings(signals.SessionChoices{ModeID: req.ModeID})
	}
	return signals.SetModeResult{ModeID: req.ModeID}, nil
}

func (s *Core) checkSetConfig(req signals.SetConfigOptionRequest) *signals.Rejection {
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return rej
	}
	if err := signals.ValidateBy(req.By); err != nil {
		return signals.Reject(signals.RejectInvalidRequest, "%v", err)
	}
	if rej := s.settings().CheckConfig(req.ConfigID, req.Value); rej != nil {
		return rej
	}
	if req.ConfigID == signals.ConfigMode {
		return s.Settings.CheckModePolicy(s.Policy.Level, req.Value)
	}
	return nil
}

// governMode follows an asking policy set over allow_all: an agent left in a mode in which
// it decides by itself is put in its asking mode, journaled as a mode change the policy
// made, and delivered to the live turn's agent.
func (s *Core) governMode(now time.Time, viewerID string) {
	if s.Settings == nil {
		return
	}
	left := s.Settings.Govern()
	if left == "" {
		return
	}
	mode := s.Settings.Offer.CurrentModeID
	s.journal(now, signals.EventModeChanged, s.turnID(), signals.ModeChangedData{ModeID: mode, Previous: left, ViewerID: viewerID, ByPolicy: true})
	s.deliverSettings(signals.SessionChoices{ModeID: mode})
}

func (s *Core) setConfig(now time.Time, req signals.SetConfigOptionRequest) (signals.SetConfigOptionResult, error) {
	if prev := s.Settings.SetConfig(req.ConfigID, req.Value); prev != req.Value {
		s.journal(now, signals.EventConfigOptionChanged, s.turnID(), signals.ConfigOptionChangedData{ConfigID: req.ConfigID, Value: req.Value, Previous: prev, ViewerID: req.ViewerID, By: req.By})
		s.deliverSettings(signals.SessionChoices{ConfigOptions: []signals.ConfigChoice{{ConfigID: req.ConfigID, Value: req.Value}}})
	}
	return signals.SetConfigOptionResult{ConfigID: req.ConfigID, Value: req.Value}, nil
}

// deliverSettings sends a choice into the live turn's agent; with no turn live (or one
// whose runner has already answered) the next turn's TurnInput carries it.
func (s *Core) deliverSettings(c signals.SessionChoices) {
	if s.Turn == nil || s.Turn.Finished != nil || s.Turn.Cancel != cancelNone {
		return
	}
	s.queueDelivery(signals.Delivery{Kind: signals.DeliverSettings, Choices: &c})
}

package session

// The update table: every update a session takes, once. From it come the update handlers
// and their validators (workflows/session.go), the signal twins and their place in the drain order
// (core_signals.go), the scenario files' `update` verb (scenario_test.go) and the names the
// tests check against signals/; the client's typed calls share each entry's descriptor
// (signals.Updates, tacpclient.Call). Adding an update is a request and result type and a field
// of signals.Updates, and one entry here with its rule and its effect.
//
// Each entry says, for its request type:
//
//   - check: the rule on the session's state, pure. The update's validator, its handler
//     (after the validator, which may have passed on an older state) and its signal twin
//     all run it, so a twin is refused exactly when the update would be.
//   - strict: what only the validator checks beyond check. Validators never run on replay,
//     so strict may refuse what a recorded twin once took.
//   - ask: what the validator asks of the worker (admission, the MCP policy): the core
//     reads no worker's settings; the shell asks its worker (workflows/session.go).
//   - apply: the update's effect and answer, once check passed.
//   - rejected: what a refused twin journals to tell its sender why (contract §3); a twin
//     without it is dropped silently.
//   - twinAsks: the twin asks the worker too, its answer recorded by the shell (a SideEffect).

import (
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/tacp-dev/tacp/signals"
)

// Updates is the table, in the order their twins drain within a workflow task (wake drains
// after set_config_option, where it always has: see SignalOrder).
var Updates = []UpdateRule{
	&update[signals.PromptRequest, signals.PromptResult]{
		def:   signals.Updates.Prompt,
		check: (*Core).checkPrompt,
		strict: func(req signals.PromptRequest) *signals.Rejection {
			// Content is kept as the client's bytes (text fields are decoded, and Go's decoder
			// replaces invalid UTF-8 in them); refuse bytes that are not UTF-8 before they
			// reach the journal and the agent.
			if !utf8.Valid(req.Content) {
				return signals.Reject(signals.RejectInvalidRequest, "prompt content is not valid UTF-8")
			}
			return nil
		},
		// The worker may no longer offer what the session names (a profile removed, a
		// workspace that became a symlink out of its root): refuse before any turn runs
		// (contract §10).
		ask: func(s *Core, _ signals.PromptRequest) Ask {
			cfg := s.cfg.SessionConfig
			return Ask{Config: &cfg}
		},
		effect: (*Core).prompt,
		rejected: func(s *Core, now time.Time, req signals.PromptRequest, rej *signals.Rejection) {
			s.journal(now, signals.EventPromptRejected, 0, signals.RejectedData{ClientMessageID: req.ClientMessageID, Type: rej.Type, Message: rej.Message})
		},
	},
	&update[signals.SteerRequest, signals.SteerResult]{
		def:    signals.Updates.Steer,
		check:  (*Core).checkSteer,
		effect: (*Core).steer,
		rejected: func(s *Core, now time.Time, req signals.SteerRequest, rej *signals.Rejection) {
			s.journal(now, signals.EventSteerRejected, s.Steer.TurnID, signals.RejectedData{ClientMsgID: req.ClientMsgID, Type: rej.Type, Message: rej.Message, Details: rej.Details})
			s.metric(MetricSteers, map[string]string{"outcome": rej.Type})
		},
	},
	&update[signals.CancelRequest, signals.CancelResult]{
		def:    signals.Updates.Cancel,
		check:  (*Core).checkCancel,
		effect: (*Core).cancel,
	},
	&update[signals.PermissionRespondRequest, signals.PermissionRespondResult]{
		def: signals.Updates.PermissionRespond,
		check: func(s *Core, req signals.PermissionRespondRequest) *signals.Rejection {
			_, _, rej := s.checkRespond(req)
			return rej
		},
		effect: (*Core).respond,
	},
	&update[signals.PermissionForgetRequest, signals.PermissionForgetResult]{
		def: signals.Updates.PermissionForget,
		check: func(_ *Core, req signals.PermissionForgetRequest) *signals.Rejection {
			return ValidateForget(req.Tool)
		},
		effect: (*Core).forget,
	},
	&update[signals.SetPolicyRequest, signals.SetPolicyResult]{
		def: signals.Updates.SetPolicy,
		check: func(s *Core, req signals.SetPolicyRequest) *signals.Rejection {
			if rej := s.forbidden(req.ViewerID); rej != nil {
				return rej
			}
			if rej := checkPolicyLevel(req.Level); rej != nil {
				return rej
			}
			return s.checkPolicyCeiling(req.Level)
		},
		effect: (*Core).setPolicy,
	},
	&update[signals.AttachRequest, signals.Status]{
		def:    signals.Updates.Attach,
		check:  func(_ *Core, req signals.AttachRequest) *signals.Rejection { return checkAttach(req) },
		effect: (*Core).attach,
	},
	&update[signals.DetachRequest, signals.DetachResult]{
		def:    signals.Updates.Detach,
		effect: (*Core).detach,
	},
	&update[signals.CloseRequest, signals.CloseResult]{
		def:    signals.Updates.Close,
		effect: (*Core).close,
	},
	&update[signals.SetModeRequest, signals.SetModeResult]{
		def:    signals.Updates.SetMode,
		check:  (*Core).checkSetMode,
		effect: (*Core).setMode,
	},
	&update[signals.SetConfigOptionRequest, signals.SetConfigOptionResult]{
		def:    signals.Updates.SetConfigOption,
		check:  (*Core).checkSetConfig,
		effect: (*Core).setConfig,
	},
	&update[signals.RetryNowRequest, signals.RetryNowResult]{
		def:    signals.Updates.RetryNow,
		check:  (*Core).checkRetryNow,
		effect: (*Core).retryNow,
	},
	&update[signals.ElicitationRespondRequest, signals.ElicitationRespondResult]{
		def: signals.Updates.ElicitationRespond,
		check: func(s *Core, req signals.ElicitationRespondRequest) *signals.Rejection {
			_, _, rej := s.checkElicitationRespond(req)
			return rej
		},
		effect: (*Core).elicitationRespond,
	},
	&update[signals.SetMcpServersRequest, signals.SetMcpServersResult]{
		def:      signals.Updates.SetMcpServers,
		check:    (*Core).checkSetMcpServers,
		ask:      func(_ *Core, req signals.SetMcpServersRequest) Ask { return Ask{McpServers: req.McpServers} },
		twinAsks: true,
		effect:   (*Core).setMcpServers,
	},
	&update[signals.SetTitleRequest, signals.SetTitleResult]{
		def:    signals.Updates.SetTitle,
		check:  (*Core).checkSetTitle,
		effect: (*Core).setTitle,
	},
}

// UpdateByName indexes the table.
var UpdateByName = func() map[string]UpdateRule {
	m := make(map[string]UpdateRule, len(Updates))
	for _, u := range Updates {
		if _, dup := m[u.Name()]; dup {
			panic("update " + u.Name() + " is in the table twice")
		}
		m[u.Name()] = u
	}
	return m
}()

// UpdateRule is one entry of the table, its request and result types erased.
type UpdateRule interface {
	Name() string
	// Decode reads a request from its JSON (a signal twin's payload, a scenario's line).
	Decode(raw json.RawMessage) (any, error)
	validate(s *Core, req any) (Ask, error)
	apply(s *Core, now time.Time, req any) (any, error)
	// twin takes the update's signal twin: refused, it changes nothing beyond its rejected
	// event; refused is the worker's recorded answer when twinAsks.
	twin(s *Core, now time.Time, req any, refused string)
	AsksInTwin() bool
	// validates: the update has a validator (a rule, a strict check or a question for the
	// worker); detach and close refuse nothing and have none.
	Validates() bool
}

// update is one entry of the table for the request type Req and the result type Res.
type update[Req, Res any] struct {
	// def is the update's typed name in signals/: the client's Call and this entry share it,
	// so their request and result types are the same by construction.
	def      signals.Update[Req, Res]
	check    func(*Core, Req) *signals.Rejection
	strict   func(Req) *signals.Rejection
	ask      func(*Core, Req) Ask
	effect   func(*Core, time.Time, Req) (Res, error)
	rejected func(*Core, time.Time, Req, *signals.Rejection)
	twinAsks bool
}

func (u *update[Req, Res]) Name() string     { return u.def.Name }
func (u *update[Req, Res]) AsksInTwin() bool { return u.twinAsks }
func (u *update[Req, Res]) Validates() bool  { return u.check != nil || u.strict != nil || u.ask != nil }

func (u *update[Req, Res]) Decode(raw json.RawMessage) (any, error) {
	var req Req
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, err
	}
	return req, nil
}

func (u *update[Req, Res]) req(v any) (Req, error) {
	req, ok := v.(Req)
	if !ok {
		return req, signals.Reject(signals.RejectInvalidRequest, "%s: want a %T, not a %T", u.def.Name, req, v)
	}
	return req, nil
}

func (u *update[Req, Res]) checked(s *Core, req Req) *signals.Rejection {
	if u.check == nil {
		return nil
	}
	return u.check(s, req)
}

func (u *update[Req, Res]) validate(s *Core, v any) (Ask, error) {
	req, err := u.req(v)
	if err != nil {
		return Ask{}, err
	}
	if rej := u.checked(s, req); rej != nil {
		return Ask{}, rej
	}
	if u.strict != nil {
		if rej := u.strict(req); rej != nil {
			return Ask{}, rej
		}
	}
	if u.ask == nil {
		return Ask{}, nil
	}
	return u.ask(s, req), nil
}

func (u *update[Req, Res]) apply(s *Core, now time.Time, v any) (any, error) {
	req, err := u.req(v)
	if err != nil {
		return nil, err
	}
	if rej := u.checked(s, req); rej != nil {
		var zero Res
		return zero, rej
	}
	return u.effect(s, now, req)
}

func (u *update[Req, Res]) twin(s *Core, now time.Time, v any, refused string) {
	req, err := u.req(v)
	if err != nil {
		return
	}
	if rej := u.checked(s, req); rej != nil {
		if u.rejected != nil {
			u.rejected(s, now, req, rej)
		}
		return
	}
	if refused != "" {
		return
	}
	s.updates++
	_, _ = u.effect(s, now, req)
}

package workflows

// Admission: the worker's say on what a session may run (contract §10). The session's config
// names an agent profile and a workspace; only the worker knows which profiles it offers and
// which roots it allows, so the workflow asks it through Admission:
//
//   - once when a session starts, inside a SideEffect, so that the answer is recorded and a
//     replay on a worker with other settings takes the same path: a refused session fails
//     at once with invalid_request, and its first prompt (Update-with-Start) gets the reason;
//   - in the prompt validator, which never runs on replay, so that a session whose profile
//     the operator has since removed is refused before any turn runs: the core's validator
//     asks it (Ask.Config) and the shell answers with this worker's Admission, so the core
//     itself reads nothing of the worker.
//
// The runner checks again before every turn: Admission is the clear early answer, the
// runner the last gate.

import (
	"encoding/json"

	"github.com/tacp-dev/tacp/workflows/session"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tacp-dev/tacp/signals"
)

// Admission is the worker's check of a session's config.
type Admission interface {
	// Admit refuses a config that names an agent profile the worker does not offer or a
	// workspace outside its roots. It must not change anything.
	Admit(cfg signals.SessionConfig) error
	// Offer lists the profiles a session may pick; DefaultProfile names the one serving
	// sessions that name none.
	Offer() []signals.ProfileInfo
	DefaultProfile() string
}

// NewSessionWorkflow returns SessionWorkflow bound to a worker's admission (nil admits
// everything: the runner still refuses what its worker does not allow).
func NewSessionWorkflow(adm Admission) func(workflow.Context, session.RunInput) error {
	return NewSessionWorkflowFor(adm, session.Build{})
}

// NewSessionWorkflowFor is NewSessionWorkflow of one build (doc.go).
func NewSessionWorkflowFor(adm Admission, build session.Build) func(workflow.Context, session.RunInput) error {
	return func(ctx workflow.Context, in session.RunInput) error {
		return sessionWorkflow(ctx, in, adm, build)
	}
}

// admitAtStart asks adm about a new session's config, recorded as a SideEffect. It returns
// the refusal's message ("" when admitted). Runs started by continue-as-new were admitted by
// their first run and are not asked again here.
func admitAtStart(ctx workflow.Context, adm Admission, cfg signals.SessionConfig) string {
	var msg string
	_ = workflow.SideEffect(ctx, func(workflow.Context) any {
		return admissionMessage(adm, cfg)
	}).Get(&msg)
	return msg
}

// admissionMessage is adm's refusal of cfg as a message, "" when admitted.
func admissionMessage(adm Admission, cfg signals.SessionConfig) string {
	if adm == nil {
		return ""
	}
	err := adm.Admit(cfg)
	if err == nil {
		return ""
	}
	if rej, ok := err.(*signals.Rejection); ok {
		return rej.Message
	}
	return err.Error()
}

// mcpChecker is the MCP part of an Admission (activities.Trust has it).
type mcpChecker interface {
	CheckMCP(servers json.RawMessage) error
}

// mcpRefusal is the worker's MCP policy's refusal of servers ("" when allowed, and when the
// admission has no MCP policy: the runner is the last gate). Only the MCP policy is asked,
// so that a session whose profile the operator removed still loads.
func mcpRefusal(adm Admission, servers json.RawMessage) string {
	m, ok := adm.(mcpChecker)
	if !ok || adm == nil {
		return ""
	}
	if err := m.CheckMCP(servers); err != nil {
		if rej, ok := err.(*signals.Rejection); ok {
			return rej.Message
		}
		return err.Error()
	}
	return ""
}

// NewProfilesWorkflow returns ProfilesWorkflow bound to a worker's admission: it answers
// with the agent profiles the worker that runs it offers, so that a client can show them
// before it creates a session (tacpclient.Client.Profiles). One workflow task, no activity.
func NewProfilesWorkflow(adm Admission) func(workflow.Context) ([]signals.ProfileInfo, error) {
	return func(ctx workflow.Context) ([]signals.ProfileInfo, error) {
		var offer []signals.ProfileInfo
		err := workflow.SideEffect(ctx, func(workflow.Context) any {
			if adm == nil {
				return []signals.ProfileInfo{}
			}
			return adm.Offer()
		}).Get(&offer)
		if err != nil {
			return nil, err
		}
		// The run stays open a while, answering the query: the clients that ask meanwhile
		// start no run of their own (tacpclient.Client.Profiles). A query changes no history, so
		// it answers what the answering worker offers now (what it learned of its agents
		// since, too), as the run's first task did.
		current := func() ([]signals.ProfileInfo, error) {
			if adm == nil {
				return offer, nil
			}
			return adm.Offer(), nil
		}
		if err := workflow.SetQueryHandlerWithOptions(ctx, signals.QueryProfiles, current,
			workflow.QueryHandlerOptions{Description: "the agent profiles the worker that ran this offers"}); err != nil {
			return nil, err
		}
		if err := workflow.Sleep(ctx, signals.ProfilesLinger); err != nil && !temporal.IsCanceledError(err) {
			return nil, err
		}
		return offer, nil
	}
}

package signals

// The updates of contract §3 as typed descriptors: each names one update with its request
// and result types. The session workflow's update table binds every entry to one
// (workflows/session/core_updates.go), and Call sends one, so a client and the workflow cannot
// disagree on an update's name or payloads: the compiler holds them together. Adding an
// update is its request and result types, a field here, and one entry in the workflow's
// table; every client can Call it from then on.

// Update is one update of a session: its name, its request type Req and its result type Res.
// Each is also a signal of the same name and payload (its twin, contract §3).
type Update[Req, Res any] struct{ Name string }

// Updates is every update a session takes.
var Updates = struct {
	Prompt             Update[PromptRequest, PromptResult]
	Steer              Update[SteerRequest, SteerResult]
	Cancel             Update[CancelRequest, CancelResult]
	PermissionRespond  Update[PermissionRespondRequest, PermissionRespondResult]
	PermissionForget   Update[PermissionForgetRequest, PermissionForgetResult]
	SetPolicy          Update[SetPolicyRequest, SetPolicyResult]
	Attach             Update[AttachRequest, Status]
	Detach             Update[DetachRequest, DetachResult]
	Close              Update[CloseRequest, CloseResult]
	SetMode            Update[SetModeRequest, SetModeResult]
	SetConfigOption    Update[SetConfigOptionRequest, SetConfigOptionResult]
	RetryNow           Update[RetryNowRequest, RetryNowResult]
	ElicitationRespond Update[ElicitationRespondRequest, ElicitationRespondResult]
	SetMcpServers      Update[SetMcpServersRequest, SetMcpServersResult]
	SetTitle           Update[SetTitleRequest, SetTitleResult]
}{
	Prompt:             Update[PromptRequest, PromptResult]{UpdatePrompt},
	Steer:              Update[SteerRequest, SteerResult]{UpdateSteer},
	Cancel:             Update[CancelRequest, CancelResult]{UpdateCancel},
	PermissionRespond:  Update[PermissionRespondRequest, PermissionRespondResult]{UpdatePermissionRespond},
	PermissionForget:   Update[PermissionForgetRequest, PermissionForgetResult]{UpdatePermissionForget},
	SetPolicy:          Update[SetPolicyRequest, SetPolicyResult]{UpdateSetPolicy},
	Attach:             Update[AttachRequest, Status]{UpdateAttach},
	Detach:             Update[DetachRequest, DetachResult]{UpdateDetach},
	Close:              Update[CloseRequest, CloseResult]{UpdateClose},
	SetMode:            Update[SetModeRequest, SetModeResult]{UpdateSetMode},
	SetConfigOption:    Update[SetConfigOptionRequest, SetConfigOptionResult]{UpdateSetConfigOption},
	RetryNow:           Update[RetryNowRequest, RetryNowResult]{UpdateRetryNow},
	ElicitationRespond: Update[ElicitationRespondRequest, ElicitationRespondResult]{UpdateElicitationRespond},
	SetMcpServers:      Update[SetMcpServersRequest, SetMcpServersResult]{UpdateSetMcpServers},
	SetTitle:           Update[SetTitleRequest, SetTitleResult]{UpdateSetTitle},
}

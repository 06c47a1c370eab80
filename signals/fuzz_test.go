package signals

// Fuzz targets for the wire contract. Every update, signal, query and activity payload of
// contract §3–7 arrives as JSON that tacp did not write: a client in another language, an
// operator's `temporal workflow signal`, an old worker. Decoding it must never panic, a
// value that decodes must re-encode to the same bytes every time after the first (so a
// payload carried across continue-as-new or replayed is stable), and the validation helpers
// of this package must refuse garbage. Run one target by hand for longer with
//
//	go test ./signals -run XXX -fuzz '^FuzzDecodePayload$' -fuzztime 5m
//
// and .ci/fuzz runs every target for a few seconds.

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// payloadType is one JSON payload type of the contract and a valid example of it.
type payloadType struct {
	name    string
	new     func() any // a pointer to a zero value
	example string
}

func pt[T any](name, example string) payloadType {
	return payloadType{name: name, new: func() any { return new(T) }, example: example}
}

// payloadTypes lists every payload of the contract: update and signal requests (each update
// has a signal of the same name and payload), their results, the runner's signals, workflow
// and activity arguments, the queries, and the event data clients decode.
var payloadTypes = []payloadType{
	// workflow and activity arguments
	pt[SessionConfig]("SessionConfig", `{"session_id":"s1","agent":"a -x","queue_limit":3,"grace_window":"15m","turn_deadline":"1h","permission_timeout":"10m","policy":"ask_always","steering":false,"max_run_events":80}`),
	pt[TurnInput]("TurnInput", `{"session_id":"s1","turn_id":3,"client_message_id":"m","text":"hi","content":[{"type":"text","text":"hi"}],"start_to_close":3900000000000,"heartbeat":10000000000}`),
	pt[RunTurnInput]("RunTurnInput", `{"session_id":"s1","turn_id":3,"text":"hi","session_workflow_id":"tacp-session-s1","heartbeat":1}`),
	pt[RunTurnResult]("RunTurnResult", `{"stop_reason":"end_turn","usage":{"totalTokens":30},"attempt":2,"batches":7}`),
	pt[Delivery]("Delivery", `{"kind":"permission","session_id":"s1","turn_id":2,"attempt":1,"request_id":"r","outcome":"selected","option_id":"allow"}`),
	pt[DeliveryResult]("DeliveryResult", `{"how":"injected"}`),
	// updates (and their signal twins) and their results
	pt[PromptRequest]("PromptRequest", `{"text":"hello","content":[{"type":"text","text":"hello"}],"client_message_id":"m1","viewer_id":"v"}`),
	pt[PromptResult]("PromptResult", `{"turn_id":2,"position":1,"duplicate":true}`),
	pt[SteerRequest]("SteerRequest", `{"text":"go left","expected_turn_id":"7.1","client_msg_id":"s1"}`),
	pt[SteerResult]("SteerResult", `{"outcome":"accepted","ref":{"turn_id":7,"offset":2,"client_msg_id":"s1"},"next_expected_turn_id":"7.2"}`),
	pt[StaleTurnDetails]("StaleTurnDetails", `{"expected":"7","actual":"7.1"}`),
	pt[CancelRequest]("CancelRequest", `{"turn_id":4,"viewer_id":"v"}`),
	pt[CancelResult]("CancelResult", `{"outcome":"cancelling"}`),
	pt[PermissionRespondRequest]("PermissionRespondRequest", `{"request_id":"r1","option_id":"allow","outcome":"selected","client_msg_id":"c"}`),
	pt[PermissionRespondResult]("PermissionRespondResult", `{"request_id":"r1","resolution":{"request_id":"r1","outcome":"selected","option_id":"allow_always","decided_by":"user","remember":true}}`),
	pt[PermissionForgetRequest]("PermissionForgetRequest", `{"tool":"edit:edit something"}`),
	pt[PermissionForgetResult]("PermissionForgetResult", `{"forgotten":true}`),
	pt[SetPolicyRequest]("SetPolicyRequest", `{"level":"allow_all"}`),
	pt[SetPolicyResult]("SetPolicyResult", `{"level":"allow_all"}`),
	pt[AttachRequest]("AttachRequest", `{"viewer_id":"v1","role":"observer","lease_seconds":600}`),
	pt[DetachRequest]("DetachRequest", `{"viewer_id":"v1"}`),
	pt[DetachResult]("DetachResult", `{}`),
	pt[CloseRequest]("CloseRequest", `{"reason":"done"}`),
	pt[CloseResult]("CloseResult", `{}`),
	// the runner's signals
	pt[TurnStartedSignal]("TurnStartedSignal", `{"turn_id":1,"attempt":2,"host_queue":"tacp-host-x","agent_session_id":"sess"}`),
	pt[TurnEventsSignal]("TurnEventsSignal", `{"host":"h","turn_id":1,"attempt":1,"batch":3,"events":[{"sessionId":"x","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}},null,7]}`),
	pt[TurnFinishedSignal]("TurnFinishedSignal", `{"turn_id":1,"attempt":1,"stop_reason":"end_turn","usage":{"inputTokens":1},"batches":9,"orphaned":true}`),
	pt[DeliveryOutcome]("DeliveryOutcome", `{"delivery_id":"steer-1.1-1","kind":"steer","turn_id":1,"attempt":1,"offset":3,"how":"failed","error":"x"}`),
	pt[PermissionRequestedSignal]("PermissionRequestedSignal", `{"turn_id":1,"attempt":1,"request_id":"r","tool_call":{"toolCallId":"call_1","kind":"edit","title":"x"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"}]}`),
	// queries
	pt[EventsRequest]("EventsRequest", `{"after_seq":-5,"limit":10}`),
	pt[EventsResult]("EventsResult", `{"events":[{"seq":1,"kind":"session.started","at":"2026-11-30T09:00:00.5+01:00","data":{"run":1}}],"last_seq":1,"first_retained_seq":1,"gap":false}`),
	pt[Status]("Status", `{"session_id":"s","state":"running","turn_id":2,"steer_token":"2.1","turn_started_at":"2026-11-30T09:00:00Z","viewers":[{"viewer_id":"v","role":"controller","lease_until":"2026-11-30T10:00:00Z"}],"queue":[{"turn_id":3,"client_message_id":"m","bytes":4}],"pending_permissions":[{"request_id":"r","turn_id":2,"options":[],"deadline":"2026-11-30T09:10:00Z"}],"policy":"ask_for_risky","rules":["edit:x"],"usage":{"totalTokens":30,"nested":{"a":[1,2.5e300]}},"journal":{"first_seq":1,"last_seq":9},"run":3}`),
	// journal events and their data
	pt[Event]("Event", `{"seq":4,"kind":"agent.update","turn_id":1,"at":"2026-11-30T09:00:00.123456789Z","data":{"sessionUpdate":"tacp_custom_kind"}}`),
	pt[SessionStartedData]("SessionStartedData", `{"agent":"a","workspace":"/w","run":1}`),
	pt[PromptAcceptedData]("PromptAcceptedData", `{"client_message_id":"m","text":"t","text_truncated":true,"position":0}`),
	pt[RejectedData]("RejectedData", `{"client_msg_id":"c","type":"stale_turn","message":"m","details":{"expected":"1","actual":"1.1"}}`),
	pt[TurnStartedData]("TurnStartedData", `{"attempt":2,"prompt_client_message_id":"m"}`),
	pt[SteerAcceptedData]("SteerAcceptedData", `{"ref":{"turn_id":1,"offset":1},"text":"go","next_expected_turn_id":"1.1"}`),
	pt[SteerDeliveredData]("SteerDeliveredData", `{"offset":1,"how":"failed","error":"host lost"}`),
	pt[TurnCancellingData]("TurnCancellingData", `{"reason":"grace"}`),
	pt[TurnEndedData]("TurnEndedData", `{"stop_reason":"cancelled"}`),
	pt[TurnFailedData]("TurnFailedData", `{"error":"boom","orphaned":true}`),
	pt[SessionClosedData]("SessionClosedData", `{"reason":"r","dropped":["a","b"]}`),
	pt[PermissionRequestedData]("PermissionRequestedData", `{"request_id":"r","tool_call":{"kind":"read"},"options":[{"optionId":"o","name":"n","kind":"reject_once"}],"deadline":"2026-11-30T09:10:00Z"}`),
	pt[PermissionResolution]("PermissionResolution", `{"request_id":"r","outcome":"expired","option_id":"reject","decided_by":"deadline"}`),
	pt[PolicyChangedData]("PolicyChangedData", `{"level":"allow_all","previous":"ask_always"}`),
	pt[PermissionForgottenData]("PermissionForgottenData", `{"tool":"tool:Bash"}`),
	pt[GraceData]("GraceData", `{"until":"2026-11-30T09:15:00Z","viewer_id":"v"}`),
	pt[SetModeRequest]("SetModeRequest", `{"mode_id":"plan","viewer_id":"v"}`),
	pt[SetConfigOptionRequest]("SetConfigOptionRequest", `{"config_id":"model","value":"opus","viewer_id":"v"}`),
	pt[SetTitleRequest]("SetTitleRequest", `{"title":"fix the login bug","viewer_id":"v"}`),
}

// payloadOfName maps every update and signal name to its payload type (by payloadTypes
// name): what a sender of that name must send.
var payloadOfName = map[string]string{
	UpdatePrompt:              "PromptRequest",
	UpdateSteer:               "SteerRequest",
	UpdateCancel:              "CancelRequest",
	UpdatePermissionRespond:   "PermissionRespondRequest",
	UpdatePermissionForget:    "PermissionForgetRequest",
	UpdateSetPolicy:           "SetPolicyRequest",
	UpdateAttach:              "AttachRequest",
	UpdateDetach:              "DetachRequest",
	UpdateClose:               "CloseRequest",
	UpdateSetMode:             "SetModeRequest",
	UpdateSetConfigOption:     "SetConfigOptionRequest",
	UpdateSetTitle:            "SetTitleRequest",
	SignalTurnStarted:         "TurnStartedSignal",
	SignalTurnEvents:          "TurnEventsSignal",
	SignalTurnFinished:        "TurnFinishedSignal",
	SignalPermissionRequested: "PermissionRequestedSignal",
	SignalDeliveryOutcome:     "DeliveryOutcome",
	QueryEvents:               "EventsRequest",
}

func TestFuzzTablesCoverEveryUpdateAndSignal(t *testing.T) {
	names := []string{
		UpdatePrompt, UpdateSteer, UpdateCancel, UpdatePermissionRespond, UpdatePermissionForget,
		UpdateSetPolicy, UpdateAttach, UpdateDetach, UpdateClose, UpdateSetMode, UpdateSetConfigOption,
		UpdateSetTitle, SignalTurnStarted, SignalTurnEvents, SignalTurnFinished, SignalPermissionRequested,
		SignalDeliveryOutcome, QueryEvents,
	}
	byName := map[string]bool{}
	for _, p := range payloadTypes {
		require.False(t, byName[p.name], "%s listed twice", p.name)
		byName[p.name] = true
		// Every example is valid JSON that decodes into its type, without unknown fields.
		d := json.NewDecoder(strings.NewReader(p.example))
		d.DisallowUnknownFields()
		require.NoError(t, d.Decode(p.new()), p.name)
	}
	for _, n := range names {
		require.Contains(t, payloadOfName, n)
		require.True(t, byName[payloadOfName[n]], "%s: payload %s is not fuzzed", n, payloadOfName[n])
	}
}

// FuzzDecodePayload decodes arbitrary bytes as every payload type, through json.Unmarshal
// and through the SDK's default data converter (what a workflow or activity actually runs):
// neither panics, they agree, and a value that decodes re-encodes stably.
func FuzzDecodePayload(f *testing.F) {
	for i, p := range payloadTypes {
		f.Add(uint8(i), []byte(p.example))
	}
	// Wrong JSON types where the contract wants others, and broken JSON.
	for _, s := range []string{
		`{"text":7,"client_message_id":["x"]}`,
		`{"turn_id":"3","attempt":-1,"batch":1e30}`,
		`{"expected_turn_id":7.1}`,
		`{"lease_seconds":"600"}`,
		`{"at":"yesterday","seq":"1"}`,
		`{"turn_started_at":"2026-13-45T99:00:00Z"}`,
		`{"usage":{"x":1e400}}`,
		`{"events":[{"seq":1,"at":"2026-11-30T09:00:00+23:59"}]}`,
		`{"carried":{"run":`,
		`{"content":null,"steering":null,"tool_call":null}`,
		`{"text":"\ud800\udc00\ud800","client_message_id":"\xff"}`,
		`[]`, `null`, `"s"`, `0`, ``, `{`, `{"a":1}{}`,
	} {
		f.Add(uint8(0), []byte(s))
		f.Add(uint8(6), []byte(s))
		f.Add(uint8(33), []byte(s))
	}
	dc := converter.GetDefaultDataConverter()
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		p := payloadTypes[int(which)%len(payloadTypes)]
		v := p.new()
		err := json.Unmarshal(data, v)

		// The SDK path: a json/plain payload decoded by the default converter.
		viaSDK := p.new()
		sdkErr := dc.FromPayload(&commonpb.Payload{
			Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)},
			Data:     data,
		}, viaSDK)
		if (err == nil) != (sdkErr == nil) {
			t.Fatalf("%s: json.Unmarshal %v, data converter %v", p.name, err, sdkErr)
		}
		if err != nil {
			return
		}
		if !reflect.DeepEqual(v, viaSDK) {
			t.Fatalf("%s: the data converter decoded %+v, json.Unmarshal %+v", p.name, viaSDK, v)
		}

		// Re-encoding: what decoded encodes (as the SDK encodes a result or a carried state),
		// and from the first encoding on the bytes are a fixed point.
		first, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %q decodes but does not encode: %v", p.name, data, err)
		}
		// Raw JSON fields (prompt content, event data) keep the bytes they were given, so
		// only input that is UTF-8 must encode to UTF-8: tacp never makes bytes invalid. The
		// bytes that are not are refused at the edges (a prompt's content by the session's
		// validator; an agent's output is repaired by the runner).
		if !json.Valid(first) || (utf8.Valid(data) && !utf8.Valid(first)) {
			t.Fatalf("%s: encoded invalid JSON %q", p.name, first)
		}
		again := p.new()
		if err := json.Unmarshal(first, again); err != nil {
			t.Fatalf("%s: its own encoding %q does not decode: %v", p.name, first, err)
		}
		second, err := json.Marshal(again)
		if err != nil {
			t.Fatalf("%s: re-encode: %v", p.name, err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("%s: unstable encoding\n first  %s\n second %s", p.name, first, second)
		}
		payload, err := dc.ToPayload(again)
		if err != nil {
			t.Fatalf("%s: data converter encode: %v", p.name, err)
		}
		if !bytes.Equal(payload.GetData(), second) {
			t.Fatalf("%s: the data converter encodes %s, json.Marshal %s", p.name, payload.GetData(), second)
		}
	})
}

// sessionIDSpec restates contract §2 independently of ValidateSessionID's own pattern.
func sessionIDSpec(id string) bool {
	if len(id) < 1 || len(id) > 128 || id == "." || id == ".." {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

var workflowIDPattern = regexp.MustCompile(`^tacp-session-[A-Za-z0-9._-]{1,128}$`)

// FuzzValidateSessionID checks ValidateSessionID against contract §2: exactly the ids of 1–128
// characters of [A-Za-z0-9._-] other than "." and ".." are valid, the refusal names the id,
// and a valid id makes a workflow id from which it is recovered.
func FuzzValidateSessionID(f *testing.F) {
	for _, s := range []string{"s1", "a", ".", "..", "...", "no/slashes", "a b", "", "ünï", strings.Repeat("x", 128), strings.Repeat("x", 129), "a\n", "\x00", "tacp-session-x", "-", "_._"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := ValidateSessionID(id)
		if want := sessionIDSpec(id); (err == nil) != want {
			t.Fatalf("ValidateSessionID(%q) = %v, contract §2 says valid=%v", id, err, want)
		}
		if err != nil {
			if !strings.Contains(err.Error(), "invalid session id") {
				t.Fatalf("refusal does not say what is wrong: %v", err)
			}
			return
		}
		wid := SessionWorkflowID(id)
		if !workflowIDPattern.MatchString(wid) || strings.TrimPrefix(wid, "tacp-session-") != id {
			t.Fatalf("workflow id %q of session %q", wid, id)
		}
	})
}

package session

// Tests of the permission policy (contract §6 "Permissions"), one per rule and in the order the
// text states them: allow_all, a remembered tool, ask_for_risky, ask_always; then the option a
// decision picks, the fail-closed expiry, the key a rule remembers a tool by, and the rules as
// plain data across continue-as-new.

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// opt builds an ACP permission option.
func opt(id, kind string) signals.PermissionOption {
	return signals.PermissionOption{OptionID: id, Name: id, Kind: kind}
}

// allOptions offers every ACP option kind, allow_always listed before allow_once and
// reject_always before reject_once, so that a pick by list order would show.
var allOptions = []signals.PermissionOption{
	opt("always", "allow_always"),
	opt("once", "allow_once"),
	opt("never", "reject_always"),
	opt("no", "reject_once"),
}

// toolCall builds an ACP tool call of the given kind and title.
func toolCall(kind, title string) json.RawMessage {
	b, err := json.Marshal(map[string]any{"toolCallId": "call-1", "kind": kind, "title": title})
	if err != nil {
		panic(err)
	}
	return b
}

// everyKind is every ACP tool kind, plus the empty kind and one an agent made up.
var everyKind = []string{"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other", "", "teleport"}

// requireAsked asserts that Decide leaves the request to a person.
func requireAsked(t *testing.T, res signals.PermissionResolution, ask bool) {
	t.Helper()
	require.True(t, ask, "resolved at once as %+v, want asked", res)
	require.Equal(t, signals.PermissionResolution{}, res, "an asked request carries no resolution")
}

func TestValidPolicyLevel(t *testing.T) {
	tests := []struct {
		level string
		want  bool
	}{
		{signals.PolicyAllowAll, true},
		{signals.PolicyAskForRisky, true},
		{signals.PolicyAskAlways, true},
		{"", false},
		{"ALLOW_ALL", false},
		{" allow_all", false},
		{"allow-all", false},
		{"yolo", false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, ValidPolicyLevel(tt.level), "level %q", tt.level)
	}
}

func TestPolicy_AllowAllResolvesAtOnceByPolicy(t *testing.T) {
	for _, kind := range everyKind {
		t.Run("kind="+kind, func(t *testing.T) {
			p := &Policy{Level: signals.PolicyAllowAll}
			res, ask := p.Decide("r1", toolCall(kind, "rm -rf build"), allOptions, "")
			require.False(t, ask)
			require.Equal(t, signals.PermissionResolution{
				RequestID: "r1", Outcome: signals.OutcomeSelected, OptionID: "once", DecidedBy: signals.DecidedByPolicy,
			}, res)
		})
	}

	// allow_all is checked first: a remembered tool is still decided by the policy.
	tc := toolCall("execute", "make")
	p := &Policy{Level: signals.PolicyAllowAll}
	p.Remember(ToolKey(tc))
	res, ask := p.Decide("r2", tc, allOptions, "")
	require.False(t, ask)
	require.Equal(t, signals.DecidedByPolicy, res.DecidedBy)
	require.Equal(t, "once", res.OptionID)
}

func TestPolicy_RememberedToolResolvesByRuleUnderAnyOtherLevel(t *testing.T) {
	remembered := []struct {
		name string
		tc   json.RawMessage
	}{
		{"risky kind and title", toolCall("execute", "make test")},
		{"harmless kind", toolCall("read", "README.md")},
		{"agent tool name", json.RawMessage(`{"kind":"execute","title":"ls","_meta":{"claudeCode":{"toolName":"Bash"}}}`)},
	}
	for _, level := range []string{signals.PolicyAskForRisky, signals.PolicyAskAlways} {
		for _, r := range remembered {
			t.Run(level+"/"+r.name, func(t *testing.T) {
				p := &Policy{Level: level}
				p.Remember(ToolKey(r.tc))
				res, ask := p.Decide("r1", r.tc, allOptions, "")
				require.False(t, ask)
				require.Equal(t, signals.PermissionResolution{
					RequestID: "r1", Outcome: signals.OutcomeSelected, OptionID: "always", DecidedBy: signals.DecidedByRule,
				}, res)
			})
		}
	}

	// The rule is for that tool only: another title of the same kind is still asked, and a
	// call with the same agent tool name matches whatever its title.
	p := &Policy{Level: signals.PolicyAskAlways}
	p.Remember(ToolKey(toolCall("execute", "make test")))
	p.Remember(ToolKey(json.RawMessage(`{"kind":"execute","title":"ls","_meta":{"claudeCode":{"toolName":"Bash"}}}`)))
	res, ask := p.Decide("r2", toolCall("execute", "make deploy"), allOptions, "")
	requireAsked(t, res, ask)
	res, ask = p.Decide("r3", json.RawMessage(`{"kind":"execute","title":"rm -rf /tmp/x","_meta":{"claudeCode":{"toolName":"Bash"}}}`), allOptions, "")
	require.False(t, ask)
	require.Equal(t, signals.DecidedByRule, res.DecidedBy)
}

func TestPolicy_AskForRiskyPassesHarmlessKindsSilently(t *testing.T) {
	tests := []struct {
		kind   string
		silent bool
	}{
		{"read", true},
		{"search", true},
		{"think", true},
		{"fetch", true},
		{"edit", false},
		{"execute", false},
		{"delete", false},
		{"move", false},
		{"other", false},
		{"switch_mode", false},
		{"", false},
		{"teleport", false},
		{"READ", false}, // kinds are lowercase in ACP; anything else fails closed
		{" read", false},
	}
	for _, tt := range tests {
		t.Run("kind="+tt.kind, func(t *testing.T) {
			p := &Policy{Level: signals.PolicyAskForRisky}
			res, ask := p.Decide("r1", toolCall(tt.kind, "x"), allOptions, "")
			if !tt.silent {
				requireAsked(t, res, ask)
				return
			}
			require.False(t, ask)
			require.Equal(t, signals.PermissionResolution{
				RequestID: "r1", Outcome: signals.OutcomeSelected, OptionID: "once", DecidedBy: signals.DecidedByPolicy,
			}, res)
		})
	}

	// A tool call without a kind field at all is asked.
	p := &Policy{Level: signals.PolicyAskForRisky}
	res, ask := p.Decide("r2", json.RawMessage(`{"toolCallId":"c","title":"cat README.md"}`), allOptions, "")
	requireAsked(t, res, ask)
}

func TestPolicy_AskAlwaysAsksEverythingNotRemembered(t *testing.T) {
	for _, kind := range everyKind {
		t.Run("kind="+kind, func(t *testing.T) {
			p := &Policy{Level: signals.PolicyAskAlways, Rules: []string{"edit:other file", "tool:Read"}}
			res, ask := p.Decide("r1", toolCall(kind, "x"), allOptions, "")
			requireAsked(t, res, ask)
		})
	}
}

func TestPolicy_NoAllowOptionIsAlwaysAsked(t *testing.T) {
	rejects := []signals.PermissionOption{opt("never", "reject_always"), opt("no", "reject_once")}
	unknown := []signals.PermissionOption{opt("maybe", "allow_sometimes"), opt("x", "")}
	tc := toolCall("read", "README.md")
	remembered := func(level string) *Policy {
		p := &Policy{Level: level}
		p.Remember(ToolKey(tc))
		return p
	}
	tests := []struct {
		name    string
		policy  *Policy
		options []signals.PermissionOption
	}{
		{"allow_all, reject options only", &Policy{Level: signals.PolicyAllowAll}, rejects},
		{"allow_all, no options", &Policy{Level: signals.PolicyAllowAll}, nil},
		{"allow_all, unknown option kinds", &Policy{Level: signals.PolicyAllowAll}, unknown},
		{"rule, reject options only", remembered(signals.PolicyAskAlways), rejects},
		{"rule, no options", remembered(signals.PolicyAskForRisky), []signals.PermissionOption{}},
		{"harmless kind, reject options only", &Policy{Level: signals.PolicyAskForRisky}, rejects},
		{"harmless kind, no options", &Policy{Level: signals.PolicyAskForRisky}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, ask := tt.policy.Decide("r1", tc, tt.options, "")
			requireAsked(t, res, ask)
		})
	}
}

func TestPolicy_OptionPreference(t *testing.T) {
	tc := toolCall("execute", "make")
	tests := []struct {
		name       string
		options    []signals.PermissionOption
		wantPolicy string // allow_all: allow_once before allow_always
		wantRule   string // remembered tool: allow_always before allow_once
	}{
		{"both, always listed first", allOptions, "once", "always"},
		{"both, once listed first", []signals.PermissionOption{opt("once", "allow_once"), opt("always", "allow_always")}, "once", "always"},
		{"allow_once only", []signals.PermissionOption{opt("no", "reject_once"), opt("once", "allow_once")}, "once", "once"},
		{"allow_always only", []signals.PermissionOption{opt("no", "reject_once"), opt("always", "allow_always")}, "always", "always"},
		{"two of a kind: the first listed", []signals.PermissionOption{opt("once-a", "allow_once"), opt("once-b", "allow_once"), opt("always-a", "allow_always"), opt("always-b", "allow_always")}, "once-a", "always-a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			byPolicy := &Policy{Level: signals.PolicyAllowAll}
			res, ask := byPolicy.Decide("r1", tc, tt.options, "")
			require.False(t, ask)
			require.Equal(t, signals.DecidedByPolicy, res.DecidedBy)
			require.Equal(t, tt.wantPolicy, res.OptionID, "policy pick")

			byRule := &Policy{Level: signals.PolicyAskAlways}
			byRule.Remember(ToolKey(tc))
			res, ask = byRule.Decide("r1", tc, tt.options, "")
			require.False(t, ask)
			require.Equal(t, signals.DecidedByRule, res.DecidedBy)
			require.Equal(t, tt.wantRule, res.OptionID, "rule pick")

			// A decision never asks to remember: only a person's allow_always does.
			require.False(t, res.Remember)
		})
	}
}

func TestPolicy_DecideChangesNothing(t *testing.T) {
	p := &Policy{Level: signals.PolicyAskForRisky, Rules: []string{"execute:make", "tool:Bash"}}
	before := Policy{Level: p.Level, Rules: slices.Clone(p.Rules)}
	for _, kind := range everyKind {
		p.Decide("r1", toolCall(kind, "make"), allOptions, "")
		p.Decide("r2", toolCall(kind, "x"), nil, signals.PathsOutside)
	}
	require.Equal(t, before, *p)
}

func TestExpire_FailsClosedWithARejectOption(t *testing.T) {
	tests := []struct {
		name    string
		options []signals.PermissionOption
		want    string
	}{
		{"reject_once first", allOptions, "no"},
		{"reject_once even when listed after reject_always", []signals.PermissionOption{opt("never", "reject_always"), opt("no", "reject_once")}, "no"},
		{"then reject_always", []signals.PermissionOption{opt("once", "allow_once"), opt("never", "reject_always"), opt("always", "allow_always")}, "never"},
		{"two reject_once: the first listed", []signals.PermissionOption{opt("no-a", "reject_once"), opt("no-b", "reject_once")}, "no-a"},
		{"no reject option: none, never an allow", []signals.PermissionOption{opt("once", "allow_once"), opt("always", "allow_always")}, ""},
		{"no options", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, signals.PermissionResolution{
				RequestID: "r1", Outcome: signals.OutcomeExpired, OptionID: tt.want, DecidedBy: signals.DecidedByDeadline,
			}, Expire("r1", tt.options))
		})
	}
}

func TestToolKey(t *testing.T) {
	tests := []struct {
		name     string
		toolCall string
		want     string
	}{
		{"kind and title", `{"toolCallId":"c1","kind":"execute","title":"make test"}`, "execute:make test"},
		{"kind only: no identity", `{"kind":"read"}`, ""},
		{"title only", `{"title":"Run tests"}`, ":Run tests"},
		{"title with a colon", `{"kind":"edit","title":"a:b.go"}`, "edit:a:b.go"},
		{"arguments are not part of the key", `{"kind":"execute","title":"Bash","rawInput":{"command":"rm -rf /"}}`, "execute:Bash"},
		{"_meta.toolName", `{"kind":"execute","title":"ls -l","_meta":{"toolName":"Bash"}}`, "tool:Bash"},
		{"vendor object with toolName", `{"kind":"execute","title":"ls -l","_meta":{"claudeCode":{"toolName":"Bash"}}}`, "tool:Bash"},
		{"_meta.toolName wins over a vendor object", `{"_meta":{"a":{"toolName":"Inner"},"toolName":"Outer"}}`, "tool:Outer"},
		{"several vendor objects: first in sorted key order", `{"_meta":{"zed":{"toolName":"Z"},"claudeCode":{"toolName":"Bash"},"acme":{"toolName":"A"}}}`, "tool:A"},
		{"vendor objects without a toolName are skipped", `{"_meta":{"a":{"other":1},"b":{"toolName":""},"c":{"toolName":"C"}}}`, "tool:C"},
		{"non-string toolName is skipped", `{"kind":"edit","title":"x","_meta":{"toolName":7,"a":{"toolName":true},"b":"str","c":{"toolName":"C"}}}`, "tool:C"},
		{"empty _meta.toolName falls back to kind and title", `{"kind":"edit","title":"x","_meta":{"toolName":""}}`, "edit:x"},
		{"_meta without a tool name", `{"kind":"edit","title":"x","_meta":{"trace":"abc","claudeCode":{"id":"1"}}}`, "edit:x"},
		{"_meta null", `{"kind":"edit","title":"x","_meta":null}`, "edit:x"},
		{"_meta not an object", `{"kind":"edit","title":"x","_meta":[1,2]}`, "edit:x"},
		{"malformed JSON", `{"kind":"execute","title":`, ""},
		{"not an object", `"execute"`, ""},
		{"empty", ``, ""},
		{"null", `null`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, ToolKey(json.RawMessage(tt.toolCall)))
		})
	}
}

func TestRuleKey_TheRunnersToolNameWhenTheRequestNamesNone(t *testing.T) {
	tests := []struct {
		name, toolCall, toolName, want string
	}{
		{"the runner's name over kind and title", `{"kind":"edit","title":"Edit a.go"}`, "Edit", "tool:Edit"},
		{"the request's own _meta name wins", `{"kind":"edit","title":"x","_meta":{"claudeCode":{"toolName":"MultiEdit"}}}`, "Edit", "tool:MultiEdit"},
		{"no name: kind and title", `{"kind":"edit","title":"Edit a.go"}`, "", "edit:Edit a.go"},
		{"a name gives an untitled call an identity", `{"kind":"execute"}`, "Bash", "tool:Bash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, RuleKey(json.RawMessage(tt.toolCall), tt.toolName))
		})
	}
}

// The vendor object is picked by sorted key order, not by the order of the JSON text (which
// a Go map loses): the key is the same whichever way the agent wrote it, on every replay.
func TestToolKey_Deterministic(t *testing.T) {
	a := json.RawMessage(`{"_meta":{"b":{"toolName":"B"},"a":{"toolName":"A"},"c":{"toolName":"C"}}}`)
	b := json.RawMessage(`{"_meta":{"c":{"toolName":"C"},"a":{"toolName":"A"},"b":{"toolName":"B"}}}`)
	for range 50 {
		require.Equal(t, "tool:A", ToolKey(a))
		require.Equal(t, "tool:A", ToolKey(b))
	}
}

func FuzzToolKey(f *testing.F) {
	for _, s := range []string{
		`{"kind":"execute","title":"make"}`,
		`{"_meta":{"toolName":"Bash"}}`,
		`{"_meta":{"claudeCode":{"toolName":"Bash"},"acme":{"toolName":"A"}}}`,
		`{"kind":`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		k := ToolKey(b)
		require.Equal(t, k, ToolKey(b), "ToolKey is not deterministic")
		if k != "" {
			require.Contains(t, k, ":")
		}
		if !json.Valid(b) {
			require.Equal(t, "", k, "malformed JSON has no identity")
		}
	})
}

func TestPolicy_RulesStaySortedAndUnique(t *testing.T) {
	keys := []string{"tool:Bash", "execute:make", "read:a", "tool:Bash", "edit:z", "execute:make", "edit:a", "read:a"}
	p := &Policy{Level: signals.PolicyAskAlways}
	for i, k := range keys {
		p.Remember(k)
		require.True(t, slices.IsSorted(p.Rules), "after Remember(%q): %q", k, p.Rules)
		require.Len(t, slices.Compact(slices.Clone(p.Rules)), len(p.Rules), "after Remember(%q): duplicate in %q", k, p.Rules)
		for _, seen := range keys[:i+1] {
			require.True(t, p.Remembers(seen), "%q forgotten after Remember(%q)", seen, k)
		}
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	want = slices.Compact(want)
	require.Equal(t, want, p.Rules)

	p.Forget("execute:make")
	p.Forget("absent")
	require.True(t, slices.IsSorted(p.Rules))
	require.Equal(t, []string{"edit:a", "edit:z", "read:a", "tool:Bash"}, p.Rules)
	require.False(t, p.Remembers("absent"))
}

func TestPolicy_ForgetReportsWhetherRemembered(t *testing.T) {
	p := &Policy{Level: signals.PolicyAskAlways}
	require.False(t, p.Forget("tool:Bash"), "nothing remembered yet")

	p.Remember("tool:Bash")
	p.Remember("execute:make")
	require.True(t, p.Forget("tool:Bash"))
	require.False(t, p.Remembers("tool:Bash"))
	require.False(t, p.Forget("tool:Bash"), "already forgotten")
	require.False(t, p.Forget("tool:bash"), "keys are case-sensitive")
	require.True(t, p.Remembers("execute:make"), "forgetting one rule keeps the others")
	require.Equal(t, []string{"execute:make"}, p.Rules)

	// A forgotten tool is asked again.
	tc := json.RawMessage(`{"kind":"execute","title":"ls","_meta":{"toolName":"Bash"}}`)
	p.Remember(ToolKey(tc))
	_, ask := p.Decide("r1", tc, allOptions, "")
	require.False(t, ask)
	require.True(t, p.Forget(ToolKey(tc)))
	res, ask := p.Decide("r2", tc, allOptions, "")
	requireAsked(t, res, ask)
}

func TestPolicy_JSONRoundTrip(t *testing.T) {
	p := &Policy{Level: signals.PolicyAskForRisky}
	for _, k := range []string{"tool:Bash", "execute:make", "edit:main.go"} {
		p.Remember(k)
	}
	b, err := json.Marshal(p)
	require.NoError(t, err)
	require.JSONEq(t, `{"level":"ask_for_risky","rules":["edit:main.go","execute:make","tool:Bash"]}`, string(b))

	var next Policy
	require.NoError(t, json.Unmarshal(b, &next))
	require.True(t, reflect.DeepEqual(*p, next), "round trip changed the policy:\nbefore %+v\nafter  %+v", *p, next)

	// The carried policy decides as before and keeps its rules sorted.
	for _, kind := range everyKind {
		for _, title := range []string{"make", "main.go"} {
			tc := toolCall(kind, title)
			res1, ask1 := p.Decide("r1", tc, allOptions, "")
			res2, ask2 := next.Decide("r1", tc, allOptions, "")
			require.Equal(t, ask1, ask2, "%s", tc)
			require.Equal(t, res1, res2, "%s", tc)
		}
	}
	next.Remember("delete:tmp")
	require.Equal(t, []string{"delete:tmp", "edit:main.go", "execute:make", "tool:Bash"}, next.Rules)

	// A policy with no rules survives the trip too.
	empty := Policy{Level: signals.PolicyAskAlways}
	b, err = json.Marshal(empty)
	require.NoError(t, err)
	var back Policy
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, empty, back)
	require.False(t, back.Remembers(""))
}

func TestValidateForget(t *testing.T) {
	tests := []struct {
		tool    string
		invalid bool
	}{
		{"", true},
		{" ", true},
		{"\t\n ", true},
		{"tool:Bash", false},
		{"execute:make test", false},
		{":", false},              // the key of a tool call with no kind, title or tool name
		{"not-remembered", false}, // forgetting an unknown key is answered forgotten: false
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			rej := ValidateForget(tt.tool)
			if !tt.invalid {
				require.Nil(t, rej)
				return
			}
			require.NotNil(t, rej)
			require.Equal(t, signals.RejectInvalidRequest, rej.Type)
			require.True(t, strings.Contains(rej.Message, "tool"), "message %q names the field", rej.Message)
		})
	}
}

// A tool call that names no tool (ACP's ToolCallUpdate makes kind and title optional) keys as
// ":". Once a person allows one such call always, every later call with no identity, whatever
// it does, resolves by that rule without asking: an allow_always meant for one call opens the
// door to all anonymous calls, against the fail-closed intent of §6.
func TestPolicy_AnonymousToolCallIsNotRememberedForOthers(t *testing.T) {
	p := &Policy{Level: signals.PolicyAskAlways}
	p.Remember(ToolKey(json.RawMessage(`{"toolCallId":"c1"}`)))
	res, ask := p.Decide("r2", json.RawMessage(`{"toolCallId":"c2","rawInput":{"command":"rm -rf ~"}}`), allOptions, "")
	requireAsked(t, res, ask)
}

// FuzzPolicyDecide decides arbitrary requests (any level, any tool call bytes, options of any
// kinds, rules learned from earlier tool calls) and checks the rules of contract §6 as
// properties: Decide changes nothing; what it resolves at once is an allow option the request
// offered, decided by policy or rule as the level and rules allow, and never under
// ask_always without a rule; Expire always fails closed with a reject option or none.
func FuzzPolicyDecide(f *testing.F) {
	f.Add("ask_for_risky", []byte(`{"kind":"read","title":"cat"}`), []byte{0, 1, 2, 3}, []byte(`{"kind":"edit","title":"x"}`))
	f.Add("allow_all", []byte(`{"kind":"execute"}`), []byte{2, 3}, []byte(``))
	f.Add("ask_always", []byte(`{"_meta":{"toolName":"Bash"}}`), []byte{1, 0}, []byte(`{"_meta":{"toolName":"Bash"}}`))
	f.Add("yolo", []byte(`{"kind":`), []byte{7, 7, 7}, []byte(`null`))
	f.Add("", []byte(`[]`), []byte{}, []byte(`{"kind":"fetch","title":""}`))
	kinds := []string{"allow_once", "allow_always", "reject_once", "reject_always", "", "maybe", "ALLOW_ONCE", "allow_once "}
	f.Fuzz(func(t *testing.T, level string, tc []byte, optKinds []byte, learned []byte) {
		var options []signals.PermissionOption
		for i, k := range optKinds {
			if i == 8 {
				break
			}
			options = append(options, opt("o"+strconv.Itoa(i), kinds[int(k)%len(kinds)]))
		}
		p := &Policy{Level: level}
		p.Remember(ToolKey(learned))
		before := *p
		before.Rules = slices.Clone(p.Rules)

		paths := []string{"", signals.PathsInside, signals.PathsOutside, signals.PathsNone}[len(tc)%4]
		res, ask := p.Decide("r1", tc, options, paths)
		if !reflect.DeepEqual(before, *p) {
			t.Fatalf("Decide changed the policy")
		}
		if paths == signals.PathsOutside && level != signals.PolicyAllowAll && !ask {
			t.Fatalf("a tool call outside the workspace was decided by %s under %q", res.DecidedBy, level)
		}
		if ask {
			if res != (signals.PermissionResolution{}) {
				t.Fatalf("an asked request carries %+v", res)
			}
		} else {
			if res.RequestID != "r1" || res.Outcome != signals.OutcomeSelected {
				t.Fatalf("resolution %+v", res)
			}
			var picked *signals.PermissionOption
			for i := range options {
				if options[i].OptionID == res.OptionID {
					picked = &options[i]
					break
				}
			}
			if picked == nil || (picked.Kind != "allow_once" && picked.Kind != "allow_always") {
				t.Fatalf("resolved with option %q, not an allow option offered (%v)", res.OptionID, options)
			}
			switch res.DecidedBy {
			case signals.DecidedByPolicy:
				if level != signals.PolicyAllowAll && (level != signals.PolicyAskForRisky || !slices.Contains(harmlessKinds, toolKind(tc))) {
					t.Fatalf("decided by policy under %q for kind %q", level, toolKind(tc))
				}
			case signals.DecidedByRule:
				if level == signals.PolicyAllowAll || !p.Remembers(ToolKey(tc)) || ToolKey(tc) == "" {
					t.Fatalf("decided by rule under %q for key %q (rules %v)", level, ToolKey(tc), p.Rules)
				}
			default:
				t.Fatalf("decided by %q", res.DecidedBy)
			}
			if level == signals.PolicyAskAlways && res.DecidedBy != signals.DecidedByRule {
				t.Fatalf("ask_always resolved without a rule: %+v", res)
			}
		}
		if ValidPolicyLevel(level) != (level == signals.PolicyAllowAll || level == signals.PolicyAskForRisky || level == signals.PolicyAskAlways) {
			t.Fatalf("ValidPolicyLevel(%q) = %v", level, ValidPolicyLevel(level))
		}

		exp := Expire("r1", options)
		if exp.Outcome != signals.OutcomeExpired || exp.DecidedBy != signals.DecidedByDeadline || exp.Remember {
			t.Fatalf("expiry %+v", exp)
		}
		if exp.OptionID != "" {
			ok := false
			for _, o := range options {
				ok = ok || (o.OptionID == exp.OptionID && (o.Kind == "reject_once" || o.Kind == "reject_always"))
			}
			if !ok {
				t.Fatalf("expired with option %q, not a reject option offered (%v)", exp.OptionID, options)
			}
		}
	})
}

// Reference: contract §10, "The worker is the trust boundary": under every level but
// allow_all, a tool call that names a path outside the session's workspace is asked, never
// decided by policy or by a rule; read and search pass ask_for_risky only when the runner
// found every path they name inside the workspace (unknown means asked).
func TestPolicy_PathsOutsideTheWorkspaceAreAsked(t *testing.T) {
	tests := []struct {
		level, kind, paths string
		rule               bool
		silent             bool
	}{
		{signals.PolicyAskForRisky, "read", signals.PathsInside, false, true},
		{signals.PolicyAskForRisky, "read", signals.PathsOutside, false, false},
		{signals.PolicyAskForRisky, "read", signals.PathsNone, false, false},
		{signals.PolicyAskForRisky, "search", signals.PathsInside, false, true},
		{signals.PolicyAskForRisky, "search", signals.PathsOutside, false, false},
		{signals.PolicyAskForRisky, "search", signals.PathsNone, false, false},
		{signals.PolicyAskForRisky, "fetch", signals.PathsNone, false, true},
		{signals.PolicyAskForRisky, "fetch", signals.PathsOutside, false, false},
		{signals.PolicyAskForRisky, "think", signals.PathsNone, false, true},
		{signals.PolicyAskForRisky, "think", signals.PathsOutside, false, false},
		{signals.PolicyAskForRisky, "edit", signals.PathsInside, false, false},
		// A remembered tool is allowed inside the workspace, asked outside it.
		{signals.PolicyAskForRisky, "edit", signals.PathsInside, true, true},
		{signals.PolicyAskForRisky, "edit", signals.PathsOutside, true, false},
		{signals.PolicyAskAlways, "read", signals.PathsOutside, true, false},
		{signals.PolicyAskAlways, "read", signals.PathsInside, false, false},
		// allow_all stays what it says.
		{signals.PolicyAllowAll, "read", signals.PathsOutside, false, true},
		{signals.PolicyAllowAll, "edit", signals.PathsOutside, false, true},
		// A runner older than workspace roots sends no verdict: decided as before.
		{signals.PolicyAskForRisky, "read", "", false, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s/%s/rule=%v", tt.level, tt.kind, tt.paths, tt.rule), func(t *testing.T) {
			p := &Policy{Level: tt.level}
			tc := toolCall(tt.kind, "x")
			if tt.rule {
				p.Remember(ToolKey(tc))
			}
			res, ask := p.Decide("r1", tc, allOptions, tt.paths)
			if !tt.silent {
				requireAsked(t, res, ask)
				return
			}
			require.False(t, ask)
			require.NotEmpty(t, res.OptionID)
		})
	}
}

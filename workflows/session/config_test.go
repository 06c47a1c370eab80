package session

// Tests of ResolveConfig: the defaults of contract §6 for a SessionConfig that names only its
// session id, and clear errors for values that cannot work.

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

func TestConfig_DefaultsFromSessionIDOnly(t *testing.T) {
	// A client that only knows docs/contract.md starts a session with {"session_id": "s1"}.
	var sc signals.SessionConfig
	require.NoError(t, json.Unmarshal([]byte(`{"session_id": "s1"}`), &sc))
	c, err := ResolveConfig(sc)
	require.NoError(t, err)
	require.Equal(t, "s1", c.SessionID)
	require.Equal(t, 16, c.QueueLimit)
	require.Equal(t, 4096, c.JournalSize)
	require.Equal(t, 8000, c.MaxRunEvents)
	require.Equal(t, "ask_for_risky", c.Policy)
	require.Equal(t, 15*time.Minute, c.Grace)
	require.Equal(t, 60*time.Minute, c.Deadline)
	require.Equal(t, 10*time.Minute, c.PermissionTimeout)
	require.Equal(t, 3*time.Second, c.AffinityWait)
	require.True(t, c.SteeringOn, "steering is on unless switched off")
}

func TestConfig_ExplicitValuesKept(t *testing.T) {
	off := false
	c, err := ResolveConfig(signals.SessionConfig{
		SessionID: "s.1-x_y", Agent: "testagent --fast", Workspace: "/tmp/w",
		QueueLimit: 3, JournalSize: 100, MaxRunEvents: 500,
		GraceWindow: "90s", TurnDeadline: "2h", PermissionTimeout: "1m30s", AffinityWait: "750ms",
		Policy: "allow_all", Steering: &off,
	})
	require.NoError(t, err)
	require.Equal(t, 3, c.QueueLimit)
	require.Equal(t, 100, c.JournalSize)
	require.Equal(t, 500, c.MaxRunEvents)
	require.Equal(t, "allow_all", c.Policy)
	require.Equal(t, 90*time.Second, c.Grace)
	require.Equal(t, 2*time.Hour, c.Deadline)
	require.Equal(t, 90*time.Second, c.PermissionTimeout)
	require.Equal(t, 750*time.Millisecond, c.AffinityWait)
	require.False(t, c.SteeringOn)
	require.Equal(t, "testagent --fast", c.Agent)
	require.Equal(t, "/tmp/w", c.Workspace)
}

func TestConfig_NonPositiveCountsTakeDefaults(t *testing.T) {
	c, err := ResolveConfig(signals.SessionConfig{SessionID: "s1", QueueLimit: -1, JournalSize: -1, MaxRunEvents: -1})
	require.NoError(t, err)
	require.Equal(t, DefaultQueueLimit, c.QueueLimit)
	require.Equal(t, DefaultJournalSize, c.JournalSize)
	require.Equal(t, DefaultMaxRunEvents, c.MaxRunEvents)
}

func TestConfig_EveryPolicyLevelAccepted(t *testing.T) {
	for _, level := range []string{"allow_all", "ask_for_risky", "ask_always"} {
		c, err := ResolveConfig(signals.SessionConfig{SessionID: "s1", Policy: level})
		require.NoError(t, err, level)
		require.Equal(t, level, c.Policy)
	}
	on := true
	c, err := ResolveConfig(signals.SessionConfig{SessionID: "s1", Steering: &on})
	require.NoError(t, err)
	require.True(t, c.SteeringOn)
}

func TestConfig_InvalidValuesRejectedWithClearErrors(t *testing.T) {
	base := func(mod func(*signals.SessionConfig)) signals.SessionConfig {
		c := signals.SessionConfig{SessionID: "s1"}
		mod(&c)
		return c
	}
	tests := []struct {
		name    string
		cfg     signals.SessionConfig
		wantErr []string // substrings the error names
	}{
		{"empty session id", base(func(c *signals.SessionConfig) { c.SessionID = "" }), []string{"session id"}},
		{"session id with a slash", base(func(c *signals.SessionConfig) { c.SessionID = "a/b" }), []string{"session id", `"a/b"`}},
		{"unknown policy", base(func(c *signals.SessionConfig) { c.Policy = "yolo" }), []string{"policy", `"yolo"`, "ask_for_risky"}},
		{"policy in the wrong case", base(func(c *signals.SessionConfig) { c.Policy = "ALLOW_ALL" }), []string{"policy"}},
		{"grace_window not a duration", base(func(c *signals.SessionConfig) { c.GraceWindow = "soon" }), []string{"grace_window", `"soon"`}},
		{"grace_window without a unit", base(func(c *signals.SessionConfig) { c.GraceWindow = "15" }), []string{"grace_window", `"15"`}},
		{"grace_window zero", base(func(c *signals.SessionConfig) { c.GraceWindow = "0s" }), []string{"grace_window", "positive"}},
		{"turn_deadline negative", base(func(c *signals.SessionConfig) { c.TurnDeadline = "-5m" }), []string{"turn_deadline", `"-5m"`, "positive"}},
		{"turn_deadline garbage", base(func(c *signals.SessionConfig) { c.TurnDeadline = "1 hour" }), []string{"turn_deadline"}},
		{"permission_timeout zero", base(func(c *signals.SessionConfig) { c.PermissionTimeout = "0" }), []string{"permission_timeout"}},
		{"permission_timeout garbage", base(func(c *signals.SessionConfig) { c.PermissionTimeout = "10 min" }), []string{"permission_timeout", `"10 min"`}},
		{"turn_deadline past time.Duration with the activity slack", base(func(c *signals.SessionConfig) { c.TurnDeadline = "2562047h47m" }), []string{"turn_deadline", "100 years"}},
		{"affinity_wait zero", base(func(c *signals.SessionConfig) { c.AffinityWait = "0s" }), []string{"affinity_wait", "positive"}},
		{"affinity_wait garbage", base(func(c *signals.SessionConfig) { c.AffinityWait = "3 sec" }), []string{"affinity_wait", `"3 sec"`}},
		{"grace_window over 100 years", base(func(c *signals.SessionConfig) { c.GraceWindow = "876001h" }), []string{"grace_window", "100 years"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ResolveConfig(tt.cfg)
			require.Error(t, err)
			for _, s := range tt.wantErr {
				require.Contains(t, err.Error(), s)
			}
			require.Equal(t, Config{}, c, "a rejected config resolves to nothing")
		})
	}
}

// FuzzResolveConfig resolves arbitrary configs (the SessionConfig a client in any language
// may send): it never panics, a refusal names the field at fault, and a config it accepts
// has a valid session id, a policy level of the three, positive durations, positive counts,
// and a turn activity bound (deadline + slack) that does not overflow.
func FuzzResolveConfig(f *testing.F) {
	f.Add("s1", "", "", "", "", 0, 0, 0)
	f.Add("s1", "ask_always", "15m", "1h", "10m", 3, 100, 80)
	f.Add("a/b", "yolo", "soon", "-5m", "0", -1, -1, -1)
	f.Add("s1", "allow_all", "1ns", "2562047h47m", "9223372036854775807ns", 1, 1, 1)
	f.Add("s1", "", "1e3s", ".5h", "1h1m1s1ms1us1ns", 0, 0, 0)
	f.Fuzz(func(t *testing.T, id, policy, grace, deadline, perm string, queue, journal, maxEvents int) {
		in := signals.SessionConfig{SessionID: id, Policy: policy, GraceWindow: grace, TurnDeadline: deadline,
			PermissionTimeout: perm, QueueLimit: queue, JournalSize: journal, MaxRunEvents: maxEvents}
		c, err := ResolveConfig(in)
		if err != nil {
			msg := err.Error()
			named := false
			for _, field := range []string{"session id", "policy", "grace_window", "turn_deadline", "permission_timeout"} {
				named = named || strings.Contains(msg, field)
			}
			if !named {
				t.Fatalf("refusal %q names no field", msg)
			}
			if !reflect.DeepEqual(c, Config{}) {
				t.Fatalf("a refused config resolved to %+v", c)
			}
			return
		}
		if signals.ValidateSessionID(c.SessionID) != nil || !ValidPolicyLevel(c.Policy) {
			t.Fatalf("accepted id %q policy %q", c.SessionID, c.Policy)
		}
		if c.Grace <= 0 || c.Deadline <= 0 || c.PermissionTimeout <= 0 {
			t.Fatalf("durations %v %v %v", c.Grace, c.Deadline, c.PermissionTimeout)
		}
		if c.QueueLimit <= 0 || c.JournalSize <= 0 || c.MaxRunEvents <= 0 {
			t.Fatalf("counts %d %d %d", c.QueueLimit, c.JournalSize, c.MaxRunEvents)
		}
		if c.Deadline+turnStartToCloseSlack <= c.Deadline {
			t.Fatalf("turn_deadline %v overflows the activity's StartToClose", c.Deadline)
		}
	})
}

// The workflow's input is a client's SessionConfig plus "carried": a client's config
// decodes as the input, and the input's JSON is the config's own plus one field, as
// recorded histories have it (Reference: contract §2, SessionWorkflow takes SessionConfig).
func TestSessionInput_KeepsTheSessionConfigShape(t *testing.T) {
	var in RunInput
	require.NoError(t, json.Unmarshal([]byte(`{"session_id":"s1","queue_limit":3,"carried":{"run":2}}`), &in))
	require.Equal(t, "s1", in.SessionID)
	require.Equal(t, 3, in.QueueLimit)
	require.JSONEq(t, `{"run":2}`, string(in.Carried))
	out, err := json.Marshal(RunInput{SessionConfig: signals.SessionConfig{SessionID: "s1"}})
	require.NoError(t, err)
	require.JSONEq(t, `{"session_id":"s1"}`, string(out))
}

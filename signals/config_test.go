package signals

import "testing"

func TestValidPolicyLevelIsTheThreeLevels(t *testing.T) {
	for level, want := range map[string]bool{
		PolicyAllowAll: true, PolicyAskForRisky: true, PolicyAskAlways: true,
		"": false, "yolo": false, "Allow_All": false, "operator": false,
	} {
		if got := ValidPolicyLevel(level); got != want {
			t.Errorf("ValidPolicyLevel(%q) = %v, want %v", level, got, want)
		}
		if err := ValidateSessionConfigFormat(SessionConfig{SessionID: "s1", Policy: level}); (err == nil) != (want || level == "") {
			t.Errorf("a session config with policy %q: %v", level, err)
		}
	}
}

package signals

// Validation of SessionConfig (DESIGN §2), shared by the client, which refuses a bad config
// before it starts anything, and the workflow, which applies the defaults.

import (
	"fmt"
	"time"
)

// Permission policy levels (DESIGN §6).
const (
	PolicyAllowAll    = "allow_all"
	PolicyAskForRisky = "ask_for_risky"
	PolicyAskAlways   = "ask_always"
)

// MaxConfigDuration bounds the durations of a SessionConfig: past it, a turn's activity
// bound (turn_deadline plus slack) would overflow time.Duration.
const MaxConfigDuration = 100 * 365 * 24 * time.Hour

// ParseConfigDuration parses the SessionConfig duration field name: "" is 0 (the default),
// anything else must be a positive Go duration of at most MaxConfigDuration.
func ParseConfigDuration(name, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > MaxConfigDuration {
		return 0, fmt.Errorf("invalid %s %q: want a positive Go duration such as \"15m\", at most 100 years", name, s)
	}
	return d, nil
}

// ValidateSessionConfig reports the first field of cfg that cannot work: the session id, the
// policy level, or a duration.
func ValidateSessionConfig(cfg SessionConfig) error {
	if err := ValidateSessionID(cfg.SessionID); err != nil {
		return err
	}
	switch cfg.Policy {
	case "", PolicyAllowAll, PolicyAskForRisky, PolicyAskAlways:
	default:
		return fmt.Errorf("invalid policy %q: want allow_all, ask_for_risky or ask_always", cfg.Policy)
	}
	for _, f := range []struct{ name, value string }{
		{"grace_window", cfg.GraceWindow},
		{"turn_deadline", cfg.TurnDeadline},
		{"permission_timeout", cfg.PermissionTimeout},
	} {
		if _, err := ParseConfigDuration(f.name, f.value); err != nil {
			return err
		}
	}
	return nil
}

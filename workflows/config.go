package workflows

import (
	"fmt"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// Defaults of DESIGN §6 for the SessionConfig fields a client leaves empty.
const (
	DefaultGraceWindow       = 15 * time.Minute
	DefaultTurnDeadline      = 60 * time.Minute
	DefaultPermissionTimeout = 10 * time.Minute
	DefaultPolicy            = "ask_for_risky"
	DefaultMaxRunEvents      = 8000
	// TurnHeartbeat is the turn activity's heartbeat timeout: how fast a lost worker shows.
	TurnHeartbeat = 10 * time.Second
	// turnStartToCloseSlack widens the activity's StartToClose past the turn deadline, so the
	// workflow's deadline belt fires first and the activity bound is only a backstop.
	turnStartToCloseSlack = 5 * time.Minute
	// maxRunUpdates and maxRunSignals stay well under Temporal's per-run budgets (2,000
	// updates, 10,000 signals): past them the session continues as new.
	maxRunUpdates = 1000
	maxRunSignals = 5000
)

// Policy levels of DESIGN §6.
var policies = map[string]bool{"allow_all": true, "ask_for_risky": true, "ask_always": true}

// Config is a SessionConfig with its defaults applied and durations parsed.
type Config struct {
	signals.SessionConfig
	Grace             time.Duration
	Deadline          time.Duration
	PermissionTimeout time.Duration
	SteeringOn        bool
}

// ResolveConfig validates cfg and applies the defaults.
func ResolveConfig(cfg signals.SessionConfig) (Config, error) {
	if err := signals.ValidateSessionID(cfg.SessionID); err != nil {
		return Config{}, err
	}
	c := Config{SessionConfig: cfg, SteeringOn: true}
	if cfg.Steering != nil {
		c.SteeringOn = *cfg.Steering
	}
	if c.QueueLimit <= 0 {
		c.QueueLimit = DefaultQueueLimit
	}
	if c.JournalSize <= 0 {
		c.JournalSize = DefaultJournalSize
	}
	if c.MaxRunEvents <= 0 {
		c.MaxRunEvents = DefaultMaxRunEvents
	}
	if c.Policy == "" {
		c.Policy = DefaultPolicy
	}
	if !policies[c.Policy] {
		return Config{}, fmt.Errorf("invalid policy %q: want allow_all, ask_for_risky or ask_always", c.Policy)
	}
	var err error
	if c.Grace, err = duration("grace_window", cfg.GraceWindow, DefaultGraceWindow); err != nil {
		return Config{}, err
	}
	if c.Deadline, err = duration("turn_deadline", cfg.TurnDeadline, DefaultTurnDeadline); err != nil {
		return Config{}, err
	}
	if c.PermissionTimeout, err = duration("permission_timeout", cfg.PermissionTimeout, DefaultPermissionTimeout); err != nil {
		return Config{}, err
	}
	return c, nil
}

func duration(name, s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("invalid %s %q: want a positive Go duration such as \"15m\"", name, s)
	}
	return d, nil
}

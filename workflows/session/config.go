package session

import (
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// Defaults of contract §6 for the SessionConfig fields a client leaves empty.
const (
	DefaultGraceWindow       = 15 * time.Minute
	DefaultTurnDeadline      = 60 * time.Minute
	DefaultPermissionTimeout = 10 * time.Minute
	DefaultPolicy            = signals.PolicyAskForRisky
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

// Config is a SessionConfig with its defaults applied and durations parsed.
type Config struct {
	signals.SessionConfig
	Grace             time.Duration
	Deadline          time.Duration
	PermissionTimeout time.Duration
	AffinityWait      time.Duration
	SteeringOn        bool
}

// ResolveConfig validates the format of cfg (signals.ValidateSessionConfigFormat; the agent
// profile and the workspace are the worker's to admit, see Admission) and applies the
// defaults.
func ResolveConfig(cfg signals.SessionConfig) (Config, error) {
	if err := signals.ValidateSessionConfigFormat(cfg); err != nil {
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
	c.Grace = duration("grace_window", cfg.GraceWindow, DefaultGraceWindow)
	c.Deadline = duration("turn_deadline", cfg.TurnDeadline, DefaultTurnDeadline)
	c.PermissionTimeout = duration("permission_timeout", cfg.PermissionTimeout, DefaultPermissionTimeout)
	c.AffinityWait = duration("affinity_wait", cfg.AffinityWait, DefaultAffinityWait)
	return c, nil
}

// duration is a validated duration field, or def when it is empty.
func duration(name, s string, def time.Duration) time.Duration {
	if d, _ := signals.ParseConfigDuration(name, s); d > 0 {
		return d
	}
	return def
}

// DefaultAffinityWait bounds how long a turn waits for the previous host to take it: a live
// worker polls its host queue continuously and takes a task within milliseconds, so a few
// seconds without a poll means it is gone (or saturated), and the turn moves.
const DefaultAffinityWait = 3 * time.Second

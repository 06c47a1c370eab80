package session

// The token usage an agent reports (contract §7 "Usage"): counters summed over the session's
// turns, gauges (the agent's context window, its cost) kept at their latest value.

import (
	"encoding/json"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// addUsage adds a turn's reported usage to the session's totals and journals both.
func (s *Core) addUsage(now time.Time, turnID int64, raw json.RawMessage) {
	var turn map[string]any
	if json.Unmarshal(raw, &turn) != nil || len(turn) == 0 {
		return
	}
	if s.Usage == nil {
		s.Usage = map[string]int64{}
	}
	for k, v := range turn { // sums and replacements: the order of the keys does not matter
		switch v := v.(type) {
		case float64:
			s.Usage[k] += int64(v)
		case map[string]any: // a gauge (the runner's context and cost): the latest wins
			if s.UsageLatest == nil {
				s.UsageLatest = map[string]json.RawMessage{}
			}
			s.UsageLatest[k], _ = json.Marshal(v)
		}
	}
	s.journal(now, signals.EventUsageUpdated, turnID, map[string]any{"turn": turn, "total": usageView(s.Usage, s.UsageLatest)})
}

func usageView(u map[string]int64, latest map[string]json.RawMessage) map[string]any {
	if len(u) == 0 && len(latest) == 0 {
		return nil
	}
	out := make(map[string]any, len(u)+len(latest))
	for k, v := range u { // building a map: order does not matter
		out[k] = v
	}
	for k, v := range latest {
		out[k] = v
	}
	return out
}

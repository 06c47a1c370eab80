package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/tacp-dev/tacp/signals"
)

// waitingAttr is the TacpWaitingUntil update of an upsert: set while a limited turn waits,
// unset once after (only a session that waited upserts it: the attribute is newer than the
// others, and a namespace that lacks it fails the workflow task that names it).
func (s *session) waitingAttr(waiting *time.Time) []temporal.SearchAttributeUpdate {
	key := temporal.NewSearchAttributeKeyTime(signals.SearchAttrWaitingUntil)
	switch {
	case waiting != nil:
		s.waitedUntil = true
		return []temporal.SearchAttributeUpdate{key.ValueSet(*waiting)}
	case s.waitedUntil:
		s.waitedUntil = false
		return []temporal.SearchAttributeUpdate{key.ValueUnset()}
	}
	return nil
}

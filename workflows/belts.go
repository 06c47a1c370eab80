package workflows

// The shell's alarm clock: one workflow timer, set for the earliest alarm the core names
// (core_belts.go holds the belts and the alarms themselves).

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// armAlarm keeps one timer running for the earliest alarm, re-arming only when the core
// says so.
func (s *session) armAlarm(ctx workflow.Context) {
	at, summary, ok := s.setAlarm()
	if !ok {
		return
	}
	if s.cancelAlarm != nil {
		s.cancelAlarm()
	}
	s.alarmGen++
	gen := s.alarmGen
	tctx, cancel := workflow.WithCancel(ctx)
	s.cancelAlarm = cancel
	d := max(at.Sub(workflow.Now(ctx)), time.Millisecond)
	timer := workflow.NewTimerWithOptions(tctx, d, workflow.TimerOptions{Summary: summary})
	workflow.Go(ctx, func(ctx workflow.Context) {
		if timer.Get(ctx, nil) == nil && gen == s.alarmGen {
			s.alarmRang()
		}
	})
}

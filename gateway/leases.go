package gateway

// One viewer lease per session and role for all the connections of a gateway: a deck's
// /acp serving fifty editors on one session attaches once and renews once every third of
// the lease, not fifty times (each attach and renewal is an update: a billable action and
// history events of the session). The first connection of a session and role attaches
// (or starts the session), the others wait for its answer; the last to leave detaches.
//
// A lease is renewed only while the session has work: a turn running or prompts queued. A
// lease matters to a turn (its grace when the viewer goes, its cadence); an idle session's
// renewals would buy nothing, at 2,160 actions a day for an editor left open. So the lease
// of an idle session lapses, and the turn.started of the next turn (whoever prompted it)
// renews it at once.

import (
	"context"
	"sync"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

type leaseKey struct{ session, role string }

// sharedLease is the lease of one session and role: the connections holding it, and the
// answer of the attach that took it (ready closes when it is known).
type sharedLease struct {
	holders int
	ready   chan struct{}
	err     error
	stop    context.CancelFunc
	// wake asks the renewals for one now: a turn started.
	wake chan struct{}
}

type leases struct {
	mu sync.Mutex
	by map[leaseKey]*sharedLease
}

// viewerFor is the viewer id of the gateway's lease in role: one per gateway and role.
func (g *Gateway) viewerFor(role string) string { return "acp-" + g.id + "-" + role }

// holdLease enters a connection into the lease of (id, role): the first attaches with attach,
// which it is given to run; the others wait for that attach's answer. An attach that fails
// leaves no lease behind.
func (c *conn) holdLease(ctx context.Context, id, role string, attach func() error) error {
	l, k := &c.g.leases, leaseKey{id, role}
	l.mu.Lock()
	if l.by == nil {
		l.by = map[leaseKey]*sharedLease{}
	}
	s := l.by[k]
	if s != nil {
		s.holders++
		l.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			c.releaseLease(id, role, false)
			return ctx.Err()
		}
		if s.err != nil {
			c.releaseLease(id, role, false)
		}
		return s.err
	}
	s = &sharedLease{holders: 1, ready: make(chan struct{}), wake: make(chan struct{}, 1)}
	l.by[k] = s
	l.mu.Unlock()

	err := attach()
	l.mu.Lock()
	s.err = err
	if err != nil && l.by[k] == s {
		delete(l.by, k) // the waiters see err and release nothing more
	}
	if err == nil && l.by[k] == s { // not released while it attached
		rctx, stop := context.WithCancel(context.Background())
		s.stop = stop
		go c.renewLease(rctx, id, role, s.wake)
	}
	l.mu.Unlock()
	close(s.ready)
	return err
}

// releaseLease takes a connection out of the lease of (id, role); the last one out stops
// the renewals and, when detach is set, detaches.
func (c *conn) releaseLease(id, role string, detach bool) {
	l, k := &c.g.leases, leaseKey{id, role}
	l.mu.Lock()
	s := l.by[k]
	if s == nil {
		l.mu.Unlock()
		return
	}
	s.holders--
	last := s.holders == 0
	if last {
		delete(l.by, k)
	}
	l.mu.Unlock()
	if !last || s.err != nil {
		return
	}
	<-s.ready
	if s.stop != nil {
		s.stop()
	}
	if !detach {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.client().Detach(ctx, id, signals.DetachRequest{ViewerID: c.g.viewerFor(role)}); err != nil {
		c.g.o.Logger.Warn("detach failed; the viewer lease will lapse", "session", id, "err", err)
	}
}

// renewLease renews the lease every third of its length while the session has work, and
// at once when wake says a turn started and the lease is older than a third of its
// length (a younger one holds until the next tick), until ctx ends.
func (c *conn) renewLease(ctx context.Context, id, role string, wake <-chan struct{}) {
	every := c.g.o.Lease / 3
	t := time.NewTicker(every)
	defer t.Stop()
	idle := false         // what the last renewal's answer said; the attach's is not kept
	renewed := time.Now() // the attach
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if idle {
				continue
			}
		case <-wake:
			idle = false // a turn runs: the ticks renew again
			if time.Since(renewed) < every {
				continue
			}
		}
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := c.client().Attach(actx, id, signals.AttachRequest{ViewerID: c.g.viewerFor(role), Role: role, LeaseSeconds: int(c.g.o.Lease / time.Second)})
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				c.g.o.Logger.Warn("viewer lease renewal failed", "session", id, "err", err)
			}
			continue
		}
		renewed = time.Now()
		idle = st.State == signals.StateIdle && len(st.Queue) == 0
	}
}

// wakeLease renews the lease of (id, role) now, if this gateway holds it: a turn started.
func (g *Gateway) wakeLease(id, role string) {
	g.leases.mu.Lock()
	s := g.leases.by[leaseKey{id, role}]
	g.leases.mu.Unlock()
	if s == nil {
		return
	}
	select {
	case s.wake <- struct{}{}:
	default: // a renewal is asked for already
	}
}

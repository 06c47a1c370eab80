package activities

// Liveness: a turn attempt's heartbeats. The heartbeat is the one thing that tells the
// server a worker still runs the attempt; when none lands for the heartbeat timeout the
// server takes the worker for lost and the turn runs again elsewhere (the agent's work done
// twice). So heartbeats go out on a goroutine of their own, through the client's
// RecordActivityHeartbeat with the attempt's task token, and a slow answer is waited for:
// only the server decides that an attempt is lost.
//
// The SDK's own activity.RecordHeartbeat is not used for that: it bounds each heartbeat's
// round trip by its throttle interval (one second here) and, when a round trip takes longer,
// cancels the activity's context as if the server had given it up. On a busy machine, or
// beside a slow frontend, a healthy attempt then ended itself and ran again, or failed as
// `turn attempt lost` once its attempts were used up (issue 35).

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tacp-dev/tacp/signals"
)

// Metric names of the heartbeats, as recorded (the Prometheus exporter adds _total to the
// counter): how long a heartbeat's round trip takes, and how many round trips failed and
// were tried again. A latency near the heartbeat timeout means the server or this worker is
// saturated: add capacity before attempts are taken for lost.
const (
	MetricHeartbeatLatency  = "tacp_heartbeat_latency"
	MetricHeartbeatRetries  = "tacp_heartbeat_retries"
	defaultHeartbeatTimeout = 10 * time.Second
)

// beatEvery is how often an attempt beats under heartbeat timeout hb: five beats a timeout,
// so that up to four may be late or lost before the server counts the attempt lost, at no
// more than one a second.
func beatEvery(hb time.Duration) time.Duration {
	if hb <= 0 {
		hb = defaultHeartbeatTimeout
	}
	return max(hb/5, time.Second)
}

// beatFunc sends one heartbeat with details p for the activity of owner, within rpc.
type beatFunc func(rpc, owner context.Context, p signals.TurnProgress) error

// clientBeat sends the heartbeat through the worker's client, with the activity's task token.
func (r *Runner) clientBeat(rpc, owner context.Context, p signals.TurnProgress) error {
	return r.Client.RecordActivityHeartbeat(rpc, activity.GetInfo(owner).TaskToken, p)
}

// heartbeat records the attempt's progress until stop: every beatEvery, at once when the
// progress changes (set) and when another activity starts answering for the attempt (an
// adoption). A beat the server does not answer in time is tried again; only the server's
// answer that it no longer holds the activity (NotFound) or that the workflow asked for its
// cancellation ends the owner (beatTarget.lostOwner), as the SDK's would.
type heartbeat struct {
	metrics  client.MetricsHandler
	beat     atomic.Pointer[signals.TurnProgress]
	progress chan struct{}
	done     chan struct{}
	once     sync.Once
}

// startHeartbeat starts the attempt's heartbeats with what it knows now (beat); ctx is the
// attempt's activity context, to its owner's.
func (r *Runner) startHeartbeat(ctx context.Context, to beatTarget, beat signals.TurnProgress, log *slog.Logger) *heartbeat {
	h := newHeartbeat(beat, activity.GetMetricsHandler(ctx))
	send := r.beat
	if send == nil {
		send = r.clientBeat
	}
	hb := activity.GetInfo(ctx).HeartbeatTimeout
	if hb <= 0 {
		hb = defaultHeartbeatTimeout
	}
	go h.run(to, send, beatEvery(hb), hb, log)
	return h
}

func newHeartbeat(beat signals.TurnProgress, metrics client.MetricsHandler) *heartbeat {
	h := &heartbeat{metrics: metrics, progress: make(chan struct{}, 1), done: make(chan struct{})}
	h.beat.Store(&beat)
	return h
}

// run is the heartbeat's goroutine. The first beat goes out after every, or with the first
// progress: a turn shorter than that (most short prompts) beats once, when its prompt is on
// the agent's stdin.
func (h *heartbeat) run(to beatTarget, send beatFunc, every, timeout time.Duration, log *slog.Logger) {
	tick := time.NewTimer(every)
	defer tick.Stop()
	var failures int
	for {
		select {
		case <-tick.C:
		case <-h.progress:
		case <-to.ownerChanged():
		case <-h.done:
			return
		}
		next := every
		if owner := to.beatCtx(); owner != nil && !h.send(owner, to, send, timeout, log) {
			// Tried again soon, not at once: a server that does not answer is busy.
			failures++
			next = min(time.Duration(failures)*time.Second, every)
		} else {
			failures = 0
		}
		if !tick.Stop() {
			select {
			case <-tick.C:
			default:
			}
		}
		tick.Reset(next)
	}
}

// send sends one beat for owner; it reports whether the server answered. Its round trip may
// take up to the heartbeat timeout (the client tries it again within that when a try is
// lost): a beat that lands late still tells the server the worker is alive, and one that
// takes longer is worth nothing.
func (h *heartbeat) send(owner context.Context, to beatTarget, send beatFunc, timeout time.Duration, log *slog.Logger) bool {
	rpc, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	started := time.Now()
	err := send(rpc, owner, *h.beat.Load())
	if err == nil {
		h.metrics.Timer(MetricHeartbeatLatency).Record(time.Since(started))
		return true
	}
	if ownerEnded(err) {
		to.lostOwner(owner, err)
		return true
	}
	h.metrics.Counter(MetricHeartbeatRetries).Inc(1)
	log.Warn("heartbeat not answered: tried again (the server takes the attempt for lost only past its heartbeat timeout)",
		"after", time.Since(started).Round(time.Millisecond), "error", err)
	return false
}

// ownerEnded reports whether a heartbeat's error ends the activity it beat for: the server no
// longer holds it (its run closed, or its heartbeat timeout passed), or the workflow asked
// for its cancellation (the cancel backstop), or an operator paused or reset it.
func ownerEnded(err error) bool {
	var nf *serviceerror.NotFound
	var ce *temporal.CanceledError
	return errors.As(err, &nf) || errors.As(err, &ce) ||
		errors.Is(err, activity.ErrActivityPaused) || errors.Is(err, activity.ErrActivityReset)
}

// set records p from now on: at once, from the heartbeat's goroutine (a beat is a round trip
// to the server, which the caller does not wait for), and in every beat after.
func (h *heartbeat) set(p signals.TurnProgress) {
	h.beat.Store(&p)
	select {
	case h.progress <- struct{}{}:
	default:
	}
}

func (h *heartbeat) stop() { h.once.Do(func() { close(h.done) }) }

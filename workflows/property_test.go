package workflows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tacp-dev/tacp/workflows/session"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
)

// A property test of the session shell: random sequences of client updates, turn-runner
// signals, viewer churn and forced continue-as-new, applied one per simulated second, with
// the journal and status checked against the invariants of contract §3–6 after every step and
// at the end of every run. Each case is one fixed seed: a failure names it and prints the
// operations, and `go test -run 'Property/seed=N$'` replays it exactly.

const (
	propSeeds = 50
	propOps   = 40
	// propGap spaces the steps 1.001 s apart: every duration the session arms (leases of
	// whole seconds, the 7.5 s grace window, the 9.5 s permission timeout) then falls between
	// two steps, so no timer of the session fires in the same instant as a step.
	propGap = time.Second + time.Millisecond
)

var propEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type propKind int

const (
	opPrompt propKind = iota
	opSteer
	opCancel
	opEvents
	opPermRequest
	opFinish
	opRespond
	opAttach
	opDetach
	opPolicy
	opContinueAsNew
	opClose
)

var propKindNames = [...]string{"prompt", "steer", "cancel", "turn_events", "permission_requested", "turn_finished",
	"permission_respond", "attach", "detach", "set_policy", "continue_as_new", "close"}

// propOp is one generated operation. Its concrete arguments (the live turn, the steer token,
// an open request) are read from the session when it is applied; r1 and r2 pick among them.
type propOp struct {
	kind    propKind
	variant int
	r1, r2  uint32
}

// String shows the kind, the variant and r1, r2 mod 100 (the seed replays them exactly).
func (o propOp) String() string {
	return fmt.Sprintf("%s/%d(%d,%d)", propKindNames[o.kind], o.variant, o.r1%100, o.r2%100)
}

// Variants of prompt, steer and permission_respond (genPropOps weighs them in this order).
const (
	promptFresh = iota
	promptRepeat
	promptEmpty
	promptAsViewer
)

const (
	steerLive = iota
	steerStale
	steerRepeatSame
	steerRepeatOther
	steerAsViewer
)

const (
	respondOpen = iota
	respondUnknown
	respondAgain
	respondAsViewer
)

func genPropOps(rng *rand.Rand) []propOp {
	table := []struct {
		kind     propKind
		weight   int
		variants []int // weight of each variant
	}{
		{opPrompt, 18, []int{45, 20, 15, 20}},
		{opSteer, 12, []int{40, 20, 15, 10, 15}},
		{opCancel, 5, []int{1, 1, 1, 1}},
		{opEvents, 14, []int{60, 15, 25}},
		{opPermRequest, 10, []int{1}},
		{opFinish, 9, []int{5, 1}},
		{opRespond, 12, []int{55, 15, 20, 10}},
		{opAttach, 8, []int{1}},
		{opDetach, 6, []int{1}},
		{opPolicy, 4, []int{1}},
		{opContinueAsNew, 4, []int{1}},
	}
	weighted := func(ws []int) int {
		total := 0
		for _, w := range ws {
			total += w
		}
		n := rng.IntN(total)
		for i, w := range ws {
			if n < w {
				return i
			}
			n -= w
		}
		panic("unreachable")
	}
	kindWeights := make([]int, len(table))
	for i, e := range table {
		kindWeights[i] = e.weight
	}
	ops := make([]propOp, 0, propOps+8)
	for range propOps {
		e := table[weighted(kindWeights)]
		ops = append(ops, propOp{kind: e.kind, variant: weighted(e.variants), r1: rng.Uint32(), r2: rng.Uint32()})
	}
	return append(ops, propTail(rng)...)
}

// propTail ends a sequence: finish the live turn (which may start a queued one), close (which
// cancels it and drops the rest of the queue), try a prompt on the closed session, and finish
// the cancelled turn so that the run ends.
func propTail(rng *rand.Rand) []propOp {
	return []propOp{
		{kind: opFinish, r1: rng.Uint32()},
		{kind: opClose},
		{kind: opPrompt, variant: promptFresh},
		{kind: opFinish, r1: rng.Uint32()},
		{kind: opFinish, r1: rng.Uint32()},
		{kind: opFinish, r1: rng.Uint32()},
	}
}

type steerRec struct {
	text string
	res  signals.SteerResult
}

// propRunner applies one generated sequence across as many runs as continue-as-new makes
// and keeps the model the invariants are checked against.
type propRunner struct {
	t        *testing.T
	seed     uint64
	cfg      signals.SessionConfig
	limit    int
	steering bool
	ops      []propOp

	run     int
	applied int // ops[:applied] have been applied
	log     []string
	fails   []string
	pending map[int]string // updates sent and not yet answered, by op index

	journal []signals.Event // accumulated across runs
	bySeq   map[int64]int

	acked       map[string]int64 // prompt client_message_id → turn_id, for acknowledged new prompts
	promptIDs   []string         // every client_message_id sent
	lastTurn    int64
	steers      map[string]steerRec // accepted steers by client_msg_id
	steerIDs    []string
	tokens      []string
	batches     map[int64]int64 // batches sent to a turn (attempt 1)
	agentEvents map[int64]int   // agent events of the batches a turn should journal
	closed      bool
	closeSeq    int64 // the last seq when close was acknowledged
	n           int   // counter for fresh ids
	cov         map[string]int
}

func (r *propRunner) lastSeq(h *harness) int64 {
	if st, ok := r.status(h); ok {
		return st.Journal.LastSeq
	}
	return 0
}

func (r *propRunner) failf(format string, args ...any) {
	r.fails = append(r.fails, fmt.Sprintf("run %d, before op #%d: ", r.run, r.applied)+fmt.Sprintf(format, args...))
}

func (r *propRunner) fresh(prefix string) string {
	r.n++
	return fmt.Sprintf("%s%d", prefix, r.n)
}

func (r *propRunner) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, config %+v (steering %t)\nops:", r.seed, r.cfg, r.steering)
	for i, op := range r.ops {
		if i%8 == 0 {
			fmt.Fprintf(&b, "\n  #%02d:", i)
		}
		fmt.Fprintf(&b, " %s", op)
	}
	b.WriteString("\napplied:\n  " + strings.Join(r.log, "\n  "))
	b.WriteString("\njournal:")
	for _, ev := range r.journal {
		fmt.Fprintf(&b, "\n  %3d %-22s turn %d %s", ev.Seq, ev.Kind, ev.TurnID, ev.Data)
	}
	if len(r.fails) > 0 {
		b.WriteString("\nviolations:\n  " + strings.Join(r.fails[:min(len(r.fails), 10)], "\n  "))
	}
	return b.String()
}

func TestSession_PropertyRandomOperationsKeepTheInvariants(t *testing.T) {
	cov := map[string]int{}
	defer func() {
		if testing.Verbose() && !t.Failed() {
			var lines []string
			for k, n := range cov {
				lines = append(lines, fmt.Sprintf("%5d  %s", n, k))
			}
			slices.Sort(lines)
			t.Logf("coverage over %d seeds:\n%s", propSeeds, strings.Join(lines, "\n"))
		}
	}()
	for seed := uint64(1); seed <= propSeeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15))
			cfg := signals.SessionConfig{SessionID: "prop", QueueLimit: 2 + rng.IntN(3)}
			cfg.Policy = []string{"allow_all", "ask_for_risky", "ask_always"}[rng.IntN(3)]
			if rng.IntN(2) == 0 {
				cfg.PermissionTimeout = "9500ms"
			}
			if rng.IntN(2) == 0 {
				cfg.GraceWindow = "7500ms"
			}
			steering := rng.IntN(6) != 0
			if !steering {
				cfg.Steering = &steering
			}
			r := &propRunner{
				t: t, seed: seed, cfg: cfg, limit: cfg.QueueLimit, steering: steering, ops: genPropOps(rng),
				pending: map[int]string{}, bySeq: map[int64]int{}, acked: map[string]int64{},
				steers: map[string]steerRec{}, batches: map[int64]int64{}, agentEvents: map[int64]int{}, cov: cov,
			}
			r.execute()
		})
	}
}

// newPropHarness is a harness whose clock starts at start. A turn carried from an earlier
// run has no child in this environment: cancelling it goes to the (mocked) server.
func newPropHarness(t *testing.T, start time.Time) *harness {
	h := newHarness(t)
	h.env.SetStartTime(start)
	h.env.OnRequestCancelExternalWorkflow(mock.Anything, mock.Anything, mock.Anything).Return(nil)
	return h
}

func (r *propRunner) execute() {
	t := r.t
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("panic: %v\n%s", p, r.report())
		}
	}()
	cfg, start := session.RunInput{SessionConfig: r.cfg}, propEpoch
	for r.run = 1; ; r.run++ {
		require.LessOrEqual(t, r.run, 12, "too many continue-as-new runs\n%s", r.report())
		h := newPropHarness(t, start)
		for i := r.applied; i < len(r.ops); i++ {
			// One step per op on a grid that continues across runs: op i at epoch + (i+1)·gap.
			h.at = max(propEpoch.Add(time.Duration(i+1)*propGap).Sub(start), time.Millisecond) - time.Second
			h.step(func() { r.apply(h, i) })
		}
		err := h.run(cfg)
		if evs, ok := r.events(h); ok {
			r.merge(evs)
		}
		r.checkJournal(false)
		for i, name := range r.pending {
			r.failf("the %s update of op #%d was never answered", name, i)
		}
		clear(r.pending)
		if err == nil {
			break
		}
		if !IsContinueAsNew(err) {
			r.failf("run ended with %v", err)
			break
		}
		cfg = canInput(t, err)
		start = h.env.Now()
		if r.applied == len(r.ops) {
			// Continued as new after the last op: the next run still has to end.
			r.ops = append(r.ops, propTail(rand.New(rand.NewPCG(r.seed, uint64(r.run))))...)
		}
		require.Empty(t, r.fails, "%s", r.report())
	}
	r.checkJournal(true)
	require.Empty(t, r.fails, "%s", r.report())
	r.cov[fmt.Sprintf("sessions of %d run(s)", r.run)]++
	for _, ev := range r.journal {
		r.cov["event "+ev.Kind]++
		var d struct {
			DecidedBy string `json:"decided_by"`
			Reason    string `json:"reason"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		switch ev.Kind {
		case signals.EventPermissionResolved:
			r.cov["event "+ev.Kind+" by "+d.DecidedBy]++
		case signals.EventTurnCancelling:
			r.cov["event "+ev.Kind+" for "+d.Reason]++
		}
	}
	if testing.Verbose() {
		t.Logf("seed %d: %d ops in %d run(s), %d events", r.seed, r.applied, r.run, len(r.journal))
	}
}

// --- queries ---

func (r *propRunner) events(h *harness) ([]signals.Event, bool) {
	var out []signals.Event
	after := int64(0)
	for {
		v, err := h.env.QueryWorkflow(signals.QueryEvents, signals.EventsRequest{AfterSeq: after, Limit: session.DefaultEventsLimit})
		if err != nil {
			r.failf("events query: %v", err)
			return nil, false
		}
		var res signals.EventsResult
		if err := v.Get(&res); err != nil {
			r.failf("events result: %v", err)
			return nil, false
		}
		if res.Gap {
			r.failf("events after %d report a gap (first retained %d)", after, res.FirstRetainedSeq)
		}
		out = append(out, res.Events...)
		if len(res.Events) == 0 || res.Events[len(res.Events)-1].Seq >= res.LastSeq {
			return out, true
		}
		after = res.Events[len(res.Events)-1].Seq
	}
}

func (r *propRunner) status(h *harness) (signals.Status, bool) {
	v, err := h.env.QueryWorkflow(signals.QueryStatus)
	if err != nil {
		r.failf("status query: %v", err)
		return signals.Status{}, false
	}
	var st signals.Status
	if err := v.Get(&st); err != nil {
		r.failf("status result: %v", err)
		return signals.Status{}, false
	}
	return st, true
}

func sameEvent(a, b signals.Event) bool {
	var ca, cb bytes.Buffer
	_ = json.Compact(&ca, a.Data)
	_ = json.Compact(&cb, b.Data)
	return a.Seq == b.Seq && a.Kind == b.Kind && a.TurnID == b.TurnID && a.At.Equal(b.At) && bytes.Equal(ca.Bytes(), cb.Bytes())
}

func sameEvents(a, b []signals.Event) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(ev signals.Event) bool {
		i := int(ev.Seq - a[0].Seq)
		return i < 0 || i >= len(b) || !sameEvent(ev, b[i])
	})
}

// merge adds a run's retained journal to the accumulated one: what was seen before must be
// there unchanged, and what is new must continue the seq.
func (r *propRunner) merge(evs []signals.Event) {
	if len(evs) > 0 && evs[0].Seq != 1 {
		r.failf("the journal starts at seq %d, want 1 (nothing is trimmed at this size)", evs[0].Seq)
	}
	if len(evs) < len(r.journal) {
		r.failf("the journal shrank from %d to %d events", len(r.journal), len(evs))
	}
	for _, ev := range evs {
		if i, ok := r.bySeq[ev.Seq]; ok {
			if !sameEvent(r.journal[i], ev) {
				r.failf("seq %d changed: was %s %s, now %s %s", ev.Seq, r.journal[i].Kind, r.journal[i].Data, ev.Kind, ev.Data)
			}
			continue
		}
		if want := int64(len(r.journal)) + 1; ev.Seq != want {
			r.failf("seq %d (%s) follows seq %d", ev.Seq, ev.Kind, want-1)
		}
		r.bySeq[ev.Seq] = len(r.journal)
		r.journal = append(r.journal, ev)
	}
}

// --- invariants on the journal ---

type journalView struct {
	started, ended map[int64]int // turn → index of its turn.started / terminal event
	accepted       map[string]int64
	acceptedOrder  []string
	startedPrompt  map[string]int64
	requested      map[string]int64 // request → turn
	resolved       map[string]signals.PermissionResolution
	agentEvents    map[int64]int
	closed         *signals.SessionClosedData
}

// checkJournal checks the accumulated journal: the prefix invariants always, the ones that
// need the session's end when final.
func (r *propRunner) checkJournal(final bool) journalView {
	j := r.journal
	v := journalView{
		started: map[int64]int{}, ended: map[int64]int{}, accepted: map[string]int64{}, startedPrompt: map[string]int64{},
		requested: map[string]int64{}, resolved: map[string]signals.PermissionResolution{}, agentEvents: map[int64]int{},
	}
	if len(j) == 0 || j[0].Kind != signals.EventSessionStarted {
		r.failf("the journal does not begin with session.started")
	}
	open := func(turn int64) bool {
		_, s := v.started[turn]
		_, e := v.ended[turn]
		return s && !e
	}
	var lastStarted int64
	for i, ev := range j {
		// 1. seq contiguous from 1, across runs.
		if ev.Seq != int64(i)+1 {
			r.failf("event %d has seq %d", i, ev.Seq)
		}
		if v.closed != nil {
			r.failf("%s (seq %d) after session.closed", ev.Kind, ev.Seq)
		}
		switch ev.Kind {
		case signals.EventSessionStarted:
			if i != 0 {
				r.failf("session.started again at seq %d", ev.Seq)
			}
		case signals.EventPromptAccepted:
			var d signals.PromptAcceptedData
			_ = json.Unmarshal(ev.Data, &d)
			if _, dup := v.accepted[d.ClientMessageID]; dup {
				r.failf("prompt %s accepted twice (seq %d)", d.ClientMessageID, ev.Seq)
			}
			v.accepted[d.ClientMessageID] = ev.TurnID
			v.acceptedOrder = append(v.acceptedOrder, d.ClientMessageID)
		case signals.EventTurnStarted:
			// 2. one start per turn, in turn order, for the prompt accepted as that turn.
			var d signals.TurnStartedData
			_ = json.Unmarshal(ev.Data, &d)
			if _, dup := v.started[ev.TurnID]; dup {
				r.failf("turn %d started twice (seq %d)", ev.TurnID, ev.Seq)
			}
			if ev.TurnID <= lastStarted {
				r.failf("turn %d started after turn %d", ev.TurnID, lastStarted)
			}
			for t := range v.started {
				if open(t) {
					r.failf("turn %d started (seq %d) while turn %d is open", ev.TurnID, ev.Seq, t)
				}
			}
			if v.accepted[d.PromptClientMessageID] != ev.TurnID {
				r.failf("turn %d started for prompt %q, accepted as turn %d", ev.TurnID, d.PromptClientMessageID, v.accepted[d.PromptClientMessageID])
			}
			lastStarted = ev.TurnID
			v.started[ev.TurnID] = i
			v.startedPrompt[d.PromptClientMessageID] = ev.TurnID
		case signals.EventTurnEnded, signals.EventTurnFailed:
			// 2. no terminal without a start, never two.
			if _, ok := v.started[ev.TurnID]; !ok {
				r.failf("%s for turn %d (seq %d) without turn.started", ev.Kind, ev.TurnID, ev.Seq)
			}
			if _, dup := v.ended[ev.TurnID]; dup {
				r.failf("a second terminal %s for turn %d (seq %d)", ev.Kind, ev.TurnID, ev.Seq)
			}
			v.ended[ev.TurnID] = i
		case signals.EventAgentUpdate:
			if ev.TurnID != 0 && !open(ev.TurnID) {
				r.failf("agent.update for turn %d (seq %d) outside the turn", ev.TurnID, ev.Seq)
			}
			v.agentEvents[ev.TurnID]++
		case signals.EventSteerAccepted, signals.EventTurnCancelling, signals.EventTurnRestarted:
			if !open(ev.TurnID) {
				r.failf("%s for turn %d (seq %d) outside the turn", ev.Kind, ev.TurnID, ev.Seq)
			}
		case signals.EventPermissionRequested:
			var d signals.PermissionRequestedData
			_ = json.Unmarshal(ev.Data, &d)
			if _, dup := v.requested[d.RequestID]; dup {
				r.failf("permission %s requested twice (seq %d)", d.RequestID, ev.Seq)
			}
			if !open(ev.TurnID) {
				r.failf("permission %s requested for turn %d outside the turn", d.RequestID, ev.TurnID)
			}
			v.requested[d.RequestID] = ev.TurnID
		case signals.EventPermissionResolved:
			// 4. resolved once, after it was requested.
			var d signals.PermissionResolution
			_ = json.Unmarshal(ev.Data, &d)
			if _, ok := v.requested[d.RequestID]; !ok {
				r.failf("permission %s resolved (seq %d) but never requested", d.RequestID, ev.Seq)
			}
			if _, dup := v.resolved[d.RequestID]; dup {
				r.failf("permission %s resolved twice (seq %d)", d.RequestID, ev.Seq)
			}
			v.resolved[d.RequestID] = d
		case signals.EventSessionClosed:
			var d signals.SessionClosedData
			_ = json.Unmarshal(ev.Data, &d)
			v.closed = &d
			for t := range v.started {
				if open(t) {
					r.failf("session closed while turn %d is open", t)
				}
			}
		}
	}
	// 3. every acknowledged prompt was accepted once, as the turn it was told.
	for id, turn := range r.acked {
		if got, ok := v.accepted[id]; !ok || got != turn {
			r.failf("acknowledged prompt %s (turn %d) has prompt.accepted for turn %d (present: %t)", id, turn, got, ok)
		}
	}
	for id := range v.accepted {
		if _, ok := r.acked[id]; !ok {
			r.failf("prompt.accepted for %s, which no update acknowledged", id)
		}
	}
	for turn, n := range v.agentEvents {
		if r.agentEvents[turn] != n {
			r.failf("turn %d journaled %d agent updates; its distinct batches carried %d", turn, n, r.agentEvents[turn])
		}
	}
	if !final {
		return v
	}
	if v.closed == nil {
		r.failf("the session ended without session.closed")
		return v
	}
	for turn := range v.started {
		if _, ok := v.ended[turn]; !ok {
			r.failf("turn %d started and never ended", turn)
		}
	}
	for turn, i := range v.started {
		if r.closed && j[i].Seq > r.closeSeq {
			r.failf("turn %d started (seq %d) after close was acknowledged (seq %d)", turn, j[i].Seq, r.closeSeq)
		}
	}
	dropped := map[string]bool{}
	for _, id := range v.closed.Dropped {
		dropped[id] = true
		if _, ok := v.startedPrompt[id]; ok {
			r.failf("prompt %s both started and dropped", id)
		}
		if _, ok := v.accepted[id]; !ok {
			r.failf("dropped prompt %s was never accepted", id)
		}
	}
	for id, turn := range r.acked {
		if _, ok := v.startedPrompt[id]; !ok && !dropped[id] {
			r.failf("acknowledged prompt %s (turn %d) neither started nor dropped", id, turn)
		}
	}
	for id := range v.requested {
		if _, ok := v.resolved[id]; !ok {
			r.failf("permission %s requested and never resolved", id)
		}
	}
	for turn, n := range r.agentEvents {
		if v.agentEvents[turn] != n {
			r.failf("turn %d: sent %d agent updates in distinct batches, journaled %d", turn, n, v.agentEvents[turn])
		}
	}
	return v
}

// crossCheck compares the status snapshot with the journal it was taken with.
func (r *propRunner) crossCheck(st signals.Status, v journalView) {
	if st.Run != r.run {
		r.failf("status run %d, want %d", st.Run, r.run)
	}
	if last := int64(len(r.journal)); st.Journal.LastSeq != last {
		r.failf("status journal last_seq %d, journal has %d", st.Journal.LastSeq, last)
	}
	var open []int64
	for t := range v.started {
		if _, ok := v.ended[t]; !ok {
			open = append(open, t)
		}
	}
	if want := []int64{}; st.TurnID != 0 {
		want = append(want, st.TurnID)
		if !slices.Equal(open, want) {
			r.failf("status names live turn %d; the journal has open turns %v", st.TurnID, open)
		}
	} else if len(open) > 0 {
		r.failf("status has no live turn; the journal has open turns %v", open)
	}
	var pending []string
	for _, p := range st.PendingPermissions {
		pending = append(pending, p.RequestID)
	}
	var unresolved []string
	for id := range v.requested {
		if _, ok := v.resolved[id]; !ok {
			unresolved = append(unresolved, id)
		}
	}
	slices.Sort(pending)
	slices.Sort(unresolved)
	if !slices.Equal(pending, unresolved) {
		r.failf("status pending permissions %v; the journal has unresolved %v", pending, unresolved)
	}
	var queued, waiting []string
	for _, q := range st.Queue {
		queued = append(queued, q.ClientMessageID)
	}
	for _, id := range v.acceptedOrder {
		if _, ok := v.startedPrompt[id]; !ok && (v.closed == nil || !slices.Contains(v.closed.Dropped, id)) {
			waiting = append(waiting, id)
		}
	}
	if !slices.Equal(queued, waiting) {
		r.failf("status queue %v; the journal has accepted and not started %v", queued, waiting)
	}
}

// --- applying an op ---

func rejectionOf(err error) string {
	if rej, ok := rejection.As(err); ok {
		return rej.Type
	}
	return "error: " + err.Error()
}

func pick[T any](xs []T, r uint32) (T, bool) {
	var zero T
	if len(xs) == 0 {
		return zero, false
	}
	return xs[int(r)%len(xs)], true
}

func isObserver(st signals.Status, id string) bool {
	return slices.ContainsFunc(st.Viewers, func(v signals.Viewer) bool { return v.ViewerID == id && v.Role == signals.RoleObserver })
}

// viewerFor names a viewer for a request: an attached observer when asked to (forbidden),
// otherwise sometimes an attached controller or an unknown viewer (both allowed).
func viewerFor(st signals.Status, asObserver bool, r uint32) string {
	var obs, others []string
	for _, v := range st.Viewers {
		if v.Role == signals.RoleObserver {
			obs = append(obs, v.ViewerID)
		} else {
			others = append(others, v.ViewerID)
		}
	}
	if id, ok := pick(obs, r); asObserver && ok {
		return id
	}
	if r%3 == 0 {
		if id, ok := pick(others, r/3); ok {
			return id
		}
		return "ghost"
	}
	return ""
}

// send sends an update; outcome describes the answer (and reports a wrong one). Whether
// rejected or, when noop, accepted, the update must leave the journal as it was.
func (r *propRunner) send(h *harness, i int, name string, arg any, before []signals.Event, noop bool, outcome func(res any, err error) string) {
	line := len(r.log) - 1
	r.pending[i] = name
	h.update(name, arg, func(res any, err error) {
		delete(r.pending, i)
		r.log[line] += " → " + outcome(res, err)
		if err == nil && !noop {
			return
		}
		// 5. a rejected update writes nothing (nor does one that repeats an earlier request).
		if after, ok := r.events(h); ok && !sameEvents(before, after) {
			what := "rejected"
			if err == nil {
				what = "no-op"
			}
			var added []string
			for _, ev := range after[min(len(before), len(after)):] {
				added = append(added, ev.Kind)
			}
			r.failf("op #%d: %s %s update changed the journal (%d → %d events, added %v)", i, what, name, len(before), len(after), added)
		}
	})
}

func (r *propRunner) expect(i int, what, want, got string) string {
	r.cov[what+" "+got]++
	if want != got {
		r.failf("op #%d %s: want %s, got %s", i, what, want, got)
		return got + " (WANT " + want + ")"
	}
	return got
}

func (r *propRunner) apply(h *harness, i int) {
	r.applied = i + 1
	op := r.ops[i]
	before, ok := r.events(h)
	if !ok {
		return
	}
	r.merge(before)
	v := r.checkJournal(false)
	st, ok := r.status(h)
	if !ok {
		return
	}
	r.crossCheck(st, v)
	if st.SteerToken != "" && !slices.Contains(r.tokens, st.SteerToken) {
		r.tokens = append(r.tokens, st.SteerToken)
	}
	r.log = append(r.log, fmt.Sprintf("#%02d run %d t=%s [%s turn %d q%d p%d] %s", i, r.run,
		h.env.Now().Sub(propEpoch).Round(time.Millisecond), st.State, st.TurnID, len(st.Queue), len(st.PendingPermissions), op))
	note := func(format string, args ...any) { r.log[len(r.log)-1] += ": " + fmt.Sprintf(format, args...) }

	switch op.kind {
	case opPrompt:
		r.applyPrompt(h, i, op, st, before, note)
	case opSteer:
		r.applySteer(h, i, op, st, before, note)
	case opCancel:
		req := signals.CancelRequest{ViewerID: viewerFor(st, op.variant == 3, op.r1)}
		switch op.variant {
		case 1:
			req.TurnID = st.TurnID
		case 2:
			req.TurnID = st.TurnID + 1
		}
		want := signals.CancelCancelling
		switch {
		case isObserver(st, req.ViewerID):
			want = signals.RejectForbidden
		case st.TurnID == 0 || (req.TurnID != 0 && req.TurnID != st.TurnID):
			want = signals.RejectNoLiveTurn
		case st.State == signals.StateCancelling:
			want = signals.CancelAlreadyCancelling
		}
		note("turn %d viewer %q", req.TurnID, req.ViewerID)
		r.send(h, i, signals.UpdateCancel, req, before, false, func(res any, err error) string {
			got := ""
			if err != nil {
				got = rejectionOf(err)
			} else {
				got = res.(signals.CancelResult).Outcome
			}
			return r.expect(i, "cancel", want, got)
		})
	case opEvents:
		// Variant 0 sends the next batch, 2 repeats one (dropped), 1 is a late batch for the
		// turn that ended last (ignored). With no live turn, 0 and 2 are batches of the agent
		// speaking between turns (turn 0, numbered per host).
		turn, host := st.TurnID, ""
		if turn == 0 {
			host = "host-a"
		}
		if op.variant == 1 {
			turn, host = max(r.lastTurn, 1), ""
		}
		sent := r.batches[turn]
		batch := sent + 1
		if op.variant == 2 && sent > 0 {
			batch = 1 + int64(op.r2)%sent
		}
		n := 1 + int(op.r1%3)
		var evs []json.RawMessage
		for k := range n {
			evs = append(evs, chunk(fmt.Sprintf("t%d b%d e%d", turn, batch, k)))
		}
		what := "late"
		if turn == st.TurnID {
			what = "repeat"
			if batch > sent {
				what = "new"
				r.batches[turn] = batch
				r.agentEvents[turn] += n
			}
		}
		r.cov[fmt.Sprintf("turn_events %s (turn 0: %t)", what, turn == 0)]++
		note("turn %d host %q batch %d (%d events, %s)", turn, host, batch, n, what)
		h.env.SignalWorkflow(signals.SignalTurnEvents, signals.TurnEventsSignal{Host: host, TurnID: turn, Attempt: 1, Batch: batch, Events: evs})
	case opPermRequest:
		turn := st.TurnID
		if turn == 0 {
			turn = r.lastTurn
		}
		id := r.fresh("p")
		kind := []string{"read", "edit", "execute"}[op.r1%3]
		r.cov[fmt.Sprintf("permission_requested live %t", st.TurnID != 0)]++
		note("turn %d %s %s", turn, id, kind)
		h.env.SignalWorkflow(signals.SignalPermissionRequested, permissionSignal(turn, id, kind))
	case opFinish:
		// The agent answered (end_turn or cancelled) or, in variant 1, the turn failed.
		turn := st.TurnID
		if turn == 0 {
			turn = r.lastTurn // a repeated turn_finished: ignored
		}
		sig := signals.TurnFinishedSignal{TurnID: turn, Attempt: 1, Batches: r.batches[turn]}
		if op.variant == 1 {
			sig.Error = "agent crashed"
		} else {
			sig.StopReason = []string{"end_turn", "cancelled"}[op.r1%2]
		}
		r.cov[fmt.Sprintf("turn_finished live %t", st.TurnID != 0)]++
		note("turn %d %q%q batches %d", turn, sig.StopReason, sig.Error, sig.Batches)
		h.env.SignalWorkflow(signals.SignalTurnFinished, sig)
	case opRespond:
		r.applyRespond(h, i, op, st, v, before, note)
	case opAttach:
		req := signals.AttachRequest{
			ViewerID:     fmt.Sprintf("v%d", 1+op.r1%3),
			Role:         []string{signals.RoleController, signals.RoleObserver}[op.r2%2],
			LeaseSeconds: 3 + int(op.r2/2%28),
		}
		note("%s %s %ds", req.ViewerID, req.Role, req.LeaseSeconds)
		r.send(h, i, signals.UpdateAttach, req, before, false, func(_ any, err error) string {
			if err != nil {
				return r.expect(i, "attach", "ok", rejectionOf(err))
			}
			return "ok"
		})
	case opDetach:
		id := fmt.Sprintf("v%d", 1+op.r1%3)
		note("%s", id)
		r.send(h, i, signals.UpdateDetach, signals.DetachRequest{ViewerID: id}, before, false, func(_ any, err error) string {
			if err != nil {
				return r.expect(i, "detach", "ok", rejectionOf(err))
			}
			return "ok"
		})
	case opPolicy:
		level := []string{"allow_all", "ask_for_risky", "ask_always", "sometimes"}[op.r1%4]
		want := level
		if level == "sometimes" {
			want = signals.RejectInvalidRequest
		}
		note("%s", level)
		r.send(h, i, signals.UpdateSetPolicy, signals.SetPolicyRequest{Level: level}, before, false, func(res any, err error) string {
			if err != nil {
				return r.expect(i, "set_policy", want, rejectionOf(err))
			}
			return r.expect(i, "set_policy", want, res.(signals.SetPolicyResult).Level)
		})
	case opContinueAsNew:
		r.cov["continue_as_new suggested"]++
		h.env.SetContinueAsNewSuggested(true)
	case opClose:
		r.send(h, i, signals.UpdateClose, signals.CloseRequest{Reason: "property"}, before, false, func(_ any, err error) string {
			if err != nil {
				return r.expect(i, "close", "ok", rejectionOf(err))
			}
			r.closed = true
			r.closeSeq = r.lastSeq(h)
			return "ok"
		})
	}
}

func (r *propRunner) applyPrompt(h *harness, i int, op propOp, st signals.Status, before []signals.Event, note func(string, ...any)) {
	id := r.fresh("m")
	if op.variant == promptRepeat || (op.variant == promptEmpty && op.r1%2 == 0) {
		if prev, ok := pick(r.promptIDs, op.r1); ok {
			id = prev
		}
	}
	text := "prompt " + id
	if op.variant == promptEmpty {
		text = []string{"", "   "}[op.r2%2]
	}
	req := signals.PromptRequest{Text: text, ClientMessageID: id, ViewerID: viewerFor(st, op.variant == promptAsViewer, op.r2)}
	r.promptIDs = append(r.promptIDs, id)

	prev, dup := r.acked[id]
	want := "new"
	switch {
	case r.closed:
		want = signals.RejectSessionClosed
	case isObserver(st, req.ViewerID):
		want = signals.RejectForbidden
	case strings.TrimSpace(text) == "":
		want = signals.RejectInvalidRequest
	case dup:
		want = "duplicate"
	case len(st.Queue) >= r.limit:
		want = signals.RejectQueueFull
	}
	note("%s %q viewer %q", id, text, req.ViewerID)
	r.send(h, i, signals.UpdatePrompt, req, before, want == "duplicate", func(res any, err error) string {
		if err != nil {
			return r.expect(i, "prompt", want, rejectionOf(err))
		}
		p := res.(signals.PromptResult)
		if !p.Duplicate {
			r.acked[id] = p.TurnID
			if p.TurnID != r.lastTurn+1 {
				r.failf("op #%d: prompt %s got turn %d, want %d", i, id, p.TurnID, r.lastTurn+1)
			}
			r.lastTurn = max(r.lastTurn, p.TurnID)
			return r.expect(i, "prompt", want, "new") + fmt.Sprintf(" turn %d pos %d", p.TurnID, p.Position)
		}
		if p.TurnID != prev {
			r.failf("op #%d: duplicate prompt %s answered turn %d, its original was %d", i, id, p.TurnID, prev)
		}
		return r.expect(i, "prompt", want, "duplicate") + fmt.Sprintf(" turn %d", p.TurnID)
	})
}

func (r *propRunner) applySteer(h *harness, i int, op propOp, st signals.Status, before []signals.Event, note func(string, ...any)) {
	req := signals.SteerRequest{Text: r.fresh("steer "), ExpectedTurnID: st.SteerToken, ViewerID: viewerFor(st, op.variant == steerAsViewer, op.r2)}
	if op.r1%4 != 0 {
		req.ClientMsgID = r.fresh("c")
	}
	switch op.variant {
	case steerStale:
		req.ExpectedTurnID = "0"
		if tok, ok := pick(r.tokens, op.r1); ok && tok != st.SteerToken {
			req.ExpectedTurnID = tok
		}
	case steerRepeatSame, steerRepeatOther:
		if id, ok := pick(r.steerIDs, op.r1); ok {
			req.ClientMsgID = id
			if rec, ok := r.steers[id]; ok && op.variant == steerRepeatSame {
				req.Text = rec.text
			}
		}
	}
	if req.ExpectedTurnID == "" {
		req.ExpectedTurnID = "1" // no live token to copy: this steer can only be refused
	}
	if req.ClientMsgID != "" {
		r.steerIDs = append(r.steerIDs, req.ClientMsgID)
	}
	rec, seen := r.steers[req.ClientMsgID]
	want := signals.SteerAccepted
	switch {
	case isObserver(st, req.ViewerID):
		want = signals.RejectForbidden
	case seen && rec.text == req.Text:
		want = signals.SteerDuplicate
	case seen:
		want = signals.RejectClientMsgIDReuse
	case st.SteerToken == "":
		want = signals.RejectNoLiveTurn
	case req.ExpectedTurnID != st.SteerToken:
		want = signals.RejectStaleTurn
	case !r.steering:
		want = signals.RejectNoSteerChannel
	}
	note("%s token %s (live %q) viewer %q", req.ClientMsgID, req.ExpectedTurnID, st.SteerToken, req.ViewerID)
	r.send(h, i, signals.UpdateSteer, req, before, want == signals.SteerDuplicate, func(res any, err error) string {
		if err != nil {
			return r.expect(i, "steer", want, rejectionOf(err))
		}
		s := res.(signals.SteerResult)
		got := r.expect(i, "steer", want, s.Outcome)
		switch s.Outcome {
		case signals.SteerDuplicate:
			if s.Ref != rec.res.Ref || s.NextExpectedTurnID != rec.res.NextExpectedTurnID {
				r.failf("op #%d: duplicate steer %s answered %+v, its original %+v", i, req.ClientMsgID, s, rec.res)
			}
		case signals.SteerAccepted:
			if s.Ref.TurnID != st.TurnID {
				r.failf("op #%d: steer accepted for turn %d, live turn %d", i, s.Ref.TurnID, st.TurnID)
			}
			if req.ClientMsgID != "" {
				r.steers[req.ClientMsgID] = steerRec{text: req.Text, res: s}
			}
		}
		return got + " next " + s.NextExpectedTurnID
	})
}

func (r *propRunner) applyRespond(h *harness, i int, op propOp, st signals.Status, v journalView, before []signals.Event, note func(string, ...any)) {
	req := signals.PermissionRespondRequest{RequestID: r.fresh("unknown"), ViewerID: viewerFor(st, op.variant == respondAsViewer, op.r2)}
	switch op.variant {
	}
	var done []string
	for id := range v.resolved {
		done = append(done, id)
	}
	slices.Sort(done)
	if p, ok := pick(st.PendingPermissions, op.r1); ok && op.variant != respondUnknown && op.variant != respondAgain {
		req.RequestID = p.RequestID
	} else if id, ok := pick(done, op.r1); ok && op.variant != respondUnknown {
		req.RequestID = id // nothing open: answer one already resolved
	}
	switch op.r2 % 5 {
	case 0, 1:
		req.OptionID = "allow"
	case 2:
		req.OptionID = "allow_always"
	case 3:
		req.OptionID = "reject"
	case 4:
		if op.r1%2 == 0 {
			req.Outcome = signals.OutcomeCancelled
		} else {
			req.OptionID = "nope"
		}
	}
	prev, resolved := v.resolved[req.RequestID]
	open := slices.ContainsFunc(st.PendingPermissions, func(p signals.PendingPermission) bool { return p.RequestID == req.RequestID })
	want := signals.PermissionResolution{RequestID: req.RequestID, DecidedBy: signals.DecidedByUser}
	wantRej := ""
	switch {
	case isObserver(st, req.ViewerID):
		wantRej = signals.RejectForbidden
	case resolved:
		want = prev
	case !open:
		wantRej = signals.RejectUnknownRequest
	case req.Outcome == signals.OutcomeCancelled:
		want.Outcome = signals.OutcomeCancelled
	case req.OptionID == "nope":
		wantRej = signals.RejectInvalidOption
	default:
		want.Outcome, want.OptionID, want.Remember = signals.OutcomeSelected, req.OptionID, req.OptionID == "allow_always"
	}
	note("%s option %q outcome %q viewer %q", req.RequestID, req.OptionID, req.Outcome, req.ViewerID)
	r.send(h, i, signals.UpdatePermissionRespond, req, before, resolved && wantRej == "", func(res any, err error) string {
		if err != nil || wantRej != "" {
			got := "ok"
			if err != nil {
				got = rejectionOf(err)
			}
			return r.expect(i, "permission_respond", wantRej, got)
		}
		got := res.(signals.PermissionRespondResult).Resolution
		r.cov[fmt.Sprintf("permission_respond %s by %s", got.Outcome, got.DecidedBy)]++
		if got != want {
			r.failf("op #%d: permission_respond %s resolved %+v, want %+v", i, req.RequestID, got, want)
		}
		return fmt.Sprintf("%s by %s", got.Outcome, got.DecidedBy)
	})
}

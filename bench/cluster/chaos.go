package main

// chaos: tacp worker processes (the real worker binary and its built-in test agent, in the
// kernel sandbox as the binary runs it by default) on the cluster, and one session
// streaming `/chunks N every D` turns. For history, then matching, then frontend: kill -9 the
// service mid-turn, start it again at once, and time how long the session takes to answer a
// query, to acknowledge a new prompt, and to journal the end of the turn that was streaming
// and of the next one. Then kill -9 the tacp worker that runs the streaming turn: the turn
// moves to the other worker, and a worker is started in its place. At the end the whole
// journal is read back and checked: seq contiguous from 1, exactly one terminal event per
// turn.started, every acknowledged prompt journaled and run to its end, and every streaming
// turn's chunks each journaled once, in order, by the attempt that ended it.
//
// Every wait is bounded and says what it waited for, with the end of the workers' logs; a
// worker whose agent cannot start, or that exits unasked, ends the run at once with its
// reason.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tacp-dev/tacp/internal/proctree"
	"github.com/tacp-dev/tacp/signals"
)

// tacpWorker is the name KillOrder gives the kill of the tacp worker running the turn.
const tacpWorker = "tacp-worker"

// KillOrder is the order in which chaos kills, each round.
var KillOrder = []string{"history", "matching", "frontend", tacpWorker}

// The bounds of a run's waits.
const (
	// promptWithin: a prompt acknowledged, also while the cluster recovers from a kill.
	promptWithin = 3 * time.Minute
	// streamWithin: a turn's first chunk journaled after its prompt was acknowledged.
	streamWithin = 2 * time.Minute
	// recoverWithin: the session answering and a turn's end journaled after a kill, past the
	// turn's own streaming time (the lost worker's heartbeat timeout, a new attempt).
	recoverWithin = 3 * time.Minute
	// idleWithin: the session idle with nothing queued once its turns ended.
	idleWithin = time.Minute
	// hostWithin: the session naming the worker that runs its turn.
	hostWithin = 30 * time.Second
)

// KillResult is what one kill cost the session. Every duration counts from the kill.
type KillResult struct {
	Service  string
	TurnID   int64         // the turn that was streaming when the process died
	Restart  time.Duration // the restarted service's gRPC port open (0: a tacp worker, not restarted)
	Query    time.Duration // the session's status query answered
	Ack      time.Duration // a new prompt acknowledged
	Terminal time.Duration // the streaming turn's terminal event journaled (its `at`)
	Next     time.Duration // the new prompt's turn journaled its terminal event
	Outcome  string        // stop_reason of turn.ended, or "failed: ..." for turn.failed
	Restarts int           // turn.restarted events of the streaming turn
	Chunks   int           // agent_message_chunk events of the streaming turn in the journal
}

// ChaosReport is a chaos run's outcome.
type ChaosReport struct {
	Session string
	Chunks  int
	Kills   []KillResult
	Events  int // journal length at the end
	Turns   int
	Acked   int // prompts acknowledged, each found in the journal
}

// harness is one run against the cluster: its context, which a worker's failure cancels
// with the worker's reason, and its workers.
type harness struct {
	ctx context.Context
	ws  *workers
}

// within runs wait with its context bounded by limit. Its error names what it waited for
// and, past the bound, the end of the workers' logs; a run a worker failed reads as the
// worker's reason.
func (r *harness) within(limit time.Duration, what string, wait func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(r.ctx, limit)
	defer cancel()
	err := wait(ctx)
	switch {
	case err == nil:
		return nil
	case r.ctx.Err() != nil:
		return fmt.Errorf("%s: %w", what, context.Cause(r.ctx))
	case ctx.Err() != nil:
		return fmt.Errorf("%s: not within %s (%v)%s", what, limit, err, r.ws.tails())
	}
	return fmt.Errorf("%s: %w%s", what, err, r.ws.tails())
}

// prepare builds what a run needs: tacp's worker into the state directory (its built-in
// test agent is the chaos agent) and, for the services' restarts, the server binary still
// in the build cache. It returns the directory of the worker binary.
func prepare(ctx context.Context, st *State) (string, error) {
	logf("building tacp's worker")
	if err := st.build(ctx); err != nil {
		return "", err
	}
	bin := filepath.Join(st.Dir, "bin")
	if err := run(st.goCmd(ctx, "build", "-o", bin+string(os.PathSeparator), "./worker")); err != nil {
		return "", err
	}
	return bin, nil
}

// chaos builds tacp's worker, runs the kills against the cluster in st and prints the
// table.
func chaos(ctx context.Context, st *State, o options) (*ChaosReport, error) {
	bin, err := prepare(ctx, st)
	if err != nil {
		return nil, err
	}
	return runChaos(ctx, st, o, bin)
}

// workerEnv is the environment of a tacp worker on the cluster: the cluster's address, and
// the keys of its checkpoint store.
func (st *State) workerEnv() []string {
	env := []string{"TEMPORAL_ADDRESS=" + st.Frontend(), "TEMPORAL_NAMESPACE=" + namespace}
	if st.S3 != nil {
		env = append(env, st.S3.Env()...)
	}
	return env
}

// workerFlags are the flags every tacp worker of a run takes: queue, a data dir the run's
// workers share, logs at info (its "worker polling" line), versioned as in production
// (deployment "tacp", the binary's build id), its build made current also over an earlier
// run's build, and the cluster's checkpoint store.
func (st *State) workerFlags(queue, data string) []string {
	args := []string{"-task-queue", queue, "-data-dir", data, "-log.level", "info", "-deployment.current"}
	if store := st.checkpointStore(); store != "" {
		args = append(args, "-checkpoint.store", store)
	}
	return args
}

// runChaos runs the kills with the worker binary in bin.
func runChaos(ctx context.Context, st *State, o options, bin string) (rep *ChaosReport, err error) {
	if alive := st.alive(); len(alive) != len(Services) {
		return nil, fmt.Errorf("cluster in %s is not fully up (running: %v); `down` and `up` again", st.Dir, alive)
	}
	// A run cut short between a kill and the restart leaves a service dead: it is started
	// again, unless the run was interrupted (then the caller stops the whole cluster).
	defer func() {
		if ctx.Err() == nil {
			st.restartDead(ctx)
		}
	}()
	rctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	queue := "tacp-chaos-" + signals.NewID()[:8]
	args := st.workerFlags(queue, filepath.Join(st.Dir, "chaos", "data"))
	if o.agent != "" {
		args = append(args, "-agent", o.agent)
	}
	if o.noProbe {
		args = append(args, "-agent.probe=false")
	}
	r := &harness{ctx: rctx, ws: newWorkers(st, tacpWorker, filepath.Join(bin, "worker"), args, st.workerEnv(), fail)}
	defer r.ws.stop()
	for range 2 {
		if _, err := r.ws.start(rctx); err != nil {
			return nil, err
		}
	}

	c, err := retryDial(rctx, func() (client.Client, error) {
		return client.Dial(client.Options{HostPort: st.Frontend(), Namespace: namespace, Logger: quietLogger()})
	})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s := newSession(c, queue, "chaos-"+signals.NewID()[:12])
	rep = &ChaosReport{Session: s.cfg.SessionID, Chunks: o.chunks}
	stream := fmt.Sprintf("/chunks %d every %s", o.chunks, o.every)
	const short = "/chunks 20 every 10ms"
	logf("session %s on task queue %s, %d tacp workers; streaming turns: %q", s.cfg.SessionID, queue, len(r.ws.live()), stream)

	// A first turn starts the session and its agent, so every kill finds a warm session.
	var first signals.PromptResult
	if err := r.within(promptWithin, fmt.Sprintf("the first prompt (%q) acknowledged", short), func(ctx context.Context) (err error) {
		first, err = s.prompt(ctx, short)
		return err
	}); err != nil {
		return rep, err
	}
	if err := r.within(recoverWithin, fmt.Sprintf("the first turn (%d) ended", first.TurnID), func(ctx context.Context) error {
		_, err := s.endedOf(ctx, first.TurnID)
		return err
	}); err != nil {
		return rep, err
	}

	for i := range o.rounds * len(KillOrder) {
		what := KillOrder[i%len(KillOrder)]
		k, err := killMidTurn(r, st, s, what, stream, short, o)
		if err != nil {
			return rep, fmt.Errorf("kill %s: %w", what, err)
		}
		rep.Kills = append(rep.Kills, k)
		logf("%s: query after %s, prompt acknowledged after %s, streaming turn %d ended %s after the kill (%s, %d restarts)",
			what, round(k.Query), round(k.Ack), k.TurnID, round(k.Terminal), k.Outcome, k.Restarts)
		if err := r.within(idleWithin, "the session idle with nothing queued", func(ctx context.Context) error {
			_, err := s.status(ctx, idle)
			return err
		}); err != nil {
			return rep, err
		}
	}

	// Every event was read in order as it came (a retention gap fails the read). Read the
	// journal again through a fresh view: what it still retains must be what was seen.
	if err := r.within(time.Minute, "the journal read to its end", s.refresh); err != nil {
		return rep, err
	}
	if err := r.within(time.Minute, "the journal read again", s.reread); err != nil {
		return rep, err
	}
	for i := range rep.Kills {
		rep.Kills[i].Chunks, rep.Kills[i].Restarts = s.countTurn(rep.Kills[i].TurnID)
	}
	printChaos(rep, stream)
	if err := s.check(rep); err != nil {
		return rep, err
	}
	fmt.Printf("journal: %d events, seq contiguous from 1; %d turns, each with exactly one terminal event; %d acknowledged prompts, all journaled and run; every chunk of every streaming turn journaled once, in order: OK\n",
		rep.Events, rep.Turns, rep.Acked)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := s.sc.Close(cctx, s.cfg.SessionID, signals.CloseRequest{Reason: "chaos done"}); err != nil {
		logf("close %s: %v", s.cfg.SessionID, err)
	}
	return rep, nil
}

// killMidTurn starts a streaming turn, kills what (a service, or the tacp worker running the
// turn) once the turn streams, starts a service again at once (a worker once the turn has
// moved), and measures the session's recovery.
func killMidTurn(r *harness, st *State, s *session, what, stream, short string, o options) (KillResult, error) {
	k := KillResult{Service: what}
	var res signals.PromptResult
	if err := r.within(promptWithin, fmt.Sprintf("the prompt %q acknowledged", stream), func(ctx context.Context) (err error) {
		res, err = s.prompt(ctx, stream)
		return err
	}); err != nil {
		return k, err
	}
	k.TurnID = res.TurnID
	if err := r.within(streamWithin, fmt.Sprintf("turn %d streaming", k.TurnID), func(ctx context.Context) error {
		return s.streaming(ctx, k.TurnID)
	}); err != nil {
		return k, err
	}
	if err := sleepCtx(r.ctx, o.killAfter); err != nil {
		return k, context.Cause(r.ctx)
	}

	var victim *workerProc
	var orphans []proc
	if what == tacpWorker {
		// The worker whose attempt streams the turn: the session names its host queue.
		if err := r.within(hostWithin, fmt.Sprintf("the session naming the tacp worker that runs turn %d", k.TurnID), func(ctx context.Context) error {
			_, err := s.status(ctx, func(ss signals.Status) bool {
				victim = r.ws.byHost(ss.AgentHost)
				return ss.TurnID == k.TurnID && victim != nil
			})
			return err
		}); err != nil {
			return k, err
		}
		orphans = procsOf(proctree.Descendants(victim.pid))
		logf("kill -9 tacp worker %s (pid %d) mid-turn %d", victim.name, victim.pid, k.TurnID)
	} else {
		logf("kill -9 %s (pid %d) mid-turn %d", what, st.PIDs[what], k.TurnID)
	}
	kill := time.Now()
	if victim != nil {
		if err := victim.kill9(r.ctx); err != nil {
			return k, err
		}
	} else {
		if err := st.kill9(r.ctx, what); err != nil {
			return k, err
		}
		if err := st.restart(r.ctx, what); err != nil {
			return k, err
		}
		k.Restart = time.Since(kill)
	}

	// The query and the new prompt race from the moment of the kill.
	var (
		wg         sync.WaitGroup
		qerr, perr error
		next       signals.PromptResult
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		qerr = r.within(recoverWithin, fmt.Sprintf("the session's status after the kill of %s", what), func(ctx context.Context) error {
			_, err := s.status(ctx, func(signals.Status) bool { return true })
			return err
		})
		k.Query = time.Since(kill)
	}()
	go func() {
		defer wg.Done()
		perr = r.within(recoverWithin, fmt.Sprintf("a prompt acknowledged after the kill of %s", what), func(ctx context.Context) (err error) {
			next, err = s.prompt(ctx, short)
			return err
		})
		k.Ack = time.Since(kill)
	}()
	wg.Wait()
	if err := errors.Join(qerr, perr); err != nil {
		return k, err
	}

	turnWithin := recoverWithin + time.Duration(o.chunks)*o.every
	var term, nextTerm signals.Event
	if err := r.within(turnWithin, fmt.Sprintf("the end of turn %d, streaming when %s was killed", k.TurnID, what), func(ctx context.Context) (err error) {
		term, err = s.terminalOf(ctx, k.TurnID)
		return err
	}); err != nil {
		return k, err
	}
	k.Terminal = term.At.Sub(kill)
	k.Outcome = outcome(term)
	if err := r.within(turnWithin, fmt.Sprintf("the end of turn %d, prompted after the kill of %s", next.TurnID, what), func(ctx context.Context) (err error) {
		nextTerm, err = s.terminalOf(ctx, next.TurnID)
		return err
	}); err != nil {
		return k, err
	}
	k.Next = nextTerm.At.Sub(kill)
	k.Chunks, k.Restarts = s.countTurn(k.TurnID)
	if victim == nil {
		return k, nil
	}

	// The turn moved: a newer attempt took over on a worker still running.
	if k.Restarts == 0 {
		return k, fmt.Errorf("turn %d ended (%s) without a turn.restarted after its worker %s was killed%s", k.TurnID, k.Outcome, victim.name, r.ws.tails())
	}
	if err := r.within(hostWithin, fmt.Sprintf("the session naming a live tacp worker as its agent's host after turn %d", k.TurnID), func(ctx context.Context) error {
		_, err := s.status(ctx, func(ss signals.Status) bool { return r.ws.byHost(ss.AgentHost) != nil })
		return err
	}); err != nil {
		return k, err
	}
	// The killed worker's agent dies with it (its reaper), whatever the harness does.
	if err := r.within(30*time.Second, fmt.Sprintf("the agent processes of the killed tacp worker %s gone", victim.name), func(ctx context.Context) error {
		for {
			var left []int
			for _, p := range orphans {
				if p.running() {
					left = append(left, p.pid)
				}
			}
			if len(left) == 0 {
				return nil
			}
			if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
				return fmt.Errorf("still running: %v", left)
			}
		}
	}); err != nil {
		killAll(orphans)
		return k, err
	}
	w, err := r.ws.start(r.ctx)
	if err != nil {
		return k, err
	}
	logf("started tacp worker %s in place of %s", w.name, victim.name)
	return k, nil
}

func outcome(ev signals.Event) string {
	var d struct {
		StopReason string `json:"stop_reason"`
		Error      string `json:"error"`
		Orphaned   bool   `json:"orphaned"`
	}
	_ = json.Unmarshal(ev.Data, &d)
	if ev.Kind == signals.EventTurnEnded {
		return d.StopReason
	}
	if d.Orphaned {
		return "failed (orphaned): " + d.Error
	}
	return "failed: " + d.Error
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

func secs(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }

func printChaos(rep *ChaosReport, stream string) {
	fmt.Printf("\nChaos on the cluster: kill -9 one process mid-turn; a service starts again at once, a tacp worker's turn moves to the other worker (session %s, turns %q)\n", rep.Session, stream)
	fmt.Println("seconds from the kill until ...")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "killed\tservice port open\tstatus query answered\tnew prompt acknowledged\tstreaming turn's end journaled\tnew prompt's turn ended\tstreaming turn: outcome\tchunks journaled\trestarts")
	for _, r := range rep.Kills {
		restart := secs(r.Restart)
		if r.Service == tacpWorker {
			restart = "–"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%d\n", r.Service, restart, secs(r.Query), secs(r.Ack),
			secs(r.Terminal), secs(r.Next), r.Outcome, r.Chunks, rep.Chunks, r.Restarts)
	}
	_ = tw.Flush()
	fmt.Println()
}

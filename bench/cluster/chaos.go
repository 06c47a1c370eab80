package main

// chaos: a tacp worker process (the real worker binary, the real testagent) on the cluster
// and one session streaming `/chunks N every D` turns. For history, then matching, then
// frontend: kill -9 the service mid-turn, start it again at once, and time how long the
// session takes to answer a query, to acknowledge a new prompt, and to journal the end of
// the turn that was streaming and of the next one. At the end the whole journal is read
// back and checked: seq contiguous from 1, exactly one terminal event per turn.started,
// and every acknowledged prompt journaled and run to its end.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tacp-dev/tacp/signals"
)

// KillOrder is the order in which chaos kills the services.
var KillOrder = []string{"history", "matching", "frontend"}

// KillResult is what one kill cost the session. Every duration counts from the kill.
type KillResult struct {
	Service  string
	TurnID   int64         // the turn that was streaming when the service died
	Restart  time.Duration // the restarted service's gRPC port open
	Query    time.Duration // the session's status query answered
	Ack      time.Duration // a new prompt acknowledged
	Terminal time.Duration // the streaming turn's terminal event journaled (its `at`)
	Next     time.Duration // the new prompt's turn journaled its terminal event
	Outcome  string        // stop_reason of turn.ended, or "failed: ..." for turn.failed
	Restarts int           // turn.restarted events of the streaming turn
	Chunks   int           // agent.update events of the streaming turn in the journal
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

// session is the chaos session and what its client has seen and been told.
type session struct {
	sc  *signals.Client
	cfg signals.SessionConfig

	mu    sync.Mutex
	acked map[string]int64 // client_message_id → turn_id of every acknowledged prompt
	evs   []signals.Event  // the journal so far, read in order
}

// prompt sends text until it is acknowledged, with the same client_message_id each time so
// a prompt accepted behind a lost answer is not queued twice.
func (s *session) prompt(ctx context.Context, text string) (signals.PromptResult, error) {
	cmid := signals.NewID()
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := s.sc.Prompt(actx, s.cfg, signals.PromptRequest{Text: text, ClientMessageID: cmid})
		cancel()
		if err == nil {
			s.mu.Lock()
			s.acked[cmid] = res.TurnID
			s.mu.Unlock()
			return res, nil
		}
		if rej, ok := signals.AsRejection(err); ok {
			return res, fmt.Errorf("prompt %q rejected: %v", text, rej)
		}
		if serr := sleepCtx(ctx, 100*time.Millisecond); serr != nil {
			return res, fmt.Errorf("prompt %q: %w (last error: %v)", text, serr, err)
		}
	}
}

// refresh reads the journal past what was seen. A gap (events retention dropped before we
// read them) is an error: the check needs every event.
func (s *session) refresh(ctx context.Context) error {
	for {
		s.mu.Lock()
		after := int64(len(s.evs))
		s.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		res, err := s.sc.Events(rctx, s.cfg.SessionID, after, 500)
		cancel()
		if err != nil {
			return err
		}
		if res.Gap {
			return fmt.Errorf("journal gap after seq %d (first retained %d)", after, res.FirstRetainedSeq)
		}
		if len(res.Events) == 0 {
			return nil
		}
		s.mu.Lock()
		s.evs = append(s.evs, res.Events...)
		s.mu.Unlock()
		if res.Events[len(res.Events)-1].Seq >= res.LastSeq {
			return nil
		}
	}
}

// waitEvent polls the journal until match finds an event, tolerating a cluster that is
// not answering yet.
func (s *session) waitEvent(ctx context.Context, what string, match func(signals.Event) bool) (signals.Event, error) {
	var last error
	seen := 0
	for {
		if err := s.refresh(ctx); err != nil {
			last = err
			if strings.Contains(err.Error(), "journal gap") {
				return signals.Event{}, err
			}
		}
		s.mu.Lock()
		evs := s.evs[seen:]
		seen = len(s.evs)
		s.mu.Unlock()
		for _, ev := range evs {
			if match(ev) {
				return ev, nil
			}
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return signals.Event{}, fmt.Errorf("waiting for %s: %w (last error: %v)", what, err, last)
		}
	}
}

func (s *session) terminalOf(ctx context.Context, turn int64) (signals.Event, error) {
	return s.waitEvent(ctx, fmt.Sprintf("the end of turn %d", turn), func(ev signals.Event) bool {
		return ev.TurnID == turn && signals.IsTerminal(ev.Kind)
	})
}

// waitIdle waits until the session is idle with nothing queued.
func (s *session) waitIdle(ctx context.Context) error {
	var last error
	for {
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		st, err := s.sc.Status(qctx, s.cfg.SessionID)
		cancel()
		if err == nil && st.State == signals.StateIdle && len(st.Queue) == 0 {
			return nil
		}
		if err != nil {
			last = err
		}
		if serr := sleepCtx(ctx, 100*time.Millisecond); serr != nil {
			return fmt.Errorf("waiting for the session to go idle: %w (last: state %q, error %v)", serr, st.State, last)
		}
	}
}

// chaos runs the kills against the cluster in st and prints the table.
func chaos(ctx context.Context, st *State, o options) (*ChaosReport, error) {
	if alive := st.alive(); len(alive) != len(Services) {
		return nil, fmt.Errorf("cluster in %s is not fully up (running: %v); `down` and `up` again", st.Dir, alive)
	}
	logf("building tacp's worker and testagent")
	// The services are restarted from the build cache: make sure the binary is still there.
	if err := st.build(ctx); err != nil {
		return nil, err
	}
	bin := filepath.Join(st.Dir, "bin")
	if err := run(st.goCmd(ctx, "build", "-o", bin+string(os.PathSeparator), "./worker", "./testagent")); err != nil {
		return nil, err
	}
	defer st.restartDead()
	queue := "tacp-chaos-" + signals.NewID()[:8]
	stopWorker, err := startTacpWorker(st, bin, queue)
	if err != nil {
		return nil, err
	}
	defer stopWorker()

	c, err := retryDial(ctx, func() (client.Client, error) {
		return client.Dial(client.Options{HostPort: st.Frontend(), Namespace: namespace, Logger: quietLogger()})
	})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s := &session{
		sc:    signals.NewClient(c, queue),
		cfg:   signals.SessionConfig{SessionID: "chaos-" + signals.NewID()[:12]},
		acked: map[string]int64{},
	}
	rep := &ChaosReport{Session: s.cfg.SessionID, Chunks: o.chunks}
	stream := fmt.Sprintf("/chunks %d every %s", o.chunks, o.every)
	const short = "/chunks 20 every 10ms"
	logf("session %s on task queue %s; streaming turns: %q", s.cfg.SessionID, queue, stream)

	// A first turn starts the session and its agent, so every kill finds a warm session.
	first, err := s.prompt(ctx, short)
	if err != nil {
		return rep, err
	}
	if _, err := s.terminalOf(ctx, first.TurnID); err != nil {
		return rep, err
	}

	for i := range o.rounds * len(KillOrder) {
		svc := KillOrder[i%len(KillOrder)]
		r, err := killMidTurn(ctx, st, s, svc, stream, short, o.killAfter)
		if err != nil {
			return rep, fmt.Errorf("kill %s: %w", svc, err)
		}
		rep.Kills = append(rep.Kills, r)
		logf("%s: query after %s, prompt acknowledged after %s, streaming turn %d ended %s after the kill (%s)",
			svc, round(r.Query), round(r.Ack), r.TurnID, round(r.Terminal), r.Outcome)
		if err := s.waitIdle(ctx); err != nil {
			return rep, err
		}
	}

	// Every event was read in order as it came (a retention gap fails the read). Read the
	// journal again through a fresh view: what it still retains must be what was seen.
	if err := s.refresh(ctx); err != nil {
		return rep, err
	}
	if err := s.reread(ctx); err != nil {
		return rep, err
	}
	for i := range rep.Kills {
		rep.Kills[i].Chunks, rep.Kills[i].Restarts = s.countTurn(rep.Kills[i].TurnID)
	}
	printChaos(rep, stream)
	if err := s.check(rep); err != nil {
		return rep, err
	}
	fmt.Printf("journal: %d events, seq contiguous from 1; %d turns, each with exactly one terminal event; %d acknowledged prompts, all journaled and run: OK\n",
		rep.Events, rep.Turns, rep.Acked)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := s.sc.Close(cctx, s.cfg.SessionID, signals.CloseRequest{Reason: "chaos done"}); err != nil {
		logf("close %s: %v", s.cfg.SessionID, err)
	}
	return rep, nil
}

// killMidTurn starts a streaming turn, kills svc once it streams, starts svc again and
// measures the session's recovery.
func killMidTurn(ctx context.Context, st *State, s *session, svc, stream, short string, after time.Duration) (KillResult, error) {
	r := KillResult{Service: svc}
	res, err := s.prompt(ctx, stream)
	if err != nil {
		return r, err
	}
	r.TurnID = res.TurnID
	if _, err := s.waitEvent(ctx, fmt.Sprintf("turn %d streaming", r.TurnID), func(ev signals.Event) bool {
		return ev.TurnID == r.TurnID && ev.Kind == signals.EventAgentUpdate
	}); err != nil {
		return r, err
	}
	if err := sleepCtx(ctx, after); err != nil {
		return r, err
	}

	kill := time.Now()
	if err := st.kill9(ctx, svc); err != nil {
		return r, err
	}
	if _, err := st.startService(svc); err != nil {
		return r, err
	}
	if err := st.waitPort(ctx, svc, 2*time.Minute); err != nil {
		return r, err
	}
	r.Restart = time.Since(kill)

	// The query and the new prompt race from the moment of the kill.
	var (
		wg          sync.WaitGroup
		qerr, perr  error
		next        signals.PromptResult
		recoveryCtx context.Context
	)
	recoveryCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			qctx, qcancel := context.WithTimeout(recoveryCtx, 2*time.Second)
			_, err := s.sc.Status(qctx, s.cfg.SessionID)
			qcancel()
			if err == nil {
				r.Query = time.Since(kill)
				return
			}
			if serr := sleepCtx(recoveryCtx, 50*time.Millisecond); serr != nil {
				qerr = fmt.Errorf("status query: %w (last error: %v)", serr, err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		next, perr = s.prompt(recoveryCtx, short)
		r.Ack = time.Since(kill)
	}()
	wg.Wait()
	if err := errors.Join(qerr, perr); err != nil {
		return r, err
	}

	term, err := s.terminalOf(recoveryCtx, r.TurnID)
	if err != nil {
		return r, err
	}
	r.Terminal = term.At.Sub(kill)
	r.Outcome = outcome(term)
	nextTerm, err := s.terminalOf(recoveryCtx, next.TurnID)
	if err != nil {
		return r, err
	}
	r.Next = nextTerm.At.Sub(kill)
	return r, nil
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

// reread reads the retained journal again from its first retained event and compares it
// with the events read as they came.
func (s *session) reread(ctx context.Context) error {
	fresh := &session{sc: s.sc, cfg: s.cfg}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := s.sc.Events(rctx, s.cfg.SessionID, 0, 1)
	if err != nil {
		return err
	}
	first := max(res.FirstRetainedSeq, 1)
	fresh.evs = make([]signals.Event, first-1) // placeholders for what retention dropped
	if err := fresh.refresh(rctx); err != nil {
		return err
	}
	if len(fresh.evs) != len(s.evs) {
		return fmt.Errorf("journal read again has %d events, %d were read as they came", len(fresh.evs), len(s.evs))
	}
	for i := int(first - 1); i < len(s.evs); i++ {
		a, b := fresh.evs[i], s.evs[i]
		if a.Seq != b.Seq || a.Kind != b.Kind || a.TurnID != b.TurnID || string(a.Data) != string(b.Data) {
			return fmt.Errorf("journal read again differs at seq %d: %s/%d, was %s/%d", b.Seq, a.Kind, a.TurnID, b.Kind, b.TurnID)
		}
	}
	return nil
}

// countTurn counts the agent updates and restarts journaled for turn.
func (s *session) countTurn(turn int64) (chunks, restarts int) {
	for _, ev := range s.evs {
		if ev.TurnID != turn {
			continue
		}
		switch ev.Kind {
		case signals.EventAgentUpdate:
			chunks++
		case signals.EventTurnRestarted:
			restarts++
		}
	}
	return chunks, restarts
}

// check verifies the journal invariants of contract §5 (as e2e's checkInvariants does) and
// that every acknowledged prompt is journaled, started and ended.
func (s *session) check(rep *ChaosReport) error {
	started := map[int64]int{}
	terminal := map[int64]int{}
	accepted := map[string]int64{}
	for i, ev := range s.evs {
		if ev.Seq != int64(i+1) {
			return fmt.Errorf("journal seq not contiguous from 1: event %d has seq %d", i, ev.Seq)
		}
		switch {
		case ev.Kind == signals.EventTurnStarted:
			started[ev.TurnID]++
		case signals.IsTerminal(ev.Kind):
			if started[ev.TurnID] != 1 {
				return fmt.Errorf("seq %d: %s of turn %d without exactly one turn.started before it", ev.Seq, ev.Kind, ev.TurnID)
			}
			terminal[ev.TurnID]++
		case ev.Kind == signals.EventPromptAccepted:
			var d struct {
				ClientMessageID string `json:"client_message_id"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return fmt.Errorf("seq %d: prompt.accepted data: %w", ev.Seq, err)
			}
			accepted[d.ClientMessageID] = ev.TurnID
		}
	}
	for turn, n := range started {
		if n != 1 || terminal[turn] != 1 {
			return fmt.Errorf("turn %d: %d turn.started and %d terminal events, want exactly 1 each", turn, n, terminal[turn])
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for cmid, turn := range s.acked {
		got, ok := accepted[cmid]
		switch {
		case !ok:
			return fmt.Errorf("acknowledged prompt %s (turn %d) is not in the journal", cmid, turn)
		case got != turn:
			return fmt.Errorf("acknowledged prompt %s: journaled as turn %d, acknowledged as turn %d", cmid, got, turn)
		case started[turn] != 1:
			return fmt.Errorf("acknowledged prompt %s: turn %d never started", cmid, turn)
		}
	}
	rep.Events, rep.Turns, rep.Acked = len(s.evs), len(started), len(s.acked)
	return nil
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

func secs(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }

func printChaos(rep *ChaosReport, stream string) {
	fmt.Printf("\nChaos on the cluster: kill -9 one service mid-turn, start it again at once (session %s, turns %q)\n", rep.Session, stream)
	fmt.Println("seconds from the kill until ...")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "killed\tservice port open\tstatus query answered\tnew prompt acknowledged\tstreaming turn's end journaled\tnew prompt's turn ended\tstreaming turn: outcome\tchunks journaled\trestarts")
	for _, r := range rep.Kills {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%d\n", r.Service, secs(r.Restart), secs(r.Query), secs(r.Ack),
			secs(r.Terminal), secs(r.Next), r.Outcome, r.Chunks, rep.Chunks, r.Restarts)
	}
	_ = tw.Flush()
	fmt.Println()
}

// startTacpWorker starts tacp's worker binary against the cluster, with TEMPORAL_ADDRESS
// naming the frontend and the testagent as its agent, and returns the function that stops
// it and its agents (its process group).
func startTacpWorker(st *State, bin, queue string) (stop func(), err error) {
	dir := filepath.Join(st.Dir, "chaos")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(filepath.Join(st.logDir(), "tacp-worker.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	agent := strconv.Quote(filepath.Join(bin, "testagent")) + " -transcripts " + strconv.Quote(filepath.Join(dir, "transcripts"))
	cmd := exec.Command(filepath.Join(bin, "worker"), "-agent", agent, "-task-queue", queue,
		"-data-dir", filepath.Join(dir, "data"), "-log.level", "warn",
		// Versioned as in production (deployment "tacp", the binary's build id); the one
		// worker of the cluster makes its build current, also over an earlier run's build.
		"-deployment.current")
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+st.Frontend(), "TEMPORAL_NAMESPACE="+namespace)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start tacp worker: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	pid := cmd.Process.Pid
	st.PIDs["tacp-worker"] = pid
	_ = st.save()
	return func() {
		_ = syscall.Kill(-pid, syscall.SIGTERM) // the worker and the agents it started
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-done
		}
		_ = logFile.Close()
		delete(st.PIDs, "tacp-worker")
		_ = st.save()
	}, nil
}

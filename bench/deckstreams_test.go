package bench

// The deck's live view under many readers: the events queries a streaming session is asked
// while 1, 50 and 500 SSE streams of one deck (`starter web`, its own process) follow it,
// counted by the worker that answers them, and the status round trip of another session
// through the same deck meanwhile. The streams of a session share one poller, so the
// queries a second stay flat as the streams grow.
//
//	TACP_BENCH=1 go test ./bench -run TestDeckStreamsTable -v
//
// TACP_BENCH_DECK_CHUNKS (default 200) sets the chunks of the streaming turn, at 20/s.
// TACP_BENCH_STARTER runs another starter binary as the deck (an older build, for a
// before/after in one session). The streams are spread over observer tokens, 50 each, under
// the default cap of streams per token.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// streamsPerToken is how many of the bench's streams one observer token opens.
const streamsPerToken = 50

// streamDeck is `starter web` with a controller token and observer tokens for the streams.
type streamDeck struct {
	cmd        *exec.Cmd
	base       string // http://host:port
	controller string
	observers  []string
	client     *http.Client
}

func startStreamDeck(t testing.TB, observers int) *streamDeck {
	t.Helper()
	d := &streamDeck{controller: "bench-controller-" + signals.NewID()}
	for range observers {
		d.observers = append(d.observers, "bench-observer-"+signals.NewID())
	}
	var addr string
	d.cmd, addr = serveDeck(t, "--token", d.controller, "--observer-token", strings.Join(d.observers, ","))
	d.base = "http://" + addr
	d.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000, DisableCompression: true}}
	return d
}

func (d *streamDeck) stop() {
	d.client.CloseIdleConnections()
	_ = d.cmd.Process.Signal(os.Interrupt)
	_ = d.cmd.Wait()
}

// benchStream is one open SSE stream, read in the background.
type benchStream struct {
	last atomic.Int64 // the seq of the last journal event read
	// ended is the seq of the last terminal event of a turn read, its turn endedTurn.
	ended, endedTurn atomic.Int64
	done             chan struct{}
}

// open opens session id's stream from its start with token.
func (d *streamDeck) open(ctx context.Context, id, token string) (*benchStream, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", d.base+"/api/sessions/"+id+"/stream?after=0", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := d.client.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		return nil, fmt.Errorf("stream of %s: %d %s", id, res.StatusCode, b)
	}
	s := &benchStream{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer res.Body.Close()
		rd := bufio.NewReader(res.Body)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				if seq, err := strconv.ParseInt(v, 10, 64); err == nil {
					s.last.Store(seq)
				}
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				var ev signals.Event
				if json.Unmarshal([]byte(v), &ev) == nil && signals.IsTerminal(ev.Kind) {
					s.endedTurn.Store(ev.TurnID)
					s.ended.Store(ev.Seq)
				}
			}
		}
	}()
	return s, nil
}

// status times one status call of session id through the deck.
func (d *streamDeck) status(ctx context.Context, id string) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", d.base+"/api/sessions/"+id, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+d.controller)
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status of %s: %d", id, res.StatusCode)
	}
	return time.Since(start), nil
}

// turnEnded waits until the journal of session id holds the terminal event of turn and
// returns its seq (through events queries: not while they are counted).
func turnEnded(ctx context.Context, id string, turn int64) (int64, error) {
	var end int64
	err := env.sc.Watch(ctx, id, 0, func(ev signals.Event) bool {
		if ev.TurnID == turn && signals.IsTerminal(ev.Kind) {
			end = ev.Seq
			return false
		}
		return true
	})
	return end, err
}

type deckStreamsRow struct {
	streams                  int
	openQueries, turnQueries int64
	turn                     time.Duration
	events                   int64
	status                   []time.Duration
}

// TestDeckStreamsTable prints the events queries a streaming session is asked with 1, 50 and
// 500 streams of one deck on it, and another session's status through that deck meanwhile.
func TestDeckStreamsTable(t *testing.T) {
	if os.Getenv("TACP_BENCH") != "1" {
		t.Skip("set TACP_BENCH=1 to measure the deck's streams")
	}
	chunks := envInt(t, "TACP_BENCH_DECK_CHUNKS", 200)
	counts := []int{1, 50, 500}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	d := startStreamDeck(t, counts[len(counts)-1]/streamsPerToken)
	t.Cleanup(d.stop)

	other := "bench-deck-other-" + signals.NewID()
	env.sessions = append(env.sessions, other)
	if _, err := env.sc.Prompt(ctx, signals.SessionConfig{SessionID: other}, signals.PromptRequest{Text: zeroWork}); err != nil {
		t.Fatal(err)
	}
	if _, err := turnEnded(ctx, other, 1); err != nil {
		t.Fatal(err)
	}

	var rows []deckStreamsRow
	for _, n := range counts {
		id := "bench-deck-" + signals.NewID()
		env.sessions = append(env.sessions, id)
		if _, err := env.sc.Prompt(ctx, signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: zeroWork}); err != nil {
			t.Fatal(err)
		}
		seq0, err := turnEnded(ctx, id, 1)
		if err != nil {
			t.Fatal(err)
		}
		row := deckStreamsRow{streams: n}
		sctx, closeStreams := context.WithCancel(ctx)
		q0 := env.queries.count(signals.QueryEvents, id)
		streams := make([]*benchStream, n)
		var wg sync.WaitGroup
		var openErr atomic.Value
		for i := range streams {
			wg.Go(func() {
				s, err := d.open(sctx, id, d.observers[i/streamsPerToken])
				if err != nil {
					openErr.CompareAndSwap(nil, err)
					return
				}
				streams[i] = s
			})
		}
		wg.Wait()
		if err, _ := openErr.Load().(error); err != nil {
			t.Fatal(err)
		}
		row.openQueries = env.queries.count(signals.QueryEvents, id) - q0

		q1 := env.queries.count(signals.QueryEvents, id)
		start := time.Now()
		if _, err := env.sc.Prompt(ctx, signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: fmt.Sprintf("/chunks %d every 50ms", chunks)}); err != nil {
			t.Fatal(err)
		}
		statusDone := make(chan struct{})
		var statusErr error
		go func() {
			defer close(statusDone)
			for sctx.Err() == nil {
				lat, err := d.status(sctx, other)
				if err != nil {
					if sctx.Err() == nil {
						statusErr = err
					}
					return
				}
				row.status = append(row.status, lat)
				select {
				case <-sctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
		// The turn's end, as the streams see it: the bench asks no events query meanwhile.
		for streams[0].endedTurn.Load() != 2 {
			select {
			case <-streams[0].done:
				t.Fatal("the first stream ended before the turn did")
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
		last := streams[0].ended.Load()
		for _, s := range streams {
			for s.last.Load() < last {
				select {
				case <-s.done:
					t.Fatalf("a stream ended at %d of %d", s.last.Load(), last)
				case <-ctx.Done():
					t.Fatal(ctx.Err())
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
		row.turn = time.Since(start)
		row.turnQueries = env.queries.count(signals.QueryEvents, id) - q1
		row.events = last - seq0
		closeStreams()
		<-statusDone
		if statusErr != nil {
			t.Fatal(statusErr)
		}
		rows = append(rows, row)
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "deck streams on one session (%d-chunk turn at 20/s)\tqueries to open\tqueries in the turn\tturn s\tqueries/s\tqueries per event\tother session's status p50 ms\tp99 ms\n", chunks)
	for _, r := range rows {
		s := statsOf(r.status)
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.1f\t%.1f\t%.2f\t%.1f\t%.1f\n", r.streams, r.openQueries, r.turnQueries, r.turn.Seconds(),
			float64(r.turnQueries)/r.turn.Seconds(), float64(r.turnQueries)/float64(r.events), s.p50, s.p99)
	}
	_ = tw.Flush()
}

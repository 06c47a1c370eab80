package session

// The data-driven scenarios of testdata/scenarios, in the manner of etcd-io/raft's
// testdata: each file drives one session core through inputs and says what it must journal
// and do. A file is a sequence of blocks separated by blank lines; a block is one input
// line, a "----" line, and the expected output. Lines starting with # are comments (each
// file cites the contract section it proves). go test -run TestScenarios -rewrite writes the
// outputs the core produces (review the diff).
//
// Inputs:
//
//	config {SessionConfig}            a new session (the first block of a file)
//	update <name> {request}           the update's validator, then its handler
//	signal <name> {payload}           a signal
//	run                               turn the shell's loop (every input does so after it:
//	                                  a delivery stays in flight until answered)
//	history <n>|suggested|target-changed   what the run reports of its history; the
//	                                  loop may continue as new (a new run starts from the
//	                                  carried state, with a short history)
//	answer taken|how=<how>|error=<e>|host-gone   the result of the delivery in flight
//	drive-ended <turn>                the turn's drive completed or ended cancelled
//	drive-failed <turn> <error>       the turn's drive ended without reporting
//	advance <duration>                the clock moves
//	alarm                             the clock moves to the armed alarm, which fires
//	status                            the state as status shows it
//
// Outputs, what the shell's loop did with the core's Ready after the input: "ok {result}" or
// "rejected <type>" for an update, "cmd <command>" for each command carried out ("deliver
// <kind> turn=<t> attempt=<a> async=<bool> id=<id> host=<queue>" for a delivery,
// "continue-as-new auto-upgrade=<bool>"), "alarm +<since start>" when the alarm rang,
// "timer +<at, since start> <summary>" when a timer was set, "search-attrs ..." when they
// were upserted, then one line per event journaled: "<seq> <kind> turn=<t> <data>".

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected outputs of testdata/scenarios")

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/scenarios/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScenario(t, f) })
	}
}

type scenarioBlock struct {
	comments []string
	input    string
	want     string
}

func parseScenario(t *testing.T, text string) []scenarioBlock {
	var out []scenarioBlock
	var cur scenarioBlock
	inOutput := false
	flush := func() {
		if cur.input != "" {
			out = append(out, cur)
		}
		cur, inOutput = scenarioBlock{}, false
	}
	for _, line := range strings.Split(text, "\n") {
		switch {
		case line == "":
			flush()
		case !inOutput && strings.HasPrefix(line, "#"):
			cur.comments = append(cur.comments, line)
		case line == "----":
			inOutput = true
		case inOutput:
			cur.want += line + "\n"
		default:
			require.Empty(t, cur.input, "one input line per block: %q", line)
			cur.input = line
		}
	}
	flush()
	return out
}

func runScenario(t *testing.T, file string) {
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	blocks := parseScenario(t, string(b))
	var r *coreRig
	var rewritten strings.Builder
	for i, blk := range blocks {
		var got string
		if strings.HasPrefix(blk.input, "config ") {
			var cfg signals.SessionConfig
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(blk.input, "config ")), &cfg))
			r = newCoreRig(t, cfg)
			got = r.readyLines() + r.journalLines()
		} else {
			require.NotNil(t, r, "%s: the first block is config", file)
			got = r.scenarioStep(blk.input)
		}
		for _, c := range blk.comments {
			rewritten.WriteString(c + "\n")
		}
		fmt.Fprintf(&rewritten, "%s\n----\n%s", blk.input, got)
		if i < len(blocks)-1 {
			rewritten.WriteString("\n")
		}
		if !*rewrite {
			require.Equal(t, blk.want, got, "%s, block %d: %s", file, i+1, blk.input)
		}
	}
	if *rewrite {
		require.NoError(t, os.WriteFile(file, []byte(rewritten.String()), 0o644))
	}
}

// journalLines prints the events journaled since the last call.
func (r *coreRig) journalLines() string {
	var b strings.Builder
	for _, e := range r.newEvents() {
		fmt.Fprintf(&b, "%d %s turn=%d %s\n", e.Seq, e.Kind, e.TurnID, e.Data)
	}
	return b.String()
}

func (r *coreRig) scenarioStep(input string) string {
	verb, rest, _ := strings.Cut(input, " ")
	var out strings.Builder
	switch verb {
	case "update":
		name, raw, _ := strings.Cut(rest, " ")
		u, ok := UpdateByName[name]
		require.True(r.t, ok, "unknown update %q", name)
		req, err := u.Decode(json.RawMessage(raw))
		require.NoError(r.t, err)
		res, err := r.update(name, req)
		if st, ok := res.(signals.Status); ok {
			res = st.State // attach answers with status: the state says enough
		}
		if rej, ok := rejection.As(err); ok {
			fmt.Fprintf(&out, "rejected %s\n", rej.Type)
		} else {
			require.NoError(r.t, err)
			b, _ := json.Marshal(res)
			fmt.Fprintf(&out, "ok %s\n", b)
		}
	case "signal":
		name, raw, _ := strings.Cut(rest, " ")
		r.input(SignalInput{Name: name, Raw: json.RawMessage(raw)})
	case "run":
		r.run()
	case "history":
		// What the run reports of its history: a length, "suggested" (the server suggests
		// continue-as-new), or "target-changed" (the deployment's target version moved).
		switch rest {
		case "suggested":
			r.info.Suggested = true
		case "target-changed":
			r.info.TargetChanged = true
		default:
			n, err := strconv.Atoi(rest)
			require.NoError(r.t, err)
			r.info.HistoryLength = n
		}
		r.run()
	case "answer":
		var res signals.DeliveryResult
		var err error
		hostGone := false
		switch {
		case rest == "taken":
			res.Taken = true
		case strings.HasPrefix(rest, "how="):
			res.How = strings.TrimPrefix(rest, "how=")
		case strings.HasPrefix(rest, "error="):
			err = errors.New(strings.TrimPrefix(rest, "error="))
		case rest == "host-gone":
			err, hostGone = errors.New("activity ScheduleToStart timeout"), true
		default:
			r.t.Fatalf("answer %q", rest)
		}
		r.answer(res, err, hostGone)
	case "drive-failed":
		turn, msg, _ := strings.Cut(rest, " ")
		id, err := strconv.ParseInt(turn, 10, 64)
		require.NoError(r.t, err)
		r.input(DriveEnded{TurnID: id, Failure: msg})
	case "drive-ended":
		id, err := strconv.ParseInt(rest, 10, 64)
		require.NoError(r.t, err)
		r.input(DriveEnded{TurnID: id})
	case "advance":
		d, err := time.ParseDuration(rest)
		require.NoError(r.t, err)
		r.advance(d)
	case "alarm":
		r.ring()
		fmt.Fprintf(&out, "alarm +%s\n", r.now.Sub(coreEpoch))
	case "status":
		st := r.core.Status()
		fmt.Fprintf(&out, "state=%s turn=%d token=%q queue=%d permissions=%d viewers=%d run=%d\n",
			st.State, st.TurnID, st.SteerToken, len(st.Queue), len(st.PendingPermissions), len(st.Viewers), st.Run)
		if st.Title != "" {
			fmt.Fprintf(&out, "title=%q\n", st.Title)
		}
	default:
		r.t.Fatalf("unknown input %q", input)
	}
	out.WriteString(r.readyLines())
	out.WriteString(r.journalLines())
	return out.String()
}

// readyLines prints what the shell's loop did after the input (Ready, carried out): its
// commands, the timer it set, the search attributes it upserted.
func (r *coreRig) readyLines() string {
	var out strings.Builder
	for _, c := range r.cmds {
		fmt.Fprintf(&out, "cmd %s\n", c)
	}
	r.cmds = nil
	if r.alarm != nil && r.alarm != r.printedAlarm {
		fmt.Fprintf(&out, "timer +%s %s\n", r.alarm.At.Sub(coreEpoch), r.alarm.Summary)
		r.printedAlarm = r.alarm
	}
	if r.sa != nil && r.sa != r.printedSA {
		fmt.Fprintf(&out, "search-attrs state=%s turn=%d awaiting=%t outcome=%q\n", r.sa.State, r.sa.Turn, r.sa.Awaiting, r.sa.LastOutcome)
		r.printedSA = r.sa
	}
	return out.String()
}

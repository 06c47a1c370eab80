package workflows

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
//	run                               carry out next until nothing is left (a delivery
//	                                  stays in flight until answered)
//	answer taken|how=<how>|error=<e>|host-gone   the result of the delivery in flight
//	turn-workflow-ended <turn>        the TurnWorkflow completed or ended cancelled
//	turn-workflow-failed <turn> <error>          the TurnWorkflow ended without reporting
//	advance <duration>                the clock moves
//	alarm                             the clock moves to the armed alarm, which fires
//	status                            the state as status shows it
//
// Outputs: "ok {result}" or "rejected <type>" for an update, "cmd <command>" for each
// command run does ("deliver <kind> turn=<t> attempt=<a> async=<bool> id=<id>" for a
// delivery), "alarm +<since start>", then one line per event journaled: "<seq> <kind>
// turn=<t> <data>".

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
			got = r.journalLines()
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

// scenarioUpdates are the updates a scenario can send: the core's validator, then its
// handler, as the SDK runs them.
var scenarioUpdates = map[string]func(r *coreRig, raw []byte) (any, error){
	signals.UpdatePrompt:            scenarioUpdate((*sessionCore).validatePrompt, (*sessionCore).prompt),
	signals.UpdateSteer:             scenarioUpdate((*sessionCore).validateSteer, (*sessionCore).steer),
	signals.UpdateCancel:            scenarioUpdate((*sessionCore).validateCancel, (*sessionCore).cancel),
	signals.UpdatePermissionRespond: scenarioUpdate((*sessionCore).validateRespond, (*sessionCore).respond),
	signals.UpdatePermissionForget:  scenarioUpdate((*sessionCore).validateForget, (*sessionCore).forget),
	signals.UpdateSetPolicy:         scenarioUpdate((*sessionCore).validateSetPolicy, (*sessionCore).setPolicy),
	signals.UpdateAttach: scenarioUpdate((*sessionCore).validateAttach, func(s *sessionCore, now time.Time, req signals.AttachRequest) (string, error) {
		st, err := s.attach(now, req)
		return st.State, err
	}),
	signals.UpdateDetach: scenarioUpdate(nil, (*sessionCore).detach),
	signals.UpdateClose:  scenarioUpdate(nil, (*sessionCore).close),
}

func scenarioUpdate[Req, Res any](validate func(*sessionCore, Req) error, handle func(*sessionCore, time.Time, Req) (Res, error)) func(r *coreRig, raw []byte) (any, error) {
	return func(r *coreRig, raw []byte) (any, error) {
		var req Req
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, err
		}
		if validate != nil {
			if err := validate(r.core, req); err != nil {
				return nil, err
			}
		}
		return handle(r.core, r.now, req)
	}
}

func (r *coreRig) scenarioStep(input string) string {
	verb, rest, _ := strings.Cut(input, " ")
	var out strings.Builder
	switch verb {
	case "update":
		name, raw, _ := strings.Cut(rest, " ")
		h, ok := scenarioUpdates[name]
		require.True(r.t, ok, "unknown update %q", name)
		res, err := h(r, []byte(raw))
		if rej, ok := signals.AsRejection(err); ok {
			fmt.Fprintf(&out, "rejected %s\n", rej.Type)
		} else {
			require.NoError(r.t, err)
			b, _ := json.Marshal(res)
			fmt.Fprintf(&out, "ok %s\n", b)
		}
	case "signal":
		name, raw, _ := strings.Cut(rest, " ")
		r.core.signal(r.now, name, json.RawMessage(raw))
	case "run":
		for _, c := range r.settle() {
			if c == cmdDeliver && r.sent != nil {
				fmt.Fprintf(&out, "cmd deliver %s turn=%d attempt=%d async=%t id=%s\n", r.sent.Kind, r.sent.TurnID, r.sent.Attempt, r.sent.Async, r.sent.DeliveryID)
				continue
			}
			fmt.Fprintf(&out, "cmd %s\n", c)
		}
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
	case "turn-workflow-failed":
		turn, msg, _ := strings.Cut(rest, " ")
		id, err := strconv.ParseInt(turn, 10, 64)
		require.NoError(r.t, err)
		r.core.turnWorkflowFailed(r.now, id, msg)
	case "turn-workflow-ended":
		id, err := strconv.ParseInt(rest, 10, 64)
		require.NoError(r.t, err)
		r.core.turnWorkflowEnded(r.now, id)
	case "advance":
		d, err := time.ParseDuration(rest)
		require.NoError(r.t, err)
		r.advance(d)
	case "alarm":
		r.ring()
		fmt.Fprintf(&out, "alarm +%s\n", r.now.Sub(coreEpoch))
	case "status":
		st := r.core.status()
		fmt.Fprintf(&out, "state=%s turn=%d token=%q queue=%d permissions=%d viewers=%d\n",
			st.State, st.TurnID, st.SteerToken, len(st.Queue), len(st.PendingPermissions), len(st.Viewers))
	default:
		r.t.Fatalf("unknown input %q", input)
	}
	// As the shell's loop does after every input: the alarm follows the earliest due.
	r.core.setAlarm()
	out.WriteString(r.journalLines())
	return out.String()
}

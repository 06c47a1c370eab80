package session

// Tests of the steer compare-and-swap (contract §6 "Steer"), one per rule and in the order the
// text states them, then the properties the session shell relies on: Decide changes nothing,
// the dedup index survives continue-as-new (a JSON round trip) and is bounded.

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
)

// steerReq builds a steer request.
func steerReq(text, expected, clientMsgID string) signals.SteerRequest {
	return signals.SteerRequest{Text: text, ExpectedTurnID: expected, ClientMsgID: clientMsgID}
}

// liveSteer returns a Steer whose live turn is turnID.
func liveSteer(turnID int64) *Steer {
	s := NewSteer()
	s.Begin(turnID)
	return s
}

// mustAccept accepts req (with a steer channel) and fails the test on a rejection.
func mustAccept(t *testing.T, s *Steer, req signals.SteerRequest) signals.SteerResult {
	t.Helper()
	res, rej := s.Accept(req, true)
	require.Nil(t, rej, "steer %+v rejected", req)
	require.Equal(t, signals.SteerAccepted, res.Outcome)
	return res
}

// requireRejected asserts that rej is a rejection of type typ.
func requireRejected(t *testing.T, typ string, res signals.SteerResult, rej *signals.Rejection) {
	t.Helper()
	require.NotNil(t, rej, "want %s, got result %+v", typ, res)
	require.Equal(t, typ, rej.Type, "rejection: %v", rej)
	require.Equal(t, signals.SteerResult{}, res, "a rejection carries no result")
}

// cloneSteer deep-copies s, so that a later comparison sees any change made through maps or
// slices shared with the original.
func cloneSteer(s *Steer) Steer {
	c := *s
	if s.Seen.Entries != nil {
		c.Seen.Entries = make(map[string]SteerSeen, len(s.Seen.Entries))
		for k, v := range s.Seen.Entries {
			c.Seen.Entries[k] = v
		}
	}
	c.Seen.Order = slices.Clone(s.Seen.Order)
	return c
}

// --- Rule 1: a client_msg_id seen before ---

func TestSteer_Rule1_DuplicateSameTextReturnsOriginalRef(t *testing.T) {
	s := liveSteer(7)
	orig := mustAccept(t, s, steerReq("go left", "7", "m1"))
	require.Equal(t, signals.SteerRef{TurnID: 7, Offset: 1, ClientMsgID: "m1"}, orig.Ref)

	// Whatever state the session is in by the time the retry arrives, the retry gets the
	// original ref and next_expected_turn_id back, and nothing moves.
	tests := []struct {
		name     string
		setup    func(t *testing.T, s *Steer)
		expected string
	}{
		{"same token as the original", func(*testing.T, *Steer) {}, "7"},
		{"token moved on", func(t *testing.T, s *Steer) { mustAccept(t, s, steerReq("other", "7.1", "m2")) }, "7"},
		{"stale expected token", func(*testing.T, *Steer) {}, "999"},
		{"no live turn", func(_ *testing.T, s *Steer) { s.Halt() }, "7"},
		{"a later turn", func(_ *testing.T, s *Steer) { s.Begin(8) }, "8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := cloneSteer(s)
			tt.setup(t, &s)
			before := cloneSteer(&s)
			for _, channel := range []bool{true, false} {
				res, rej := s.Accept(steerReq("go left", tt.expected, "m1"), channel)
				require.Nil(t, rej)
				require.Equal(t, signals.SteerDuplicate, res.Outcome)
				require.Equal(t, orig.Ref, res.Ref)
				require.Equal(t, orig.NextExpectedTurnID, res.NextExpectedTurnID)
				require.True(t, reflect.DeepEqual(before, s), "a duplicate changed the state")
			}
		})
	}
}

func TestSteer_Rule1_SameIDDifferentTextIsClientMsgIDReuse(t *testing.T) {
	tests := []struct {
		name string
		text string
	}{
		{"different text", "go right"},
		{"text differs by a trailing space", "go left "},
		{"text differs in case", "Go left"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := liveSteer(7)
			mustAccept(t, s, steerReq("go left", "7", "m1"))
			before := cloneSteer(s)
			res, rej := s.Accept(steerReq(tt.text, "7.1", "m1"), true)
			requireRejected(t, signals.RejectClientMsgIDReuse, res, rej)
			require.Contains(t, rej.Message, `"m1"`)
			require.True(t, reflect.DeepEqual(before, *s), "a rejection changed the state")
		})
	}
}

func TestSteer_Rule1_OnlyAcceptedSteersAreRemembered(t *testing.T) {
	s := liveSteer(7)
	// A rejected steer leaves no trace in the dedup index: the same id can be used again
	// once the client has the right token.
	res, rej := s.Accept(steerReq("go left", "6", "m1"), true)
	requireRejected(t, signals.RejectStaleTurn, res, rej)
	res, rej = s.Accept(steerReq("go left", "7", "m1"), false)
	requireRejected(t, signals.RejectNoSteerChannel, res, rej)
	res = mustAccept(t, s, steerReq("go left", "7", "m1"))
	require.Equal(t, 1, res.Ref.Offset)

	// A steer without a client_msg_id is never a duplicate.
	res = mustAccept(t, s, steerReq("again", "7.1", ""))
	require.Equal(t, signals.SteerRef{TurnID: 7, Offset: 2}, res.Ref)
	res = mustAccept(t, s, steerReq("again", "7.2", ""))
	require.Equal(t, signals.SteerRef{TurnID: 7, Offset: 3}, res.Ref)
	require.Len(t, s.Seen.Entries, 1)
}

// --- Rule 2: a live turn ---

func TestSteer_Rule2_NoLiveTurn(t *testing.T) {
	tests := []struct {
		name  string
		steer func() *Steer
	}{
		{"idle, never started", NewSteer},
		{"halted (cancelling or between turns)", func() *Steer {
			s := liveSteer(7)
			mustAccept(t, s, steerReq("x", "7", "m1"))
			s.Halt()
			return s
		}},
		{"zero value", func() *Steer { return &Steer{} }},
		{"begun with turn 0", func() *Steer { return liveSteer(0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.steer()
			require.False(t, s.Live())
			require.Empty(t, s.Token())
			for _, expected := range []string{"7", "7.1", "0", "1"} {
				res, rej := s.Accept(steerReq("go", expected, "fresh"), true)
				requireRejected(t, signals.RejectNoLiveTurn, res, rej)
			}
		})
	}
}

// --- Rule 3: the token ---

func TestSteer_Rule3_StaleTurnCarriesExpectedAndActual(t *testing.T) {
	tests := []struct {
		name     string
		accepted int // steers accepted in turn 7 before the stale one
		expected string
		actual   string
	}{
		{"previous turn", 0, "6", "7"},
		{"future turn", 0, "8", "7"},
		{"token already swapped", 1, "7", "7.1"},
		{"token swapped twice", 2, "7.1", "7.2"},
		{"offset ahead of the live token", 0, "7.1", "7"},
		{"not a number", 0, "seven", "7"},
		{"padded", 0, " 7", "7"},
		{"leading zero", 0, "07", "7"},
		{"explicit zero offset", 0, "7.0", "7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := liveSteer(7)
			for i := range tt.accepted {
				mustAccept(t, s, steerReq("x", s.Token(), "pre"+strconv.Itoa(i)))
			}
			before := cloneSteer(s)
			res, rej := s.Accept(steerReq("go", tt.expected, "fresh"), true)
			requireRejected(t, signals.RejectStaleTurn, res, rej)
			require.Equal(t, signals.StaleTurnDetails{Expected: tt.expected, Actual: tt.actual}, rej.Details)
			require.True(t, reflect.DeepEqual(before, *s), "a rejection changed the state")

			// The details reach the client through the validator's ApplicationError.
			back, ok := rejection.As(rejection.Error(rej))
			require.True(t, ok)
			require.Equal(t, signals.RejectStaleTurn, back.Type)
			require.Equal(t, signals.StaleTurnDetails{Expected: tt.expected, Actual: tt.actual}, back.Details)
		})
	}
}

// --- Rule 4: a way to deliver it ---

func TestSteer_Rule4_NoSteerChannel(t *testing.T) {
	s := liveSteer(7)
	before := cloneSteer(s)
	res, rej := s.Accept(steerReq("go", "7", "m1"), false)
	requireRejected(t, signals.RejectNoSteerChannel, res, rej)
	require.True(t, reflect.DeepEqual(before, *s), "a rejection changed the state")
	_, seen := s.Seen.Get("m1")
	require.False(t, seen, "a no_steer_channel rejection must not be remembered")

	// Once a channel is there, the same steer is accepted.
	res = mustAccept(t, s, steerReq("go", "7", "m1"))
	require.Equal(t, "7.1", res.NextExpectedTurnID)
}

// --- Rule 5: accept ---

func TestSteer_Rule5_AcceptSwapsToken(t *testing.T) {
	s := liveSteer(7)
	require.True(t, s.Live())
	require.Equal(t, "7", s.Token())

	steps := []struct {
		expected string
		id       string
		wantRef  signals.SteerRef
		wantNext string
	}{
		{"7", "m1", signals.SteerRef{TurnID: 7, Offset: 1, ClientMsgID: "m1"}, "7.1"},
		{"7.1", "m2", signals.SteerRef{TurnID: 7, Offset: 2, ClientMsgID: "m2"}, "7.2"},
		{"7.2", "", signals.SteerRef{TurnID: 7, Offset: 3}, "7.3"},
	}
	for _, st := range steps {
		res := mustAccept(t, s, steerReq("steer "+st.expected, st.expected, st.id))
		require.Equal(t, st.wantRef, res.Ref)
		require.Equal(t, st.wantNext, res.NextExpectedTurnID)
		require.Equal(t, st.wantNext, s.Token(), "next_expected_turn_id is the new live token")

		// The old token is stale now.
		_, rej := s.Decide(steerReq("late", st.expected, ""), true)
		require.NotNil(t, rej)
		require.Equal(t, signals.RejectStaleTurn, rej.Type)
	}

	seen, ok := s.Seen.Get("m2")
	require.True(t, ok)
	require.Equal(t, textSHA256("steer 7.1"), seen.TextSHA256)
	require.Equal(t, signals.SteerRef{TurnID: 7, Offset: 2, ClientMsgID: "m2"}, seen.Result.Ref)
}

func TestSteer_Rule5_ResultJSONMatchesDesign(t *testing.T) {
	s := liveSteer(7)
	res := mustAccept(t, s, steerReq("go", "7", "m1"))
	b, err := json.Marshal(res)
	require.NoError(t, err)
	require.JSONEq(t, `{"outcome":"accepted","ref":{"turn_id":7,"offset":1,"client_msg_id":"m1"},"next_expected_turn_id":"7.1"}`, string(b))
}

// --- The order of the checks ---

func TestSteer_ChecksRunInOrder(t *testing.T) {
	// A request that fails several checks gets the first one's answer.
	type state struct {
		live    bool
		seenID  string // an accepted steer with this id and text "seen text" in turn 7
		channel bool
	}
	tests := []struct {
		name    string
		state   state
		req     signals.SteerRequest
		want    string // rejection type, or SteerDuplicate
		wantErr bool
	}{
		{"invalid beats duplicate", state{true, "m1", true}, steerReq(" ", "7", "m1"), signals.RejectInvalidRequest, true},
		{"invalid beats no live turn", state{false, "", true}, steerReq("", "7", ""), signals.RejectInvalidRequest, true},
		{"duplicate beats no live turn", state{false, "m1", true}, steerReq("seen text", "7", "m1"), signals.SteerDuplicate, false},
		{"reuse beats no live turn", state{false, "m1", true}, steerReq("other text", "7", "m1"), signals.RejectClientMsgIDReuse, true},
		{"duplicate beats stale", state{true, "m1", true}, steerReq("seen text", "3", "m1"), signals.SteerDuplicate, false},
		{"reuse beats stale", state{true, "m1", true}, steerReq("other text", "3", "m1"), signals.RejectClientMsgIDReuse, true},
		{"duplicate beats no channel", state{true, "m1", false}, steerReq("seen text", "7.1", "m1"), signals.SteerDuplicate, false},
		{"reuse beats no channel", state{true, "m1", false}, steerReq("other text", "7.1", "m1"), signals.RejectClientMsgIDReuse, true},
		{"no live turn beats stale", state{false, "", true}, steerReq("x", "3", "m2"), signals.RejectNoLiveTurn, true},
		{"no live turn beats no channel", state{false, "", false}, steerReq("x", "7", "m2"), signals.RejectNoLiveTurn, true},
		{"stale beats no channel", state{true, "", false}, steerReq("x", "3", "m2"), signals.RejectStaleTurn, true},
		{"no channel only after checks 1-3 pass", state{true, "", false}, steerReq("x", "7", "m2"), signals.RejectNoSteerChannel, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := liveSteer(7)
			if tt.state.seenID != "" {
				mustAccept(t, s, steerReq("seen text", "7", tt.state.seenID))
			}
			if !tt.state.live {
				s.Halt()
			}
			res, rej := s.Decide(tt.req, tt.state.channel)
			if tt.wantErr {
				requireRejected(t, tt.want, res, rej)
				return
			}
			require.Nil(t, rej)
			require.Equal(t, tt.want, res.Outcome)
		})
	}
}

// --- Decide is the validator: it changes nothing ---

func TestSteer_DecideChangesNothing(t *testing.T) {
	tests := []struct {
		name    string
		req     signals.SteerRequest
		channel bool
	}{
		{"would accept", steerReq("go", "7.1", "new"), true},
		{"would accept without id", steerReq("go", "7.1", ""), true},
		{"duplicate", steerReq("seen", "7", "m1"), true},
		{"reuse", steerReq("other", "7", "m1"), true},
		{"stale", steerReq("go", "7", "new"), true},
		{"no channel", steerReq("go", "7.1", "new"), false},
		{"invalid", steerReq("", "7.1", "new"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := liveSteer(7)
			mustAccept(t, s, steerReq("seen", "7", "m1"))
			before := cloneSteer(s)

			res1, rej1 := s.Decide(tt.req, tt.channel)
			res2, rej2 := s.Decide(tt.req, tt.channel)
			require.Equal(t, res1, res2)
			require.Equal(t, rej1, rej2)
			require.True(t, reflect.DeepEqual(before, *s), "Decide changed the state:\nbefore %+v\nafter  %+v", before, *s)

			// The handler's Accept decides the same way.
			res3, rej3 := s.Accept(tt.req, tt.channel)
			require.Equal(t, res1, res3)
			require.Equal(t, rej1, rej3)
		})
	}
}

// --- The dedup index across continue-as-new ---

func TestSteer_DedupSurvivesJSONRoundTrip(t *testing.T) {
	s := liveSteer(7)
	orig := mustAccept(t, s, steerReq("go left", "7", "m1"))
	mustAccept(t, s, steerReq("go right", "7.1", "m2"))

	// Continue-as-new carries the Steer as JSON (the SDK's default converter).
	b, err := json.Marshal(s)
	require.NoError(t, err)
	var next Steer
	require.NoError(t, json.Unmarshal(b, &next))
	require.True(t, reflect.DeepEqual(*s, next), "round trip changed the state:\nbefore %+v\nafter  %+v", *s, next)
	require.Equal(t, "7.2", next.Token())
	require.Equal(t, DedupLimit, next.Seen.Limit)

	res, rej := next.Accept(steerReq("go left", "7.2", "m1"), true)
	require.Nil(t, rej)
	require.Equal(t, signals.SteerDuplicate, res.Outcome)
	require.Equal(t, orig.Ref, res.Ref)
	require.Equal(t, orig.NextExpectedTurnID, res.NextExpectedTurnID)

	_, rej = next.Accept(steerReq("go up", "7.2", "m1"), true)
	require.NotNil(t, rej)
	require.Equal(t, signals.RejectClientMsgIDReuse, rej.Type)

	res = mustAccept(t, &next, steerReq("go up", "7.2", "m3"))
	require.Equal(t, "7.3", res.NextExpectedTurnID)
}

func TestSteer_DedupEvictsOldestPastLimit(t *testing.T) {
	// The documented bound: DedupLimit (4096) ids, oldest evicted first.
	require.Equal(t, 4096, DedupLimit)
	s := liveSteer(1)
	for i := range DedupLimit + 1 {
		mustAccept(t, s, steerReq("t"+strconv.Itoa(i), s.Token(), "id"+strconv.Itoa(i)))
	}
	require.Len(t, s.Seen.Entries, DedupLimit)
	require.Len(t, s.Seen.Order, DedupLimit)
	require.Equal(t, "id1", s.Seen.Order[0])

	// id0 was evicted: it is a new steer now, checked against the live token.
	_, rej := s.Decide(steerReq("t0", "1", "id0"), true)
	require.NotNil(t, rej)
	require.Equal(t, signals.RejectStaleTurn, rej.Type)
	res := mustAccept(t, s, steerReq("t0", s.Token(), "id0"))
	require.Equal(t, DedupLimit+2, res.Ref.Offset)

	// That pushed id1 out; id2 is still remembered.
	_, ok := s.Seen.Get("id1")
	require.False(t, ok)
	res, rej = s.Decide(steerReq("t2", "1", "id2"), true)
	require.Nil(t, rej)
	require.Equal(t, signals.SteerDuplicate, res.Outcome)
	require.Equal(t, 3, res.Ref.Offset)
}

// --- Request validation ---

func TestSteer_InvalidRequests(t *testing.T) {
	tests := []struct {
		name    string
		req     signals.SteerRequest
		wantMsg string
	}{
		{"empty text", steerReq("", "7", "m1"), "empty"},
		{"whitespace text", steerReq(" \t\n ", "7", "m1"), "empty"},
		{"text over MaxTextBytes", steerReq(strings.Repeat("a", signals.MaxTextBytes+1), "7", "m1"), "limit"},
		{"missing expected_turn_id", steerReq("go", "", "m1"), "expected_turn_id"},
		{"client_msg_id too long", steerReq("go", "7", strings.Repeat("c", signals.MaxClientIDBytes+1)), "client_msg_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, signals.RejectInvalidRequest, ValidateSteer(tt.req).Type)
			s := liveSteer(7)
			before := cloneSteer(s)
			res, rej := s.Accept(tt.req, true)
			requireRejected(t, signals.RejectInvalidRequest, res, rej)
			require.Contains(t, rej.Message, tt.wantMsg)
			require.True(t, reflect.DeepEqual(before, *s))
		})
	}
}

func TestSteer_ValidRequestsAtTheLimits(t *testing.T) {
	tests := []struct {
		name string
		req  signals.SteerRequest
	}{
		{"text of exactly MaxTextBytes", steerReq(strings.Repeat("a", signals.MaxTextBytes), "7", "m1")},
		{"client_msg_id of exactly MaxClientIDBytes", steerReq("go", "7", strings.Repeat("c", signals.MaxClientIDBytes))},
		{"no client_msg_id", steerReq("go", "7", "")},
		{"text with surrounding whitespace", steerReq("  go  ", "7", "m1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Nil(t, ValidateSteer(tt.req))
			mustAccept(t, liveSteer(7), tt.req)
		})
	}
}

// --- Begin and Halt ---

func TestSteer_BeginStartsTokenAtTurnOrdinal(t *testing.T) {
	s := NewSteer()
	require.False(t, s.Live())
	require.Empty(t, s.Token())

	s.Begin(7)
	require.True(t, s.Live())
	require.Equal(t, "7", s.Token())
	mustAccept(t, s, steerReq("a", "7", "m1"))
	mustAccept(t, s, steerReq("b", "7.1", "m2"))
	require.Equal(t, "7.2", s.Token())

	// The next turn starts its token over at its own ordinal.
	s.Begin(8)
	require.Equal(t, "8", s.Token())
	res, rej := s.Decide(steerReq("c", "7.2", "m3"), true)
	requireRejected(t, signals.RejectStaleTurn, res, rej)
	require.Equal(t, signals.StaleTurnDetails{Expected: "7.2", Actual: "8"}, rej.Details)
	res = mustAccept(t, s, steerReq("c", "8", "m3"))
	require.Equal(t, signals.SteerRef{TurnID: 8, Offset: 1, ClientMsgID: "m3"}, res.Ref)
	require.Equal(t, "8.1", res.NextExpectedTurnID)
}

func TestSteer_HaltEndsTheLiveTurnKeepingDedup(t *testing.T) {
	s := liveSteer(7)
	orig := mustAccept(t, s, steerReq("a", "7", "m1"))
	s.Halt()
	require.False(t, s.Live())
	require.Empty(t, s.Token())

	res, rej := s.Decide(steerReq("b", "7.1", "m2"), true)
	requireRejected(t, signals.RejectNoLiveTurn, res, rej)

	// The dedup index lives for the whole session, not the turn.
	res, rej = s.Decide(steerReq("a", "7.1", "m1"), true)
	require.Nil(t, rej)
	require.Equal(t, signals.SteerDuplicate, res.Outcome)
	require.Equal(t, orig.Ref, res.Ref)

	s.Halt() // halting twice is harmless
	require.False(t, s.Live())
}

// --- Fuzz ---

// FuzzSteerDecide drives Decide and Accept with arbitrary requests and states: Decide never
// panics and changes nothing, Accept answers as Decide did, and an accepted steer's
// next_expected_turn_id is the new live token.
func FuzzSteerDecide(f *testing.F) {
	f.Add("go left", "7", "m1", int64(7), uint8(0), "", true)
	f.Add("go left", "7.1", "m1", int64(7), uint8(1), "m1", true)
	f.Add("other", "7.1", "m1", int64(7), uint8(1), "m1", true)
	f.Add("x", "7", "", int64(0), uint8(0), "", false)
	f.Add(" ", "", "m", int64(-3), uint8(3), "m", true)
	f.Add("go", "9223372036854775807.2", "z", int64(9223372036854775807), uint8(2), "", true)
	f.Fuzz(func(t *testing.T, text, expected, clientID string, turnID int64, prior uint8, priorID string, channel bool) {
		s := NewSteer()
		s.Begin(turnID)
		// Accept a few earlier steers with the live token; the first one may carry priorID
		// so that the fuzzed request can collide with it.
		for i := range int(prior % 5) {
			id := "p" + strconv.Itoa(i)
			if i == 0 && priorID != "" {
				id = priorID
			}
			s.Accept(steerReq("prior "+strconv.Itoa(i), s.Token(), id), true)
		}
		req := steerReq(text, expected, clientID)

		before := cloneSteer(s)
		res, rej := s.Decide(req, channel)
		if !reflect.DeepEqual(before, *s) {
			t.Fatalf("Decide changed the state")
		}
		oldToken := s.Token()

		res2, rej2 := s.Accept(req, channel)
		if !reflect.DeepEqual(rej, rej2) || !reflect.DeepEqual(res, res2) {
			t.Fatalf("Accept answered %+v %v, Decide %+v %v", res2, rej2, res, rej)
		}

		switch {
		case rej != nil:
			switch rej.Type {
			case signals.RejectInvalidRequest, signals.RejectClientMsgIDReuse, signals.RejectNoLiveTurn,
				signals.RejectStaleTurn, signals.RejectNoSteerChannel:
			default:
				t.Fatalf("unexpected rejection type %q", rej.Type)
			}
			if rej.Type == signals.RejectStaleTurn {
				d, ok := rej.Details.(signals.StaleTurnDetails)
				if !ok || d.Expected != expected || d.Actual != oldToken || d.Actual == d.Expected {
					t.Fatalf("stale_turn details %#v (expected %q, token %q)", rej.Details, expected, oldToken)
				}
			}
			if !reflect.DeepEqual(before, *s) {
				t.Fatalf("a rejected steer changed the state")
			}
		case res.Outcome == signals.SteerDuplicate:
			if !reflect.DeepEqual(before, *s) {
				t.Fatalf("a duplicate changed the state")
			}
		case res.Outcome == signals.SteerAccepted:
			if expected != oldToken || !channel {
				t.Fatalf("accepted a steer with expected %q against token %q (channel %v)", expected, oldToken, channel)
			}
			if res.NextExpectedTurnID != s.Token() {
				t.Fatalf("next_expected_turn_id %q, live token %q", res.NextExpectedTurnID, s.Token())
			}
			if res.Ref.TurnID != s.TurnID || res.Ref.Offset != s.Offset || res.Ref.ClientMsgID != clientID {
				t.Fatalf("ref %+v for turn %d offset %d", res.Ref, s.TurnID, s.Offset)
			}
			if clientID != "" {
				if _, ok := s.Seen.Get(clientID); !ok {
					t.Fatalf("accepted client_msg_id %q not remembered", clientID)
				}
				again, rej := s.Decide(req, channel)
				if rej != nil || again.Outcome != signals.SteerDuplicate || again.Ref != res.Ref {
					t.Fatalf("retry answered %+v %v", again, rej)
				}
			}
		default:
			t.Fatalf("unexpected outcome %q", res.Outcome)
		}
	})
}

package session

// The steer compare-and-swap (contract §6 "Steer"). A steer names the turn token it expects;
// the checks run in the order of the text:
//
//  1. a client_msg_id seen before → duplicate with the original ref when the text is the
//     same (SHA-256), client_msg_id_reuse when it differs;
//  2. no live turn (idle, cancelling, between turns) → no_live_turn;
//  3. expected_turn_id is not the live token → stale_turn {expected, actual};
//  4. no way to deliver it → no_steer_channel;
//  5. accept: the token swaps ("7" → "7.1" → "7.2") and the result names the next one.
//
// Decide is the one function that decides; the validator calls it to reject without history
// and the handler calls Accept, which decides the same way and commits.

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/tacp-dev/tacp/signals"
)

// SteerSeen is what the dedup index keeps per client_msg_id.
type SteerSeen struct {
	TextSHA256 string              `json:"text_sha256"`
	Result     signals.SteerResult `json:"result"`
}

// Steer holds the live turn's steer token and the session-long dedup index.
type Steer struct {
	// TurnID is the live turn's ordinal, 0 when no turn is live.
	TurnID int64 `json:"turn_id"`
	// Offset counts the steers accepted in the live turn; the token is "TurnID.Offset".
	Offset int                   `json:"offset"`
	Seen   DedupIndex[SteerSeen] `json:"seen"`
}

// NewSteer returns a Steer with no live turn.
func NewSteer() *Steer { return &Steer{Seen: NewDedupIndex[SteerSeen]()} }

// Begin makes turnID the live turn with token "<turnID>".
func (s *Steer) Begin(turnID int64) { s.TurnID, s.Offset = turnID, 0 }

// Halt ends the live turn: steers are answered no_live_turn until the next Begin.
func (s *Steer) Halt() { s.TurnID, s.Offset = 0, 0 }

// Live reports whether a turn takes steers.
func (s *Steer) Live() bool { return s.TurnID > 0 }

// Token is the live turn's steer token ("" when none is live).
func (s *Steer) Token() string {
	if !s.Live() {
		return ""
	}
	return tokenOf(s.TurnID, s.Offset)
}

func tokenOf(turnID int64, offset int) string {
	t := strconv.FormatInt(turnID, 10)
	if offset == 0 {
		return t
	}
	return t + "." + strconv.Itoa(offset)
}

// ValidateSteer checks a steer request's fields.
func ValidateSteer(req signals.SteerRequest) *signals.Rejection {
	if strings.TrimSpace(req.Text) == "" {
		return signals.Reject(signals.RejectInvalidRequest, "steer text is empty")
	}
	if len(req.Text) > signals.MaxTextBytes {
		return signals.Reject(signals.RejectInvalidRequest, "steer text is %d bytes; the limit is %d", len(req.Text), signals.MaxTextBytes)
	}
	if req.ExpectedTurnID == "" {
		return signals.Reject(signals.RejectInvalidRequest, "expected_turn_id is required (the steer_token of status)")
	}
	if len(req.ClientMsgID) > signals.MaxClientIDBytes {
		return signals.Reject(signals.RejectInvalidRequest, "client_msg_id is longer than %d bytes", signals.MaxClientIDBytes)
	}
	return nil
}

// Decide runs the checks in order without changing anything. channel says whether an
// accepted steer could be delivered to the live turn.
func (s *Steer) Decide(req signals.SteerRequest, channel bool) (signals.SteerResult, *signals.Rejection) {
	if rej := ValidateSteer(req); rej != nil {
		return signals.SteerResult{}, rej
	}
	// 1. dedup
	if req.ClientMsgID != "" {
		if seen, ok := s.Seen.Get(req.ClientMsgID); ok {
			if seen.TextSHA256 != textSHA256(req.Text) {
				return signals.SteerResult{}, signals.Reject(signals.RejectClientMsgIDReuse,
					"client_msg_id %q was used for a different text", req.ClientMsgID)
			}
			res := seen.Result
			res.Outcome = signals.SteerDuplicate
			return res, nil
		}
	}
	// 2. a live turn
	if !s.Live() {
		return signals.SteerResult{}, signals.Reject(signals.RejectNoLiveTurn, "no turn is running")
	}
	// 3. compare the token
	if actual := s.Token(); req.ExpectedTurnID != actual {
		rej := signals.Reject(signals.RejectStaleTurn, "expected turn %s, the live turn is %s", req.ExpectedTurnID, actual)
		rej.Details = signals.StaleTurnDetails{Expected: req.ExpectedTurnID, Actual: actual}
		return signals.SteerResult{}, rej
	}
	// 4. a way to deliver it
	if !channel {
		return signals.SteerResult{}, signals.Reject(signals.RejectNoSteerChannel, "turn %s cannot take steers", s.Token())
	}
	// 5. accept
	return signals.SteerResult{
		Outcome:            signals.SteerAccepted,
		Ref:                signals.SteerRef{TurnID: s.TurnID, Offset: s.Offset + 1, ClientMsgID: req.ClientMsgID},
		NextExpectedTurnID: tokenOf(s.TurnID, s.Offset+1),
	}, nil
}

// Accept decides as Decide does and, for a new accepted steer, swaps the token and
// remembers the client_msg_id.
func (s *Steer) Accept(req signals.SteerRequest, channel bool) (signals.SteerResult, *signals.Rejection) {
	res, rej := s.Decide(req, channel)
	if rej != nil || res.Outcome != signals.SteerAccepted {
		return res, rej
	}
	s.Offset = res.Ref.Offset
	if req.ClientMsgID != "" {
		s.Seen.Put(req.ClientMsgID, SteerSeen{TextSHA256: textSHA256(req.Text), Result: res})
	}
	return res, nil
}

func textSHA256(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

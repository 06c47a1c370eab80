package tacpclient

// Tests of SteerLive's rule: steer the live token; none live is no_live_turn with nothing
// sent; a moved token is followed up to SteerLiveAttempts tries; other refusals pass through.

import (
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"

	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeSession answers steers like the session's steer core: stale while the token it holds
// is not the one expected, the token moving by one each time a rival steer wins first.
type fakeSession struct {
	token  string   // the live token ("" when no turn runs)
	rivals []string // the tokens rivals move it to, one per steer we send, before it arrives
	sent   []signals.SteerRequest
	other  error // returned instead of an answer when set
}

func (f *fakeSession) read() (string, error) { return f.token, nil }

func (f *fakeSession) steer(req signals.SteerRequest) (signals.SteerResult, error) {
	f.sent = append(f.sent, req)
	if len(f.rivals) > 0 {
		f.token, f.rivals = f.rivals[0], f.rivals[1:]
	}
	if f.other != nil {
		return signals.SteerResult{}, f.other
	}
	if f.token == "" {
		return signals.SteerResult{}, signals.Reject(signals.RejectNoLiveTurn, "no turn is running")
	}
	if req.ExpectedTurnID != f.token {
		rej := signals.Reject(signals.RejectStaleTurn, "stale")
		rej.Details = signals.StaleTurnDetails{Expected: req.ExpectedTurnID, Actual: f.token}
		return signals.SteerResult{}, rejection.Error(rej)
	}
	return signals.SteerResult{Outcome: signals.SteerAccepted, NextExpectedTurnID: f.token + ".next"}, nil
}

func TestSteerLive_SteersTheLiveToken(t *testing.T) {
	f := &fakeSession{token: "3.1"}
	res, err := steerLive(f.read, f.steer, signals.SteerRequest{Text: "go left", ViewerID: "v1"})
	require.NoError(t, err)
	require.Equal(t, signals.SteerAccepted, res.Outcome)
	require.Len(t, f.sent, 1)
	require.Equal(t, "3.1", f.sent[0].ExpectedTurnID)
	require.Equal(t, "v1", f.sent[0].ViewerID)
	require.NotEmpty(t, f.sent[0].ClientMsgID, "a steer without an id gets one")
}

func TestSteerLive_NoLiveTurnSendsNothing(t *testing.T) {
	f := &fakeSession{}
	_, err := steerLive(f.read, f.steer, signals.SteerRequest{Text: "go left"})
	rej, ok := rejection.As(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, signals.RejectNoLiveTurn, rej.Type)
	require.Empty(t, f.sent)
}

func TestSteerLive_FollowsAMovedTokenWithTheSameID(t *testing.T) {
	f := &fakeSession{token: "3", rivals: []string{"3.1", "4"}}
	res, err := steerLive(f.read, f.steer, signals.SteerRequest{Text: "go left", ClientMsgID: "m1"})
	require.NoError(t, err)
	require.Equal(t, signals.SteerAccepted, res.Outcome)
	require.Len(t, f.sent, 3)
	for i, want := range []string{"3", "3.1", "4"} {
		require.Equal(t, want, f.sent[i].ExpectedTurnID)
		require.Equal(t, "m1", f.sent[i].ClientMsgID, "every attempt is the same steer")
	}
}

func TestSteerLive_GivesUpAfterSteerLiveAttempts(t *testing.T) {
	f := &fakeSession{token: "3", rivals: []string{"3.1", "3.2", "3.3", "3.4"}}
	_, err := steerLive(f.read, f.steer, signals.SteerRequest{Text: "go left"})
	rej, ok := rejection.As(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, signals.RejectStaleTurn, rej.Type)
	require.Len(t, f.sent, SteerLiveAttempts)
}

func TestSteerLive_TurnEndedWhileRetryingIsNoLiveTurn(t *testing.T) {
	f := &fakeSession{token: "3", rivals: []string{"3.1", ""}}
	_, err := steerLive(f.read, f.steer, signals.SteerRequest{Text: "go left"})
	rej, ok := rejection.As(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, signals.RejectNoLiveTurn, rej.Type)
	require.Len(t, f.sent, 2)
}

func TestSteerLive_OtherRefusalsPassThrough(t *testing.T) {
	for _, err := range []error{
		rejection.Error(signals.Reject(signals.RejectNoSteerChannel, "turn 3 cannot take steers")),
		rejection.Error(signals.Reject(signals.RejectSessionClosed, "closed")),
		errors.New("connection refused"),
	} {
		f := &fakeSession{token: "3", other: err}
		_, got := steerLive(f.read, f.steer, signals.SteerRequest{Text: "go left"})
		require.Equal(t, err, got)
		require.Len(t, f.sent, 1, "%v is not retried", err)
	}
}

func TestSteerLive_ReadErrorSendsNothing(t *testing.T) {
	f := &fakeSession{}
	boom := errors.New("unreachable")
	_, err := steerLive(func() (string, error) { return "", boom }, f.steer, signals.SteerRequest{Text: "x"})
	require.ErrorIs(t, err, boom)
	require.Empty(t, f.sent)
}

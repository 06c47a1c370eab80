package deck

// The JSON half of the API: reads (sessions list, status, events) and the writes that map
// one to one onto the session updates, with rejections turned into HTTP statuses.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/tacp-dev/tacp/checkpoint"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
	"github.com/tacp-dev/tacp/tacpclient"
)

// callTimeout bounds one call into Temporal: an update answers in well under it, and a
// browser should see an error rather than hang when the cluster is away.
const callTimeout = 30 * time.Second

// apiError is the body of every refusal.
type apiError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Details any    `json:"details,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, typ, msg string, details any) {
	writeJSON(w, code, apiError{Type: typ, Message: msg, Details: details})
}

// RejectionStatus is the HTTP status of a rejection type: 404 for what does not exist, 409
// for what the session's state refuses now, 400 for a request that is wrong in itself.
func RejectionStatus(typ string) int {
	switch typ {
	case signals.RejectUnknownSession, signals.RejectUnknownRequest:
		return http.StatusNotFound
	case signals.RejectQueueFull, signals.RejectStaleTurn, signals.RejectNoLiveTurn,
		signals.RejectClientMsgIDReuse, signals.RejectNoSteerChannel, signals.RejectSessionClosed:
		return http.StatusConflict
	case signals.RejectForbidden:
		return http.StatusForbidden
	case signals.RejectInvalidRequest, signals.RejectInvalidOption:
		return http.StatusBadRequest
	default:
		return http.StatusConflict
	}
}

// fail answers err: a rejection with its status and type, anything else as the cluster
// being unreachable (logged here, not shown: it may name internal addresses).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if rej, ok := rejection.As(err); ok {
		writeError(w, RejectionStatus(rej.Type), rej.Type, rej.Message, rej.Details)
		return
	}
	// The call's own deadline passed (context), or the server's did while it waited on its
	// store (a DeadlineExceeded status); either way Temporal was slow, not wrong.
	var serverDeadline *serviceerror.DeadlineExceeded
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &serverDeadline) {
		s.log.Warn("deck call timed out", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusGatewayTimeout, "timeout", "Temporal did not answer in time", nil)
		return
	}
	if r.Context().Err() != nil {
		return // the caller went away
	}
	s.log.Warn("deck call failed", "path", r.URL.Path, "err", err)
	writeError(w, http.StatusBadGateway, "unavailable", "Temporal call failed; see the deck's log", nil)
}

// decode reads r's JSON body into v; on any fault it answers and returns false.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "the body must be JSON (Content-Type: application/json)", nil)
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			err = errors.New("trailing data after the JSON value")
		}
	}
	if err == nil {
		return true
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is over %d bytes", MaxBodyBytes), nil)
		return false
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("empty body")
	}
	writeError(w, http.StatusBadRequest, signals.RejectInvalidRequest, "malformed JSON: "+err.Error(), nil)
	return false
}

func callCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), callTimeout)
}

// intParam reads the integer query parameter name (def when absent) within [lo, hi].
func intParam(w http.ResponseWriter, r *http.Request, name string, def, lo, hi int64) (int64, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		writeError(w, http.StatusBadRequest, signals.RejectInvalidRequest, fmt.Sprintf("%s must be an integer in [%d, %d]", name, lo, hi), nil)
		return 0, false
	}
	return n, true
}

type sessionsResult struct {
	Sessions []tacpclient.SessionInfo `json:"sessions"`
}

// listSessions lists sessions from visibility: those awaiting approval first (asked for on
// their own, so that none falls past the limit), then running ones, newest first.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request, _ string) {
	limit, ok := intParam(w, r, "limit", 100, 1, 1000)
	if !ok {
		return
	}
	ctx, cancel := callCtx(r)
	defer cancel()
	// A person's list reads only what they may see (signals.VisibleWhere), so that theirs
	// do not fall past the limit behind others'; each row is still checked (sees).
	who := s.person(r)
	visible := signals.VisibleWhere(*who, s.sharing)
	awaiting, err := s.c.ListWhere(ctx, and(tacpclient.AwaitingApprovalWhere, visible), int(limit))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	all, err := s.c.ListWhere(ctx, visible, int(limit))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	seen := map[string]bool{}
	out := []tacpclient.SessionInfo{}
	for _, l := range [][]tacpclient.SessionInfo{awaiting, all} {
		for _, si := range l {
			if !seen[si.SessionID] && s.sees(who, si.Access) {
				seen[si.SessionID] = true
				out = append(out, si)
			}
		}
	}
	rank := func(si tacpclient.SessionInfo) int {
		switch {
		case si.AwaitingApproval && si.Running:
			return 0
		case si.Running:
			return 1
		default:
			return 2
		}
	}
	slices.SortStableFunc(out, func(a, b tacpclient.SessionInfo) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), b.StartedAt.Compare(a.StartedAt))
	})
	writeJSON(w, http.StatusOK, sessionsResult{Sessions: out})
}

// and joins visibility queries; an empty one is no condition.
func and(qs ...string) string {
	var out []string
	for _, q := range qs {
		if q != "" {
			out = append(out, q)
		}
	}
	return strings.Join(out, " AND ")
}

// profiles answers with the agent profiles the workers offer (what a prompt's agent may
// name for a new session).
func (s *Server) profiles(w http.ResponseWriter, r *http.Request, _ string) {
	ctx, cancel := callCtx(r)
	defer cancel()
	ps, err := s.c.Profiles(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"profiles": ps})
}

// statusResult is the status snapshot with the server's clock, so that a phone whose clock
// is off still counts a permission's deadline down right.
type statusResult struct {
	signals.Status
	ServerTime time.Time `json:"server_time"`
}

func (s *Server) status(w http.ResponseWriter, r *http.Request, _ string) {
	ctx, cancel := callCtx(r)
	defer cancel()
	st, err := s.c.Status(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// The session's status is the same from every worker; what the workers offer (the
	// profiles, their sandboxes) is the Profiles workflow's, asked beside it.
	if len(st.Profiles) == 0 {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		st.Profiles, _ = s.c.Profiles(pctx)
		pcancel()
	}
	writeJSON(w, http.StatusOK, statusResult{Status: st, ServerTime: time.Now().UTC()})
}

func (s *Server) events(w http.ResponseWriter, r *http.Request, _ string) {
	after, ok := intParam(w, r, "after", 0, 0, 1<<62)
	if !ok {
		return
	}
	limit, ok := intParam(w, r, "limit", 0, 0, 1000)
	if !ok {
		return
	}
	ctx, cancel := callCtx(r)
	defer cancel()
	res, err := s.c.Events(ctx, r.PathValue("id"), after, int(limit))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if res.Events == nil {
		res.Events = []signals.Event{}
	}
	writeJSON(w, http.StatusOK, res)
}

// promptRequest is what the deck takes for a prompt. A new session gets the agent profile
// Agent names (one the worker offers: GET /api/profiles; default: the worker's) and its own
// workspace on the worker: a deck token never chooses a program or a directory.
type promptRequest struct {
	Text            string `json:"text"`
	ClientMessageID string `json:"client_message_id,omitempty"`
	Agent           string `json:"agent,omitempty"`
	// Policy is a new session's permission level (an existing one keeps its own).
	Policy string `json:"policy,omitempty"`
	// Sharing and SharedWith are a new session's sharing rule (default: the deck's) and
	// the people and groups it is shared with; the session is its creator's.
	Sharing    string          `json:"sharing,omitempty"`
	SharedWith []signals.Share `json:"shared_with,omitempty"`
}

func (s *Server) prompt(w http.ResponseWriter, r *http.Request, _ string) {
	act(s, w, r, "deck prompt", func(ctx context.Context, id string, req promptRequest) (signals.PromptResult, error) {
		cfg := signals.SessionConfig{SessionID: id, Agent: req.Agent, Policy: req.Policy,
			Access: signals.Access{Owner: s.person(r).Name, Sharing: req.Sharing, SharedWith: req.SharedWith}}
		return s.c.Prompt(ctx, cfg, signals.PromptRequest{Text: req.Text, ClientMessageID: req.ClientMessageID, By: s.who(r)})
	}, func(res signals.PromptResult) []any { return []any{"turn", res.TurnID, "duplicate", res.Duplicate} })
}

type steerRequest struct {
	Text           string `json:"text"`
	ExpectedTurnID string `json:"expected_turn_id"`
	ClientMsgID    string `json:"client_msg_id,omitempty"`
}

func (s *Server) steer(w http.ResponseWriter, r *http.Request, _ string) {
	act(s, w, r, "deck steer", func(ctx context.Context, id string, req steerRequest) (signals.SteerResult, error) {
		if req.ExpectedTurnID == "" {
			// No token: steer whatever runs, by the rule every client shares.
			return s.c.SteerLive(ctx, id, req.Text, tacpclient.SteerLiveOptions{ClientMsgID: req.ClientMsgID})
		}
		if req.ClientMsgID == "" {
			req.ClientMsgID = signals.NewID()
		}
		return s.c.Steer(ctx, id, signals.SteerRequest{Text: req.Text, ExpectedTurnID: req.ExpectedTurnID, ClientMsgID: req.ClientMsgID, By: s.who(r)})
	}, func(res signals.SteerResult) []any {
		return []any{"outcome", res.Outcome, "next", res.NextExpectedTurnID}
	})
}

type cancelRequest struct {
	TurnID int64 `json:"turn_id,omitempty"`
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request, _ string) {
	act(s, w, r, "deck cancel", func(ctx context.Context, id string, req cancelRequest) (signals.CancelResult, error) {
		return s.c.Cancel(ctx, id, signals.CancelRequest{TurnID: req.TurnID, By: s.who(r)})
	}, func(res signals.CancelResult) []any { return []any{"outcome", res.Outcome} })
}

type respondRequest struct {
	OptionID    string `json:"option_id,omitempty"`
	Outcome     string `json:"outcome,omitempty"`
	ClientMsgID string `json:"client_msg_id,omitempty"`
}

func (s *Server) permissionRespond(w http.ResponseWriter, r *http.Request, _ string) {
	act(s, w, r, "deck permission answer", func(ctx context.Context, id string, req respondRequest) (signals.PermissionRespondResult, error) {
		return s.c.PermissionRespond(ctx, id, signals.PermissionRespondRequest{
			RequestID: r.PathValue("request"), OptionID: req.OptionID, Outcome: req.Outcome, ClientMsgID: req.ClientMsgID,
			AnsweredBy: s.who(r),
		})
	}, func(res signals.PermissionRespondResult) []any {
		return []any{"request", res.RequestID, "outcome", res.Resolution.Outcome, "option", res.Resolution.OptionID, "decided_by", res.Resolution.DecidedBy}
	})
}

func (s *Server) setPolicy(w http.ResponseWriter, r *http.Request, _ string) {
	act(s, w, r, "deck policy", func(ctx context.Context, id string, req signals.SetPolicyRequest) (signals.SetPolicyResult, error) {
		return s.c.SetPolicy(ctx, id, signals.SetPolicyRequest{Level: req.Level, By: s.who(r)})
	}, func(res signals.SetPolicyResult) []any { return []any{"level", res.Level} })
}

func (s *Server) forget(w http.ResponseWriter, r *http.Request, _ string) {
	act(s, w, r, "deck forget", s.c.PermissionForget, func(res signals.PermissionForgetResult) []any { return []any{"forgotten", res.Forgotten} })
}

// act serves one state-changing call: it decodes the body into Req, makes the call for the
// session of the path within the request's deadline, and answers with its result (logging
// what was decided, never the text) or its refusal.
func act[Req, Res any](s *Server, w http.ResponseWriter, r *http.Request, what string,
	call func(ctx context.Context, id string, req Req) (Res, error), logged func(Res) []any) {
	var req Req
	if !decode(w, r, &req) {
		return
	}
	ctx, cancel := callCtx(r)
	defer cancel()
	id := r.PathValue("id")
	res, err := call(ctx, id, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info(what, append([]any{"session", id}, logged(res)...)...)
	writeJSON(w, http.StatusOK, res)
}

type rewindRequest struct {
	ToTurn int64 `json:"to_turn"`
}

// rewind goes back to the end of a turn of the session as a new session of the person's
// (tacpclient.Client.Rewind, starter rewind): its agent remembers the conversation to that turn
// and its first turn starts with the files the turn left. It needs watch on the session and
// a controller's token: it reads the session and starts another.
func (s *Server) rewind(w http.ResponseWriter, r *http.Request, _ string) {
	act(s, w, r, "deck rewind", func(ctx context.Context, id string, req rewindRequest) (signals.SessionConfig, error) {
		return s.c.Rewind(ctx, id, req.ToTurn, signals.ForkRequest{Owner: s.person(r).Name})
	}, func(cfg signals.SessionConfig) []any { return []any{"new", cfg.SessionID} })
}

// maxDiffBytes bounds the diff one answer carries: a turn that rewrote a large tree is
// shown in part, and says so.
const maxDiffBytes = 1 << 20

type diffResult struct {
	Turn      int64  `json:"turn"`
	Diff      string `json:"diff"`
	Truncated bool   `json:"truncated,omitempty"`
}

// diff answers with what a turn changed in the session's workspace (starter diff), from the
// workers' checkpoint store: ?turn=N (default: the last checkpointed turn), ?stat=1 for a
// diffstat. 404 no_checkpoint when the store holds none.
func (s *Server) diff(w http.ResponseWriter, r *http.Request, _ string) {
	turn, ok := intParam(w, r, "turn", 0, 0, 1<<40)
	if !ok {
		return
	}
	if s.checkpoints.URL == "" {
		writeError(w, http.StatusNotFound, "no_checkpoint", "this deck reads no checkpoint store (starter web --checkpoint-store)", nil)
		return
	}
	ctx, cancel := callCtx(r)
	defer cancel()
	out, err := s.checkpoints.Diff(ctx, r.PathValue("id"), turn, r.URL.Query().Get("stat") == "1")
	if errors.Is(err, checkpoint.ErrNone) {
		writeError(w, http.StatusNotFound, "no_checkpoint", err.Error(), nil)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res := diffResult{Turn: turn, Diff: out}
	if len(out) > maxDiffBytes {
		res.Diff, res.Truncated = strings.ToValidUTF8(out[:maxDiffBytes], ""), true
	}
	writeJSON(w, http.StatusOK, res)
}

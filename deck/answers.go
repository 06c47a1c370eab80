package deck

// Answers to a person's requests from the deck (contract §11): every answer records who gave
// it. A deck token may be named (--token alice=SECRET): its answers record "deck:alice"; an
// unnamed one records "deck:controller token". The deck answers permissions
// (permissionRespond), questions (elicitationRespond: POST
// /api/sessions/{id}/questions/{request} {action, content}) and a limited turn's retry
// (retryNow: POST /api/sessions/{id}/retry).

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/tacp-dev/tacp/signals"
)

// TokenName splits a --token value NAME=SECRET into its name and secret. A value whose part
// before the first '=' is not a name of [A-Za-z0-9._-] (1-64), or whose rest is only '='
// (a base64 token's padding), is an unnamed secret.
func TokenName(v string) (name, secret string) {
	n, s, ok := strings.Cut(v, "=")
	if !ok || strings.Trim(s, "=") == "" || signals.ValidateProfileName(n) != nil {
		return "", v
	}
	return n, s
}

// who names the person behind r's token, for answered_by.
func (s *Server) who(r *http.Request) string {
	t, _ := credential(r)
	k, _ := s.tokens.find(t)
	return k.answeredBy()
}

type questionAnswer struct {
	Action  string          `json:"action"`
	Content json.RawMessage `json:"content,omitempty"`
}

func (s *Server) elicitationRespond(w http.ResponseWriter, r *http.Request, _ string) {
	act(s, w, r, "deck question answer", func(ctx context.Context, id string, req questionAnswer) (signals.ElicitationRespondResult, error) {
		return s.c.ElicitationRespond(ctx, id, signals.ElicitationRespondRequest{
			RequestID: r.PathValue("request"), Action: req.Action, Content: req.Content, AnsweredBy: s.who(r),
		})
	}, func(res signals.ElicitationRespondResult) []any {
		// never the content: it is the person's answer
		return []any{"request", res.RequestID, "action", res.Resolution.Action, "answered_by", res.Resolution.AnsweredBy}
	})
}

type retryRequest struct {
	TurnID int64 `json:"turn_id,omitempty"`
}

func (s *Server) retryNow(w http.ResponseWriter, r *http.Request, _ string) {
	act(s, w, r, "deck retry now", func(ctx context.Context, id string, req retryRequest) (signals.RetryNowResult, error) {
		return s.c.RetryNow(ctx, id, signals.RetryNowRequest{TurnID: req.TurnID, AnsweredBy: s.who(r)})
	}, func(res signals.RetryNowResult) []any { return []any{"turn", res.TurnID} })
}

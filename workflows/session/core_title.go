package session

// set_title in the session core (contract §3): a person names the session. The title is
// session state (status.title, Current Details, carried across continue-as-new), journaled
// as title.changed when it changes; setting the title it has journals nothing. It is the
// update the table promises to make cheap: its wire names and types in signals/title.go,
// its entry in core_updates.go, its rule and effect here.

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tacp-dev/tacp/signals"
)

func (s *Core) checkSetTitle(req signals.SetTitleRequest) *signals.Rejection {
	if rej := s.forbidden(req.ViewerID); rej != nil {
		return rej
	}
	if err := signals.ValidateBy(req.By); err != nil {
		return signals.Reject(signals.RejectInvalidRequest, "%v", err)
	}
	switch {
	case len(req.Title) > signals.MaxTitleBytes:
		return signals.Reject(signals.RejectInvalidRequest, "title: at most %d bytes, not %d", signals.MaxTitleBytes, len(req.Title))
	case !utf8.ValidString(req.Title):
		return signals.Reject(signals.RejectInvalidRequest, "title is not valid UTF-8")
	case strings.ContainsFunc(req.Title, unicode.IsControl):
		return signals.Reject(signals.RejectInvalidRequest, "title: one line, no control characters")
	}
	return nil
}

func (s *Core) setTitle(now time.Time, req signals.SetTitleRequest) (signals.SetTitleResult, error) {
	title := strings.TrimSpace(req.Title)
	prev := s.Title
	if title != prev {
		s.Title = title
		s.journal(now, signals.EventTitleChanged, s.turnID(), signals.TitleChangedData{Title: title, Previous: prev, ViewerID: req.ViewerID, By: req.By})
	}
	return signals.SetTitleResult{Title: title, Previous: prev}, nil
}

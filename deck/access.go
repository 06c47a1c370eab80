package deck

// Which sessions a person may see and act on at the deck. A named token is a person: the
// sessions they create are theirs, and each call on a session is checked against what the
// session records (its owner, sharing rule and shares; signals.RoleFor) under the deck's
// own rule for sessions that name none (Options.Sharing). A session that is not theirs to
// see answers 404 as an unknown one would; one they may only watch answers 403 to a write.
// An unnamed token stands for the whole deployment and has its role on every session.

import (
	"context"
	"net/http"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
)

// person is r's identity as signals names it (Name "" for an unnamed token).
func (s *Server) person(r *http.Request) *signals.Identity {
	id, ok := s.identity(r)
	if !ok {
		return &signals.Identity{}
	}
	return &signals.Identity{Name: id.Name, Groups: id.Groups, Role: id.Role}
}

// allowed checks that r's person may need (signals.RoleObserver: see; RoleController: act)
// on session id. create admits a session that does not exist yet (a prompt starts it).
func (s *Server) allowed(ctx context.Context, r *http.Request, id, need string, create bool) error {
	who := s.person(r)
	if who.Name == "" {
		return nil
	}
	acc, err := s.c.Access(ctx, id)
	if err != nil {
		if rej, ok := rejection.As(err); ok && rej.Type == signals.RejectUnknownSession && create {
			return nil
		}
		return err
	}
	switch signals.RoleFor(acc, *who, s.sharing) {
	case "":
		return signals.Reject(signals.RejectUnknownSession, "no session %s", id)
	case signals.RoleObserver:
		if need == signals.RoleController {
			return signals.Reject(signals.RejectForbidden, "session %s is shared with you to watch, not to act", id)
		}
	}
	return nil
}

// sees reports whether r's person may see a session of access a (the sessions list).
func (s *Server) sees(who *signals.Identity, a signals.Access) bool {
	return who.Name == "" || signals.RoleFor(a, *who, s.sharing) != ""
}

// watch admits h's request when its person may see the session of the path.
func (s *Server) watch(h handler) handler {
	return s.guard(signals.RoleObserver, false, h)
}

// control admits h's request when its person may act on the session of the path; create
// also admits a session that does not exist yet.
func (s *Server) control(create bool, h handler) handler {
	return s.guard(signals.RoleController, create, h)
}

func (s *Server) guard(need string, create bool, h handler) handler {
	return func(w http.ResponseWriter, r *http.Request, role string) {
		ctx, cancel := callCtx(r)
		err := s.allowed(ctx, r, r.PathValue("id"), need, create)
		cancel()
		if err != nil {
			s.fail(w, r, err)
			return
		}
		h(w, r, role)
	}
}

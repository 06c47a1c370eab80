package deck

// GET /acp: tacp's ACP face (package gateway) over a WebSocket, for editors on other
// machines (through `starter acp --remote`) and any ACP client that speaks WebSocket,
// with no Temporal credentials on the client. One socket is one ACP connection, one
// JSON-RPC message per text frame, with the same behaviour as `starter acp` on stdio. The
// token is checked before the upgrade: a missing or wrong one gets 401 and not a single ACP
// message. Controller tokens act; observer tokens attach as observers. A token holds at
// most Options.MaxACPPerToken sockets at once (429 beyond), and a socket whose client sends
// no ACP message within the gateway's FirstMessageTimeout is closed.

import (
	"context"
	"errors"
	"net/http"

	"github.com/coder/websocket"

	"github.com/tacp-dev/tacp/gateway"
	"github.com/tacp-dev/tacp/internal/wsline"
	"github.com/tacp-dev/tacp/signals"
)

// ACPSubprotocol is the WebSocket subprotocol /acp negotiates when the client offers it
// (none is required).
const ACPSubprotocol = "acp"

func (s *Server) acp(w http.ResponseWriter, r *http.Request) {
	t, _ := credential(r)
	role := s.tokens.role(t)
	if role == "" {
		s.log.Info("acp connection refused", "remote", r.RemoteAddr)
		unauthorized(w)
		return
	}
	release, ok := s.sockets.take(r)
	if !ok {
		s.log.Info("acp connection refused: the token's sockets are at the cap", "role", role, "remote", r.RemoteAddr, "cap", s.sockets.max)
		s.sockets.refuse(w)
		return
	}
	defer release()
	// Accept refuses a request from another site's page (its Origin is not this host) and
	// a plain GET (426).
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{ACPSubprotocol}})
	if err != nil {
		s.log.Info("acp upgrade refused", "remote", r.RemoteAddr, "err", err)
		return
	}
	// r's context still ends when the deck shuts down (starter web's BaseContext); after
	// the upgrade it no longer notices the client leaving: the socket's reads do.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	st := wsline.New(ctx, c)
	go st.KeepAlive(ctx, s.alive, s.alive)
	s.log.Info("acp connected", "role", role, "remote", r.RemoteAddr)
	err = s.gw.ServeConn(ctx, st, st, gateway.ConnOptions{Observe: role != signals.RoleController, Person: s.who(r), Identity: s.person(r), Sharing: s.sharing})
	code := websocket.StatusNormalClosure
	switch {
	case r.Context().Err() != nil:
		code = websocket.StatusGoingAway // the deck is stopping: the client reconnects
	case errors.Is(err, gateway.ErrSilent):
		code = websocket.StatusPolicyViolation // a socket that never spoke ACP
	}
	_ = st.Close(code, "")
	s.log.Info("acp disconnected", "role", role, "remote", r.RemoteAddr, "err", err)
}

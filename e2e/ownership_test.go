package e2e

// Sessions belong to people: at the deck and at its /acp, alice's session is hers, and what
// bob (a controller token) and carol (an observer token) may do with it follows the
// session's sharing rule, or the deck's when it names none; a share lifts one person.

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/deck"
	"github.com/tacp-dev/tacp/gateway"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/signals/rejection"
	"github.com/tacp-dev/tacp/tacpclient"
)

// teamDeck is a deck with three people: alice and bob controllers, carol an observer.
type teamDeck struct {
	*testDeck
	alice, bob, carol string
}

func newTeamDeck(t *testing.T, sharing string) *teamDeck {
	t.Helper()
	d := &teamDeck{testDeck: &testDeck{}, alice: "alice-" + signals.NewID(), bob: "bob-" + signals.NewID(), carol: "carol-" + signals.NewID()}
	gw := gateway.New(gateway.Options{Client: sc, Agent: gatewayAgent(), Workspace: projectDir(t), IgnoreClientCwd: true})
	h, err := deck.New(deck.Options{
		Client: sc, ControllerTokens: []string{"alice=" + d.alice, "bob=" + d.bob}, ObserverTokens: []string{"carol=" + d.carol},
		PollInterval: 50 * time.Millisecond, Sharing: sharing, Gateway: gw, Logger: deckLog(t),
	})
	require.NoError(t, err)
	d.Server = httptest.NewServer(h)
	t.Cleanup(func() { d.CloseClientConnections(); d.Close() })
	return d
}

// may is what one person could do with a session at the deck: see it listed, read its
// status, prompt it.
type may struct{ list, read, prompt bool }

func (d *teamDeck) tried(t *testing.T, token, id string) may {
	t.Helper()
	var m may
	var list struct{ Sessions []tacpclient.SessionInfo }
	d.call(t, "GET", "/api/sessions?limit=1000", token, nil).decode(t, &list)
	for _, s := range list.Sessions {
		m.list = m.list || s.SessionID == id
	}
	st := d.call(t, "GET", sessPath(id), token, nil)
	m.read = st.Code == http.StatusOK
	if !m.read {
		require.Equal(t, http.StatusNotFound, st.Code, "a session not yours to see is not there: %s", st.Body)
		require.Equal(t, signals.RejectUnknownSession, st.errType(t))
		require.Equal(t, http.StatusNotFound, d.call(t, "GET", sessPath(id, "/events"), token, nil).Code)
		require.Equal(t, http.StatusNotFound, d.call(t, "GET", sessPath(id, "/stream"), token, nil).Code)
	}
	pr := d.call(t, "POST", sessPath(id, "/prompt"), token, map[string]string{"text": "/chunks 1"})
	m.prompt = pr.Code == http.StatusOK
	if !m.prompt {
		require.Contains(t, []int{http.StatusForbidden, http.StatusNotFound}, pr.Code, string(pr.Body))
		if m.read {
			require.Equal(t, http.StatusForbidden, pr.Code, "a session you may watch refuses your write: %s", pr.Body)
		}
		for _, path := range []string{"/cancel", "/policy"} {
			body := map[string]any{}
			if path == "/policy" {
				body["level"] = "allow_all"
			}
			require.Contains(t, []int{http.StatusForbidden, http.StatusNotFound}, d.call(t, "POST", sessPath(id, path), token, body).Code, path)
		}
	}
	return m
}

func TestOwnershipMatrixAtTheDeck(t *testing.T) {
	t.Parallel()
	for _, tc := range ownershipMatrix {
		t.Run(tc.sharing, func(t *testing.T) {
			t.Parallel()
			d := newTeamDeck(t, tc.sharing)
			id := session(t)
			r := d.call(t, "POST", sessPath(id, "/prompt"), d.alice, map[string]string{"text": "/chunks 2"})
			require.Equal(t, http.StatusOK, r.Code, string(r.Body))
			endedWith(t, id, 1, "end_turn")

			var st signals.Status
			d.call(t, "GET", sessPath(id), d.alice, nil).decode(t, &st)
			require.Equal(t, "alice", st.Owner, "the session is its creator's")
			require.Equal(t, may{true, true, true}, d.tried(t, d.alice, id), "alice")
			require.Equal(t, tc.bob, d.tried(t, d.bob, id), "bob")
			require.Equal(t, tc.carol, d.tried(t, d.carol, id), "carol")

			evs := allEvents(t, id)
			var started signals.SessionStartedData
			require.NoError(t, json.Unmarshal(evs[0].Data, &started))
			require.Equal(t, "alice", started.Owner, "session.started names the owner")
			for _, ev := range evs {
				if ev.Kind == signals.EventPromptAccepted {
					var p signals.PromptAcceptedData
					require.NoError(t, json.Unmarshal(ev.Data, &p))
					require.Contains(t, []string{"deck:alice", "deck:bob"}, p.By)
					if tc.bob.prompt {
						continue
					}
					require.Equal(t, "deck:alice", p.By, "no refused prompt reached the session")
				}
			}
		})
	}
}

// A private session shared with bob and with carol's group: bob acts, carol watches (her
// token is an observer's), and the list shows the owner from the search attribute.
func TestOwnershipSharesLiftOnePersonOrGroup(t *testing.T) {
	t.Parallel()
	d := newTeamDeck(t, signals.SharingTeamAct)
	id := session(t)
	r := d.call(t, "POST", sessPath(id, "/prompt"), d.alice, map[string]any{
		"text": "/chunks 2", "sharing": signals.SharingPrivate,
		"shared_with": []signals.Share{{Who: "bob", Role: signals.RoleController}, {Who: "carol", Role: signals.RoleController}},
	})
	require.Equal(t, http.StatusOK, r.Code, string(r.Body))
	endedWith(t, id, 1, "end_turn")
	require.Equal(t, may{true, true, true}, d.tried(t, d.bob, id), "bob, shared as a controller")
	require.Equal(t, may{true, true, false}, d.tried(t, d.carol, id), "carol: an observer token never acts")

	other := session(t)
	r = d.call(t, "POST", sessPath(other, "/prompt"), d.alice, map[string]any{"text": "/chunks 1", "sharing": "public"})
	require.Equal(t, http.StatusBadRequest, r.Code, "an unknown sharing rule is refused: %s", r.Body)
	_, err := sc.Status(ctxFor(t, 10*time.Second), other)
	rej, ok := rejection.As(err)
	require.True(t, ok && rej.Type == signals.RejectUnknownSession, "a refused prompt starts no session: %v", err)

	var list struct{ Sessions []tacpclient.SessionInfo }
	d.call(t, "GET", "/api/sessions?limit=1000", d.alice, nil).decode(t, &list)
	found := false
	for _, s := range list.Sessions {
		if s.SessionID == id {
			found = true
			require.Equal(t, "alice", s.Owner)
			require.Equal(t, signals.SharingPrivate, s.Sharing)
			require.Len(t, s.SharedWith, 2)
		}
	}
	require.True(t, found, "alice's session in her list")
}

// socket is an ACP client on the deck's /acp with one person's token, which calls itself
// "deck:alice" whoever it is, and allows what it is asked.
func (d *teamDeck) socket(t *testing.T, token string) *remotePeer {
	t.Helper()
	p := dialACPAs(t, "ws"+strings.TrimPrefix(d.URL, "http")+"/acp", token, &acp.Implementation{Name: "deck:alice", Version: "1"})
	p.answer = allowOnce
	return p
}

// ownershipMatrix is what bob (a controller token) and carol (an observer token) may do with
// alice's session under each of the deck's sharing rules.
var ownershipMatrix = []struct {
	sharing    string
	bob, carol may
}{
	{signals.SharingPrivate, may{}, may{}},
	{signals.SharingTeamWatch, may{true, true, false}, may{true, true, false}},
	{signals.SharingTeamAct, may{true, true, true}, may{true, true, false}},
}

func TestOwnershipMatrixAtACP(t *testing.T) {
	t.Parallel()
	for _, tc := range ownershipMatrix {
		t.Run(tc.sharing, func(t *testing.T) {
			t.Parallel()
			d := newTeamDeck(t, tc.sharing)
			alice := d.socket(t, d.alice)
			res, err := alice.conn.NewSession(ctxFor(t, 30*time.Second), acp.NewSessionRequest{Cwd: "/alice/laptop", McpServers: []acp.McpServer{}})
			require.NoError(t, err)
			id := string(res.SessionId)
			_, err = alice.prompt(id, "/chunks 2")
			require.NoError(t, err)
			st, err := sc.Status(ctxFor(t, 10*time.Second), id)
			require.NoError(t, err)
			require.Equal(t, "alice", st.Owner, "the person of the token, not the client's word")

			// carol before bob: bob's session/close, when he may, ends the session.
			for _, who := range []struct {
				name, token string
				want        may
			}{{"carol", d.carol, tc.carol}, {"bob", d.bob, tc.bob}} {
				name, want := who.name, who.want
				p := d.socket(t, who.token)
				var got may
				require.Eventually(t, func() bool {
					l, err := p.conn.ListSessions(ctxFor(t, 30*time.Second), acp.ListSessionsRequest{})
					require.NoError(t, err)
					got.list = false
					for _, s := range l.Sessions {
						got.list = got.list || string(s.SessionId) == id
					}
					return got.list == want.list // visibility lags a start by a moment
				}, 30*time.Second, 100*time.Millisecond, "%s's session/list", name)
				_, err := p.conn.LoadSession(ctxFor(t, 30*time.Second), acp.LoadSessionRequest{SessionId: acp.SessionId(id), Cwd: "/x", McpServers: []acp.McpServer{}})
				got.read = err == nil
				_, err = p.prompt(id, "/chunks 1")
				got.prompt = err == nil
				require.Equal(t, want, got, name)
				_, err = p.conn.UnstableForkSession(ctxFor(t, 30*time.Second), acp.UnstableForkSessionRequest{SessionId: acp.SessionId(id), Cwd: "/x", McpServers: []acp.UnstableMcpServer{}})
				if !want.read {
					require.Error(t, err, "%s forks no conversation they may not read", name)
				}
				_, err = p.conn.CloseSession(ctxFor(t, 30*time.Second), acp.CloseSessionRequest{SessionId: acp.SessionId(id)})
				require.Equal(t, want.prompt, err == nil, "%s's session/close", name)
			}
			var closedBy []string
			for _, ev := range allEvents(t, id) {
				if ev.Kind == signals.EventSessionClosed {
					var c signals.SessionClosedData
					require.NoError(t, json.Unmarshal(ev.Data, &c))
					closedBy = append(closedBy, c.By)
				}
			}
			if tc.bob.prompt {
				require.Len(t, closedBy, 1)
				require.True(t, strings.HasPrefix(closedBy[0], "deck:bob (acp:deck:alice 1, viewer "), closedBy[0])
			} else {
				require.Empty(t, closedBy, "nobody but alice may close it")
			}
		})
	}
}

// The CLI speaks for the deployment: its --owner names whose a new session is, and a
// named person of a deck then finds it theirs; status and list show the owner.
func TestOwnershipFromTheCLI(t *testing.T) {
	t.Parallel()
	d := newTeamDeck(t, signals.SharingPrivate)
	id := session(t)
	out, errOut, code := starter(t, "prompt", "--session", id, "--owner", "bob", "--share", "carol", "/chunks 1")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "chunk 1")
	out, _, code = starter(t, "status", "--session", id)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "owner     bob, sharing the deck's rule, shared with carol=observer")
	require.Eventually(t, func() bool {
		out, _, _ := starter(t, "list")
		return strings.Contains(out, id) && strings.Contains(out, "owner bob")
	}, 30*time.Second, 100*time.Millisecond, "list shows the owner")
	require.Equal(t, may{true, true, true}, d.tried(t, d.bob, id), "bob's")
	require.Equal(t, may{true, true, false}, d.tried(t, d.carol, id), "shared with carol to watch")
	require.Equal(t, may{}, d.tried(t, d.alice, id), "not alice's")

	_, errOut, code = starter(t, "title", "--session", id, "--as", "ops:carl", "tidy up")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = starter(t, "close", "--session", id, "--as", "ops:carl")
	require.Equal(t, 0, code, errOut)
	by := map[string]string{}
	for _, ev := range allEvents(t, id) {
		var d struct{ By string }
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		by[ev.Kind] = d.By
	}
	require.Equal(t, "ops:carl", by[signals.EventTitleChanged], "title_changed names who set it")
	require.Equal(t, "ops:carl", by[signals.EventSessionClosed], "session.closed names who closed it")

	_, errOut, code = starter(t, "prompt", "--session", session(t), "--share", "bob=admin", "hi")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `role "admin"`)
}

// A person who may only watch a session watches it as an observer, whatever their token's
// role: their lease does not hold the session's turns through its grace window.
func TestOwnershipWatchersAttachAsObservers(t *testing.T) {
	t.Parallel()
	d := newTeamDeck(t, signals.SharingTeamWatch)
	id := session(t)
	r := d.call(t, "POST", sessPath(id, "/prompt"), d.alice, map[string]string{"text": "/chunks 1"})
	require.Equal(t, http.StatusOK, r.Code, string(r.Body))
	endedWith(t, id, 1, "end_turn")
	bob := d.socket(t, d.bob)
	require.NoError(t, bob.load(id))
	st, err := sc.Status(ctxFor(t, 10*time.Second), id)
	require.NoError(t, err)
	require.Len(t, st.Viewers, 1, "bob's socket is the session's one viewer")
	require.Equal(t, signals.RoleObserver, st.Viewers[0].Role, "bob may only watch: he watches as an observer")
}

// The visibility query a list reads through (signals.VisibleWhere) selects exactly the
// sessions signals.RoleFor lets a person see, for every shape of access and every door rule:
// the deck's list and /acp's session/list read a person's sessions, not the namespace's
// newest with the others filtered out afterwards.
func TestOwnershipListQueryMatchesTheRule(t *testing.T) {
	t.Parallel()
	person, other, group := "p-"+signals.NewID()[:8], "o-"+signals.NewID()[:8], "g-"+signals.NewID()[:8]
	accesses := []signals.Access{
		{},
		{Sharing: signals.SharingPrivate},
		{Sharing: signals.SharingTeamWatch},
		{Owner: person},
		{Owner: person, Sharing: signals.SharingPrivate},
		{Owner: other},
		{Owner: other, Sharing: signals.SharingPrivate},
		{Owner: other, Sharing: signals.SharingTeamWatch},
		{Owner: other, Sharing: signals.SharingTeamAct},
		{Owner: other, Sharing: signals.SharingPrivate, SharedWith: []signals.Share{{Who: person, Role: signals.RoleObserver}}},
		{Owner: other, Sharing: signals.SharingPrivate, SharedWith: []signals.Share{{Who: signals.GroupPrefix + group, Role: signals.RoleController}}},
		{Owner: other, SharedWith: []signals.Share{{Who: "someone-else", Role: signals.RoleController}}},
	}
	ids := map[string]signals.Access{}
	var wids []string
	for _, a := range accesses {
		id := session(t)
		prompt(t, signals.SessionConfig{SessionID: id, Access: a}, "/echo")
		ids[id] = a
		wids = append(wids, "'"+signals.SessionWorkflowID(id)+"'")
	}
	mine := "WorkflowId IN (" + strings.Join(wids, ", ") + ")"
	require.Eventually(t, func() bool {
		l, err := sc.ListWhere(ctxFor(t, 10*time.Second), mine, 100)
		return err == nil && len(l) == len(ids) // visibility lags a start by a moment
	}, 30*time.Second, 100*time.Millisecond)

	for _, who := range []signals.Identity{
		{Name: person, Groups: []string{group}, Role: signals.RoleController},
		{Name: person, Role: signals.RoleObserver},
		{Name: other, Role: signals.RoleController},
		{Name: "nobody-" + signals.NewID()[:8], Groups: []string{"x"}, Role: signals.RoleController},
	} {
		for _, def := range signals.Sharings {
			want := []string{}
			for id, a := range ids {
				if signals.RoleFor(a, who, def) != "" {
					want = append(want, id)
				}
			}
			l, err := sc.ListWhere(ctxFor(t, 10*time.Second), signals.VisibleWhere(who, def)+" AND "+mine, 100)
			require.NoError(t, err)
			got := []string{}
			for _, s := range l {
				got = append(got, s.SessionID)
			}
			require.ElementsMatch(t, want, got, "%s (%v) under the door's %s", who.Name, who.Groups, def)
		}
	}
}

// Rewind at the deck: the end of one of alice's turns as a new session, hers, a fork before
// the next turn; bob, who may not see her private session, and carol, whose token only
// reads, start nothing.
func TestOwnershipRewindAtTheDeck(t *testing.T) {
	t.Parallel()
	d := newTeamDeck(t, signals.SharingPrivate)
	id := session(t)
	for _, text := range []string{"/chunks 1", "/chunks 2"} {
		r := d.call(t, "POST", sessPath(id, "/prompt"), d.alice, map[string]any{"text": text})
		require.Equal(t, http.StatusOK, r.Code, string(r.Body))
		var res signals.PromptResult
		r.decode(t, &res)
		endedWith(t, id, res.TurnID, "end_turn")
	}
	require.Equal(t, http.StatusNotFound, d.call(t, "POST", sessPath(id, "/rewind"), d.bob, map[string]any{"to_turn": 1}).Code)
	require.Equal(t, http.StatusForbidden, d.call(t, "POST", sessPath(id, "/rewind"), d.carol, map[string]any{"to_turn": 1}).Code)
	for _, bad := range []any{map[string]any{"to_turn": 3}, map[string]any{"to_turn": 0}, map[string]any{"to_turn": "one"}} {
		r := d.call(t, "POST", sessPath(id, "/rewind"), d.alice, bad)
		require.Equal(t, http.StatusBadRequest, r.Code, "%v: %s", bad, r.Body)
	}

	r := d.call(t, "POST", sessPath(id, "/rewind"), d.alice, map[string]any{"to_turn": 1})
	require.Equal(t, http.StatusOK, r.Code, string(r.Body))
	var cfg signals.SessionConfig
	r.decode(t, &cfg)
	require.Equal(t, &signals.ForkOrigin{SessionID: id, BeforeTurn: 2}, cfg.ForkOf)
	require.Equal(t, "alice", cfg.Owner, "the rewound session is the person's who rewound")
	acc, err := sc.Access(ctxFor(t, 10*time.Second), cfg.SessionID)
	require.NoError(t, err)
	require.Equal(t, "alice", acc.Owner)
	require.Equal(t, may{false, false, false}, d.tried(t, d.bob, cfg.SessionID), "bob does not see it under the deck's private rule")
}

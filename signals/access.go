package signals

// Who may see and act on a session. A session records, when it is created, its owner (the
// person the door that created it authenticated), the people and groups it is shared with
// and its sharing rule; the doors that people use (the deck, its /acp, `starter acp`) decide
// with RoleFor what each person may do. Temporal's own door is not one of them: a client
// with the namespace's credentials may write to any workflow (docs/operators.md, "Who may do
// what").

import (
	"fmt"
	"slices"
	"strings"
)

// A session's sharing rule: who besides its owner and the people it is shared with may use it.
const (
	// SharingPrivate: nobody else.
	SharingPrivate = "private"
	// SharingTeamWatch: everyone of the deployment may watch; only the owner and the people
	// it is shared with as controllers act.
	SharingTeamWatch = "team-watch"
	// SharingTeamAct: everyone of the deployment may watch and act.
	SharingTeamAct = "team-act"
)

// Sharings are the sharing rules, most private first.
var Sharings = []string{SharingPrivate, SharingTeamWatch, SharingTeamAct}

// GroupPrefix marks a share with a group ("group:reviewers") rather than a person.
const GroupPrefix = "group:"

// MaxShares bounds the shares of one session.
const MaxShares = 32

// Share gives one person or group a role on a session: Who is a person's name ("bob") or
// a group (GroupPrefix + name); Role is RoleController or RoleObserver.
type Share struct {
	Who  string `json:"who"`
	Role string `json:"role"`
}

// String is the share as the TacpSharedWith search attribute and the CLI write it: WHO=ROLE.
func (s Share) String() string { return s.Who + "=" + s.Role }

// ParseShare reads WHO=ROLE (ROLE controller or observer; WHO alone: observer).
func ParseShare(v string) (Share, error) {
	who, role, ok := strings.Cut(v, "=")
	if !ok {
		role = RoleObserver
	}
	s := Share{Who: who, Role: role}
	return s, ValidateShare(s)
}

// ValidateShare checks that s names a person or group and a role.
func ValidateShare(s Share) error {
	name := strings.TrimPrefix(s.Who, GroupPrefix)
	if err := ValidateProfileName(name); err != nil {
		return fmt.Errorf("share %q: want a person's or group:NAME of 1–64 of [A-Za-z0-9._-]", s.Who)
	}
	if s.Role != RoleController && s.Role != RoleObserver {
		return fmt.Errorf("share %q: role %q: want %s or %s", s.Who, s.Role, RoleController, RoleObserver)
	}
	return nil
}

// Access is what a session records of who may use it.
type Access struct {
	// Owner is the person who created the session; "" for a session created by a client
	// that named nobody (and for sessions created before owners were recorded).
	Owner string `json:"owner,omitempty"`
	// Sharing is the session's sharing rule; "" follows the door's default.
	Sharing string `json:"sharing,omitempty"`
	// SharedWith are the people and groups the session is shared with.
	SharedWith []Share `json:"shared_with,omitempty"`
}

// ValidateAccess checks an owner's name, a sharing rule and the shares.
func ValidateAccess(a Access) error {
	if a.Owner != "" {
		if err := ValidateProfileName(a.Owner); err != nil {
			return fmt.Errorf("owner %q: want 1–64 of [A-Za-z0-9._-]", a.Owner)
		}
	}
	if a.Sharing != "" && !slices.Contains(Sharings, a.Sharing) {
		return fmt.Errorf("sharing %q: want one of %s", a.Sharing, strings.Join(Sharings, ", "))
	}
	if len(a.SharedWith) > MaxShares {
		return fmt.Errorf("shared_with: %d shares; at most %d", len(a.SharedWith), MaxShares)
	}
	for _, s := range a.SharedWith {
		if err := ValidateShare(s); err != nil {
			return err
		}
	}
	return nil
}

// Identity is who a door authenticated: a person's name and groups, and the role their
// credential allows at most.
type Identity struct {
	// Name is the person; "" for a credential that stands for the whole deployment (a deck's
	// unnamed token, `starter` with the namespace's credentials), which has its Role on
	// every session.
	Name   string
	Groups []string
	Role   string
}

// RoleFor returns what id may do on a session whose access is a: RoleController,
// RoleObserver, or "" (the session is not theirs to see). def is the door's sharing rule for
// an owned session that names none; a session that names neither owner nor rule is the
// team's (SharingTeamAct). A person's role never exceeds their credential's: an observer
// token watches even the sessions it owns.
func RoleFor(a Access, id Identity, def string) string {
	if id.Role != RoleController && id.Role != RoleObserver {
		return ""
	}
	if id.Name == "" {
		return id.Role
	}
	granted := ""
	if a.Owner != "" && a.Owner == id.Name {
		granted = RoleController
	}
	for _, s := range a.SharedWith {
		if s.Who == id.Name || strings.HasPrefix(s.Who, GroupPrefix) && slices.Contains(id.Groups, strings.TrimPrefix(s.Who, GroupPrefix)) {
			granted = higherRole(granted, s.Role)
		}
	}
	sharing := a.Sharing
	switch {
	case sharing != "":
	case a.Owner == "":
		// Nobody's session (a client with the namespace's credentials started it and named
		// no owner) is the team's: there is nobody it could be private to.
		sharing = SharingTeamAct
	default:
		sharing = def
	}
	switch sharing {
	case SharingTeamAct:
		granted = RoleController
	case SharingTeamWatch:
		granted = higherRole(granted, RoleObserver)
	}
	if granted == RoleController && id.Role == RoleObserver {
		return RoleObserver
	}
	return granted
}

// VisibleWhere is a visibility query (for ListWhere and ListPage) of the sessions RoleFor
// lets id see under the door's rule def, "" when id sees every session. A list that reads
// through it holds a person's sessions however many others the namespace has; RoleFor stays
// the rule each listed session is checked against, the query only narrows what is read.
func VisibleWhere(id Identity, def string) string {
	if id.Name == "" {
		return ""
	}
	or := []string{
		fmt.Sprintf("%s IN ('%s', '%s')", SearchAttrSharing, SharingTeamWatch, SharingTeamAct),
		// Nobody's session with no rule of its own is the team's.
		fmt.Sprintf("(%s IS NULL AND %s IS NULL)", SearchAttrSharing, SearchAttrOwner),
	}
	if def == SharingTeamWatch || def == SharingTeamAct {
		or = append(or, SearchAttrSharing+" IS NULL")
	}
	// Names and groups outside the names a share may hold match no session; they are left
	// out rather than quoted.
	var shares []string
	if ValidateProfileName(id.Name) == nil {
		or = append(or, fmt.Sprintf("%s = '%s'", SearchAttrOwner, id.Name))
		shares = append(shares, id.Name)
	}
	for _, g := range id.Groups {
		if ValidateProfileName(g) == nil {
			shares = append(shares, GroupPrefix+g)
		}
	}
	if len(shares) > 0 {
		var in []string
		for _, who := range shares {
			for _, role := range []string{RoleController, RoleObserver} {
				in = append(in, "'"+Share{Who: who, Role: role}.String()+"'")
			}
		}
		or = append(or, fmt.Sprintf("%s IN (%s)", SearchAttrSharedWith, strings.Join(in, ", ")))
	}
	return "(" + strings.Join(or, " OR ") + ")"
}

func higherRole(a, b string) string {
	if a == RoleController || b == RoleController {
		return RoleController
	}
	if a == RoleObserver || b == RoleObserver {
		return RoleObserver
	}
	return ""
}

// SharedWithAttr is the TacpSharedWith search attribute's value of shares.
func SharedWithAttr(shares []Share) []string {
	out := make([]string, 0, len(shares))
	for _, s := range shares {
		out = append(out, s.String())
	}
	return out
}

// SharesOf reads the TacpSharedWith search attribute's value back; entries that do not
// parse are left out.
func SharesOf(v []string) []Share {
	var out []Share
	for _, e := range v {
		if s, err := ParseShare(e); err == nil {
			out = append(out, s)
		}
	}
	return out
}

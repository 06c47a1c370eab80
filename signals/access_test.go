package signals

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// The ownership matrix: alice owns a session; bob (controller token) and carol (observer
// token, group team) are others; under each sharing rule each of them gets one role.
func TestRoleForOwnersSharesAndSharingRules(t *testing.T) {
	alice := Identity{Name: "alice", Role: RoleController}
	bob := Identity{Name: "bob", Role: RoleController, Groups: []string{"devs"}}
	carol := Identity{Name: "carol", Role: RoleObserver, Groups: []string{"team"}}
	deckwide := Identity{Role: RoleController}
	for _, tc := range []struct {
		sharing string
		shares  []Share
		want    map[string]string // alice, bob, carol, deck-wide
	}{
		{SharingPrivate, nil, map[string]string{"alice": RoleController, "bob": "", "carol": "", "": RoleController}},
		{SharingTeamWatch, nil, map[string]string{"alice": RoleController, "bob": RoleObserver, "carol": RoleObserver, "": RoleController}},
		{SharingTeamAct, nil, map[string]string{"alice": RoleController, "bob": RoleController, "carol": RoleObserver, "": RoleController}},
		// Shares lift a person or a group above the rule, never a credential above its role.
		{SharingPrivate, []Share{{"bob", RoleController}, {"group:team", RoleController}}, map[string]string{"alice": RoleController, "bob": RoleController, "carol": RoleObserver, "": RoleController}},
		{SharingTeamWatch, []Share{{"group:devs", RoleController}}, map[string]string{"alice": RoleController, "bob": RoleController, "carol": RoleObserver, "": RoleController}},
		{SharingPrivate, []Share{{"group:bob", RoleController}}, map[string]string{"alice": RoleController, "bob": "", "carol": "", "": RoleController}},
	} {
		a := Access{Owner: "alice", Sharing: tc.sharing, SharedWith: tc.shares}
		for _, id := range []Identity{alice, bob, carol, deckwide} {
			require.Equal(t, tc.want[id.Name], RoleFor(a, id, SharingTeamAct), "%s %v: %q", tc.sharing, tc.shares, id.Name)
		}
	}
}

// An owned session that names no rule follows the door's; one that names neither owner
// nor rule is the team's, whatever the door's rule.
func TestRoleForFollowsTheDefaultRule(t *testing.T) {
	bob := Identity{Name: "bob", Role: RoleController}
	for def, want := range map[string]string{SharingPrivate: "", SharingTeamWatch: RoleObserver, SharingTeamAct: RoleController} {
		require.Equal(t, want, RoleFor(Access{Owner: "alice"}, bob, def), def)
		require.Equal(t, RoleController, RoleFor(Access{}, bob, def), def)
		require.Equal(t, RoleObserver, RoleFor(Access{}, Identity{Name: "carol", Role: RoleObserver}, def), def)
	}
	require.Equal(t, "", RoleFor(Access{Sharing: SharingPrivate}, bob, SharingTeamAct), "nobody's and private: no person's")
	require.Equal(t, RoleController, RoleFor(Access{Owner: "bob", Sharing: SharingPrivate}, bob, SharingPrivate))
	require.Equal(t, "", RoleFor(Access{Owner: "bob"}, Identity{Name: "bob"}, SharingTeamAct), "a credential with no role is nobody")
}

func TestValidateAccessRefusesWhatCannotBeChecked(t *testing.T) {
	require.NoError(t, ValidateAccess(Access{Owner: "alice", Sharing: SharingTeamWatch, SharedWith: []Share{{"group:team", RoleObserver}}}))
	for _, a := range []Access{
		{Owner: "al ice"},
		{Owner: "deck:alice"},
		{Sharing: "public"},
		{SharedWith: []Share{{"bob", "admin"}}},
		{SharedWith: []Share{{"group:", RoleObserver}}},
		{SharedWith: make([]Share, MaxShares+1)},
	} {
		require.Error(t, ValidateAccess(a), fmt.Sprint(a))
	}
	s, err := ParseShare("group:team=controller")
	require.NoError(t, err)
	require.Equal(t, Share{"group:team", RoleController}, s)
	s, err = ParseShare("bob")
	require.NoError(t, err)
	require.Equal(t, Share{"bob", RoleObserver}, s)
	require.Equal(t, []Share{s}, SharesOf(SharedWithAttr([]Share{s})))
}

package session

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

// TestUpdateTable_IsTheClientsUpdates: the table holds exactly the updates the client can
// Call (signals.Updates), each once, so no update is callable without a handler or handled
// without a typed call.
func TestUpdateTable_IsTheClientsUpdates(t *testing.T) {
	var client []string
	v := reflect.ValueOf(signals.Updates)
	for i := range v.NumField() {
		client = append(client, v.Field(i).FieldByName("Name").String())
	}
	var table []string
	for _, u := range Updates {
		table = append(table, u.Name())
	}
	require.ElementsMatch(t, client, table)
	require.Len(t, UpdateByName, len(Updates))
}

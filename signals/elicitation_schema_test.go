package signals

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckElicitationContent(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","required":["name"],"properties":{
		"name":{"type":"string","minLength":2},
		"size":{"type":"integer","minimum":1,"maximum":5},
		"ok":{"type":"boolean"},
		"pick":{"type":"string","enum":["a","b"]},
		"many":{"type":"array","items":{"anyOf":[{"const":"x"},{"const":"y"}]},"maxItems":2}}}`)
	for _, tt := range []struct{ content, err string }{
		{`{"name":"al","size":3,"ok":true,"pick":"a","many":["x","y"]}`, ""},
		{`{"size":3}`, "name is required"},
		{`{"name":"a"}`, "name must be at least 2 characters"},
		{`{"name":"al","size":2.5}`, "size must be an integer"},
		{`{"name":"al","size":9}`, "size must be at most 5"},
		{`{"name":"al","ok":"yes"}`, "ok must be true or false"},
		{`{"name":"al","pick":"c"}`, "pick must be one of a, b"},
		{`{"name":"al","many":["z"]}`, "many may hold only x, y"},
		{`{"name":"al","other":1}`, "other is not a field of the form"},
		{`[1]`, "content must be a JSON object"},
		{``, "content must be a JSON object"},
	} {
		err := CheckElicitationContent(schema, json.RawMessage(tt.content))
		if tt.err == "" {
			require.NoError(t, err, tt.content)
		} else {
			require.ErrorContains(t, err, tt.err, tt.content)
		}
	}
	require.Equal(t, []string{"a", "b"}, ElicitationChoices(schema, "pick"))
}

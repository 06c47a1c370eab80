package activities

// Tests of promptBlocks, the conversion of a turn's prompt into ACP content blocks.

import (
	"encoding/json"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/signals"
)

func TestPromptBlocksTextOnly(t *testing.T) {
	blocks, err := promptBlocks(signals.TurnInput{Text: "hello\nworld"})
	require.NoError(t, err)
	require.Equal(t, []acp.ContentBlock{acp.TextBlock("hello\nworld")}, blocks)
}

func TestPromptBlocksContent(t *testing.T) {
	content := json.RawMessage(`[
		{"type":"text","text":"look at this"},
		{"type":"resource_link","uri":"file:///w/README.md","name":"README.md"}
	]`)

	t.Run("content alone", func(t *testing.T) {
		blocks, err := promptBlocks(signals.TurnInput{Content: content})
		require.NoError(t, err)
		require.Len(t, blocks, 2)
		require.NotNil(t, blocks[0].Text)
		require.Equal(t, "look at this", blocks[0].Text.Text)
		require.NotNil(t, blocks[1].ResourceLink)
		require.Equal(t, "file:///w/README.md", blocks[1].ResourceLink.Uri)
		require.Equal(t, "README.md", blocks[1].ResourceLink.Name)
	})

	t.Run("text goes first", func(t *testing.T) {
		blocks, err := promptBlocks(signals.TurnInput{Text: "first", Content: content})
		require.NoError(t, err)
		require.Len(t, blocks, 3)
		require.Equal(t, acp.TextBlock("first"), blocks[0])
		require.Equal(t, "look at this", blocks[1].Text.Text)
		require.NotNil(t, blocks[2].ResourceLink)
	})

	t.Run("round trips to the wire", func(t *testing.T) {
		blocks, err := promptBlocks(signals.TurnInput{Content: content})
		require.NoError(t, err)
		b, err := json.Marshal(blocks)
		require.NoError(t, err)
		require.JSONEq(t, string(content), string(b))
	})
}

func TestPromptBlocksInvalidContent(t *testing.T) {
	tests := []struct {
		name    string
		content string
	}{
		{"not JSON", `[{"type":`},
		{"an object, not an array", `{"type":"text","text":"hi"}`},
		{"a string", `"hi"`},
		{"an array of numbers", `[1,2]`},
		{"a text block whose text is not a string", `[{"type":"text","text":42}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blocks, err := promptBlocks(signals.TurnInput{Text: "x", Content: json.RawMessage(tt.content)})
			require.Error(t, err)
			require.ErrorContains(t, err, "prompt content is not ACP content blocks")
			require.Nil(t, blocks)
		})
	}
}

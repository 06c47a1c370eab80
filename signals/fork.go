package signals

// Forks (contract §3 "Forks"): a session started from another's conversation.

import (
	"encoding/json"
	"fmt"
)

// ForkOrigin is what a fork was taken from: session SessionID's conversation before turn
// BeforeTurn (0: all of it, as it was when the fork's agent started).
type ForkOrigin struct {
	SessionID  string `json:"session_id"`
	BeforeTurn int64  `json:"before_turn,omitempty"`
}

// ForkTranscriptHeader opens the conversation a fork's agent starts from.
func ForkTranscriptHeader(f ForkOrigin) string {
	before := "all of it"
	if f.BeforeTurn > 0 {
		before = fmt.Sprintf("its turns before turn %d", f.BeforeTurn)
	}
	return fmt.Sprintf("[tacp: earlier context] This session is a fork of session %s: below is that session's "+
		"conversation (%s), from tacp's journal. Treat it as what was said before; the new prompt follows after it.", f.SessionID, before)
}

// ForkRequest is what a fork is taken with.
type ForkRequest struct {
	// SessionID is the fork's id ("": a new one); a session of that id must not exist.
	SessionID string
	// BeforeTurn takes the origin's conversation before this turn (0: all of it).
	BeforeTurn int64
	// Workspace is the fork's workspace ("": a folder of its own, as for any new session).
	// On workers with workspace checkpoints, the fork's first turn finds an empty workspace
	// filled with the origin's files as they were before BeforeTurn (workspace.restored
	// names the origin's checkpoint); a workspace with files keeps them.
	Workspace string
	// McpServers are the fork's (the origin's are its secret and are not copied).
	McpServers json.RawMessage
	// Owner is the fork's owner: the person who forks, not the origin's (whose shares and
	// sharing rule are not copied either: a fork starts under the door's rule).
	Owner string
}

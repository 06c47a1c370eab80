package activities

// The live-turn registry: the turns running on this host, by session and turn, with the
// channels through which deliveries reach each turn's loop (turnshell.go).

import (
	"context"
	"encoding/json"
	"sync"

	acp "github.com/coder/acp-go-sdk"

	"github.com/tacp-dev/tacp/signals"
)

// liveTurn is a turn running on this host: the channels the Deliver activity feeds.
type liveTurn struct {
	key     turnKey
	attempt int32
	steers  chan steerRequest
	cancel  chan struct{}
	once    sync.Once
	done    chan struct{}

	mu      sync.Mutex
	perms   map[string]chan acp.RequestPermissionResponse
	permSeq int
	// beforePermission flushes the turn's events, so a permission request is journaled
	// after the tool call it is about, and holds the turn's beat until answered is called.
	beforePermission func() (answered func())
	askPermission    func(ctx context.Context, sig signals.PermissionRequestedSignal) error
	// elicits are the agent's open questions; askElicitation reports one (elicitation.go).
	elicits        map[string]chan elicitationAnswer
	askElicitation func(ctx context.Context, sig signals.ElicitationRequestedSignal) error
	// completeElicitation reports the agent's elicitation/complete of a url elicitation.
	completeElicitation func(ctx context.Context, sig signals.ElicitationCompletedSignal) error
	// reach measures where a permission request's tool call reaches (ToolCallReach in the
	// turn's workspace); nil: outside, so the request is asked.
	reach func(toolCall json.RawMessage) string
	// watch names the turn's tool calls (from their tool_call updates).
	watch *turnObserver
	// applySettings sets a mode or config value chosen while the turn runs in its agent.
	// It returns the agent's offer after the change.
	applySettings func(ctx context.Context, c signals.SessionChoices) (*signals.AgentSettings, error)
	// goLive brings a turn that streams unwatched to the watched cadence (a viewer came).
	goLive func()
}

// steerRequest is a steer on its way into the turn. A synchronous one is answered on reply;
// an async one (Delivery.Async) by the delivery_outcome signal, naming delivery.
type steerRequest struct {
	text     string
	reply    chan steerReply
	async    bool
	delivery signals.Delivery
}

type steerReply struct {
	how string
	err error
}

func (h *Host) register(sessionID string, turnID int64, attempt int32) *liveTurn {
	h.init()
	lt := &liveTurn{
		key: turnKey{sessionID, turnID}, attempt: attempt,
		steers: make(chan steerRequest), cancel: make(chan struct{}), done: make(chan struct{}),
		perms: map[string]chan acp.RequestPermissionResponse{},
	}
	h.mu.Lock()
	h.turns[lt.key] = lt
	h.mu.Unlock()
	return lt
}

func (h *Host) unregister(lt *liveTurn) {
	h.mu.Lock()
	if h.turns[lt.key] == lt {
		delete(h.turns, lt.key)
	}
	h.mu.Unlock()
	close(lt.done)
}

func (lt *liveTurn) requestCancel() { lt.once.Do(func() { close(lt.cancel) }) }

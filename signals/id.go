package signals

import (
	"crypto/rand"
	"encoding/hex"
)

// NewID returns a random id for client_message_id and client_msg_id.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

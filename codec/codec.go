// Package codec owns payload encryption: the keyring, the Temporal PayloadCodec that
// encrypts every payload tacp writes (prompts, agent transcripts, tool arguments), and the
// codec server the Temporal UI calls to read them. Without the key, a payload in history is
// opaque to everyone, operators reading raw history included.
//
// An encrypted payload is the whole proto-marshalled original Payload (its metadata too, so
// even the encoding is hidden), sealed with AES-256-GCM under a random 12-byte nonce:
//
//	metadata: {"encoding": "binary/encrypted", "encryption-key-id": <key id>}
//	data:     nonce (12 bytes) || ciphertext || GCM tag (16 bytes)
//
// The key id travels in clear so that keys can rotate: new payloads use the current key,
// and every key still in the keyring decrypts the payloads written under it.
package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// Metadata of an encrypted payload.
const (
	// EncodingEncrypted is the "encoding" metadata value of an encrypted payload.
	EncodingEncrypted = "binary/encrypted"
	// MetadataKeyID is the metadata key naming the key a payload was encrypted with.
	MetadataKeyID = "encryption-key-id"
)

// Environment variables read by LoadKeys.
const (
	// EnvKeys holds a keyring in the ParseKeys format.
	EnvKeys = "TACP_CODEC_KEYS"
	// EnvKeyFile names a file holding a keyring, read when EnvKeys is empty.
	EnvKeyFile = "TACP_CODEC_KEY_FILE"
)

// KeySize is the length of a key in bytes (AES-256).
const KeySize = 32

const maxKeyIDLen = 64

// Keys is a keyring: the key id new payloads are encrypted with, and every key that can
// decrypt.
type Keys struct {
	// Current is the id of the key Encode uses.
	Current string
	// ByID holds every key, the current one included, by id.
	ByID map[string][]byte
}

// ParseKeys parses a keyring written "id1:base64key1,id2:base64key2". The first entry is
// the current key; the others only decrypt, which is how a rotated-out key stays readable.
// Each key is 32 bytes in standard base64; each id is 1-64 characters of [A-Za-z0-9._-].
// Errors name the entry and its id, never the key material.
func ParseKeys(s string) (Keys, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Keys{}, errors.New("codec: empty keyring: want id:base64key[,id:base64key...]")
	}
	keys := Keys{ByID: map[string][]byte{}}
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			return Keys{}, fmt.Errorf("codec: keyring entry %d is empty", i+1)
		}
		id, b64, ok := strings.Cut(entry, ":")
		if !ok {
			return Keys{}, fmt.Errorf("codec: keyring entry %d is not id:base64key", i+1)
		}
		if err := validateKeyID(id); err != nil {
			return Keys{}, fmt.Errorf("codec: keyring entry %d: %w", i+1, err)
		}
		if _, dup := keys.ByID[id]; dup {
			return Keys{}, fmt.Errorf("codec: keyring entry %d: duplicate key id %q", i+1, id)
		}
		key, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return Keys{}, fmt.Errorf("codec: key %q is not standard base64: %w", id, err)
		}
		if len(key) != KeySize {
			return Keys{}, fmt.Errorf("codec: key %q is %d bytes, want %d (AES-256)", id, len(key), KeySize)
		}
		if i == 0 {
			keys.Current = id
		}
		keys.ByID[id] = key
	}
	return keys, nil
}

// validateKeyID keeps ids short and printable: they travel in clear in every payload's
// metadata and appear in error messages.
func validateKeyID(id string) error {
	if id == "" || len(id) > maxKeyIDLen {
		return fmt.Errorf("key id %q must be 1-%d characters", id, maxKeyIDLen)
	}
	for _, c := range id {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return fmt.Errorf("key id %q may hold only [A-Za-z0-9._-]", id)
		}
	}
	return nil
}

// LoadKeys reads the keyring from TACP_CODEC_KEYS or, when that is empty, from the file
// named by TACP_CODEC_KEY_FILE. The file uses the ParseKeys format, but entries may also
// be separated by whitespace or newlines and "#" starts a comment to the end of the line.
// ok is false, with a nil error, when neither variable is set: encryption is not
// configured.
func LoadKeys(getenv func(string) string) (keys Keys, ok bool, err error) {
	if s := getenv(EnvKeys); strings.TrimSpace(s) != "" {
		keys, err := ParseKeys(s)
		if err != nil {
			return Keys{}, false, fmt.Errorf("%s: %w", EnvKeys, err)
		}
		return keys, true, nil
	}
	path := getenv(EnvKeyFile)
	if path == "" {
		return Keys{}, false, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Keys{}, false, fmt.Errorf("%s: %w", EnvKeyFile, err)
	}
	keys, err = ParseKeys(keyFileEntries(string(b)))
	if err != nil {
		return Keys{}, false, fmt.Errorf("%s %s: %w", EnvKeyFile, path, err)
	}
	return keys, true, nil
}

// keyFileEntries turns a key file into the ParseKeys format: comments dropped, entries
// joined by commas. Neither "#", "," nor whitespace can occur in an id or in base64.
func keyFileEntries(file string) string {
	var entries []string
	for _, line := range strings.Split(file, "\n") {
		line, _, _ = strings.Cut(line, "#")
		entries = append(entries, strings.Fields(strings.ReplaceAll(line, ",", " "))...)
	}
	return strings.Join(entries, ",")
}

// UnknownKeyError is returned by Decode for a payload encrypted with a key the keyring
// does not hold, typically a key removed too early from rotation.
type UnknownKeyError struct {
	KeyID string
}

func (e *UnknownKeyError) Error() string {
	return fmt.Sprintf("payload encrypted with key %q, which this keyring does not have", e.KeyID)
}

// DecryptError is returned by Decode when a payload fails authentication: the keyring holds
// a different key under the same id, or the payload was altered.
type DecryptError struct {
	KeyID string
}

func (e *DecryptError) Error() string {
	return fmt.Sprintf("payload with key %q failed to decrypt: wrong key or tampered data", e.KeyID)
}

// payloadCodec is the AES-256-GCM converter.PayloadCodec. Its AEADs are built once; they
// hold no per-call state, so one codec serves every worker goroutine.
type payloadCodec struct {
	current string
	aeads   map[string]cipher.AEAD
	// bad holds why a key could not become an AEAD (a wrong length, when Keys was built
	// by hand rather than by ParseKeys); using that key reports it.
	bad map[string]error
}

// NewCodec returns the converter.PayloadCodec that encrypts payloads with keys.Current and
// decrypts them with any key in keys.ByID. Decode leaves payloads that are not encrypted
// untouched, so histories written before encryption was turned on still read.
func NewCodec(keys Keys) converter.PayloadCodec {
	c := &payloadCodec{
		current: keys.Current,
		aeads:   make(map[string]cipher.AEAD, len(keys.ByID)),
		bad:     map[string]error{},
	}
	for id, key := range keys.ByID {
		aead, err := newAEAD(key)
		if err != nil {
			c.bad[id] = fmt.Errorf("codec: key %q: %w", id, err)
			continue
		}
		c.aeads[id] = aead
	}
	return c
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("key is %d bytes, want %d (AES-256)", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	// Seal draws a fresh random 12-byte nonce and prepends it; Open reads it back. That is
	// exactly the nonce||ciphertext layout of the payload data.
	return cipher.NewGCMWithRandomNonce(block)
}

// Encode encrypts every payload with the current key.
func (c *payloadCodec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	aead, ok := c.aeads[c.current]
	if !ok {
		if err := c.bad[c.current]; err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("codec: current key %q is not in the keyring", c.current)
	}
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("codec: marshal payload: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(EncodingEncrypted),
				MetadataKeyID:              []byte(c.current),
			},
			Data: aead.Seal(nil, nil, plain, nil),
		}
	}
	return out, nil
}

// Decode decrypts the encrypted payloads and passes the others through.
func (c *payloadCodec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != EncodingEncrypted {
			out[i] = p
			continue
		}
		d, err := c.decrypt(p)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

func (c *payloadCodec) decrypt(p *commonpb.Payload) (*commonpb.Payload, error) {
	idBytes, ok := p.GetMetadata()[MetadataKeyID]
	if !ok {
		return nil, fmt.Errorf("codec: encrypted payload has no %q metadata", MetadataKeyID)
	}
	id := string(idBytes)
	aead, ok := c.aeads[id]
	if !ok {
		if err := c.bad[id]; err != nil {
			return nil, err
		}
		return nil, &UnknownKeyError{KeyID: id}
	}
	plain, err := aead.Open(nil, nil, p.GetData(), nil)
	if err != nil {
		return nil, &DecryptError{KeyID: id}
	}
	var d commonpb.Payload
	if err := proto.Unmarshal(plain, &d); err != nil {
		// Authenticated yet not a Payload: written by something other than this codec.
		return nil, fmt.Errorf("codec: payload with key %q decrypted to an invalid payload: %w", id, err)
	}
	return &d, nil
}

// DataConverter returns the SDK's default data converter with payloads encrypted by keys.
// Clients and workers of one deployment must all use it, with the same keyring.
func DataConverter(keys Keys) converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), NewCodec(keys))
}

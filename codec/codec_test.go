package codec

// Tests of payload encryption and the codec server. Each test is named after the rule it
// proves; the rules are those of the package comment and of NewServer.

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// newKey returns a random AES-256 key.
func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func b64(k []byte) string { return base64.StdEncoding.EncodeToString(k) }

func keyring(current string, byID map[string][]byte) Keys {
	return Keys{Current: current, ByID: byID}
}

func jsonPayload(s string) *commonpb.Payload {
	return &commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)},
		Data:     []byte(`"` + s + `"`),
	}
}

func encode(t *testing.T, c converter.PayloadCodec, ps ...*commonpb.Payload) []*commonpb.Payload {
	t.Helper()
	out, err := c.Encode(ps)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if len(out) != len(ps) {
		t.Fatalf("Encode returned %d payloads, want %d", len(out), len(ps))
	}
	return out
}

func decode(t *testing.T, c converter.PayloadCodec, ps ...*commonpb.Payload) []*commonpb.Payload {
	t.Helper()
	out, err := c.Decode(ps)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if len(out) != len(ps) {
		t.Fatalf("Decode returned %d payloads, want %d", len(out), len(ps))
	}
	return out
}

func requireSamePayloads(t *testing.T, got, want []*commonpb.Payload) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d payloads, want %d", len(got), len(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("payload %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestEncodeThenDecodeRestoresEveryPayload(t *testing.T) {
	c := NewCodec(keyring("k1", map[string][]byte{"k1": newKey(t)}))
	big := make([]byte, 1<<20)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		payloads []*commonpb.Payload
	}{
		{"one json payload", []*commonpb.Payload{jsonPayload("fix the failing test")}},
		{"several payloads keep their order", []*commonpb.Payload{
			jsonPayload("prompt"),
			{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingBinary)}, Data: []byte{0, 1, 2, 255}},
			{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingNil)}},
			{Metadata: map[string][]byte{converter.MetadataEncoding: []byte("json/protobuf"), "messageType": []byte("x.Y")}, Data: []byte(`{}`)},
		}},
		{"empty payload", []*commonpb.Payload{{}}},
		{"data without metadata", []*commonpb.Payload{{Data: []byte("raw")}}},
		{"one MiB of random bytes", []*commonpb.Payload{{Data: big}}},
		{"no payloads", []*commonpb.Payload{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := encode(t, c, tt.payloads...)
			for i, p := range enc {
				if got := string(p.Metadata[converter.MetadataEncoding]); got != EncodingEncrypted {
					t.Errorf("payload %d encoding = %q, want %q", i, got, EncodingEncrypted)
				}
				if got := string(p.Metadata[MetadataKeyID]); got != "k1" {
					t.Errorf("payload %d key id = %q, want k1", i, got)
				}
			}
			requireSamePayloads(t, decode(t, c, enc...), tt.payloads)
		})
	}
}

func TestEncodeUsesARandomNonce(t *testing.T) {
	c := NewCodec(keyring("k1", map[string][]byte{"k1": newKey(t)}))
	p := jsonPayload("same prompt")
	enc := encode(t, c, p, p, p)
	for i := range enc {
		for j := i + 1; j < len(enc); j++ {
			if bytes.Equal(enc[i].Data, enc[j].Data) {
				t.Errorf("payloads %d and %d have the same ciphertext", i, j)
			}
			if bytes.Equal(enc[i].Data[:12], enc[j].Data[:12]) {
				t.Errorf("payloads %d and %d share a nonce", i, j)
			}
		}
	}
}

func TestEncodedPayloadHidesDataAndMetadata(t *testing.T) {
	c := NewCodec(keyring("k1", map[string][]byte{"k1": newKey(t)}))
	secret := "rm -rf / --no-preserve-root; the secret tool argument"
	orig := &commonpb.Payload{
		Metadata: map[string][]byte{
			converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON),
			"messageType":              []byte("tacp.ToolCallArguments"),
		},
		Data: []byte(`"` + secret + `"`),
	}
	enc := encode(t, c, orig)[0]

	wantMeta := map[string]string{converter.MetadataEncoding: EncodingEncrypted, MetadataKeyID: "k1"}
	if len(enc.Metadata) != len(wantMeta) {
		t.Errorf("encoded metadata has keys %v, want exactly %v", enc.Metadata, wantMeta)
	}
	for k, v := range wantMeta {
		if got := string(enc.Metadata[k]); got != v {
			t.Errorf("encoded metadata %q = %q, want %q", k, got, v)
		}
	}
	if min := 12 + len(orig.Data) + 16; len(enc.Data) < min {
		t.Errorf("encoded data is %d bytes, want at least nonce+plaintext+tag = %d", len(enc.Data), min)
	}

	raw, err := proto.Marshal(enc)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{secret, "secret", converter.MetadataEncodingJSON, "messageType", "tacp.ToolCallArguments"} {
		if bytes.Contains(raw, []byte(leak)) {
			t.Errorf("encoded payload contains %q", leak)
		}
	}
}

func TestRotatedKeyStillDecodesOldPayloads(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	before := NewCodec(keyring("k1", map[string][]byte{"k1": k1}))
	old := []*commonpb.Payload{jsonPayload("written under k1"), jsonPayload("also k1")}
	oldEnc := encode(t, before, old...)

	after := NewCodec(keyring("k2", map[string][]byte{"k2": k2, "k1": k1}))
	newer := jsonPayload("written under k2")
	newEnc := encode(t, after, newer)[0]
	if got := string(newEnc.Metadata[MetadataKeyID]); got != "k2" {
		t.Errorf("new payload key id = %q, want k2", got)
	}

	// A history page mixes both generations.
	got := decode(t, after, oldEnc[0], newEnc, oldEnc[1])
	requireSamePayloads(t, got, []*commonpb.Payload{old[0], newer, old[1]})

	// The pre-rotation keyring cannot read what the new key wrote.
	var unknown *UnknownKeyError
	if _, err := before.Decode([]*commonpb.Payload{newEnc}); !errors.As(err, &unknown) || unknown.KeyID != "k2" {
		t.Errorf("old keyring decoding a k2 payload: err = %v, want UnknownKeyError for k2", err)
	}
}

func TestDecodeFailureNamesTheKey(t *testing.T) {
	k1 := newKey(t)
	writer := NewCodec(keyring("k1", map[string][]byte{"k1": k1}))
	enc := encode(t, writer, jsonPayload("confidential prompt"))[0]

	withData := func(data []byte) *commonpb.Payload {
		p := proto.Clone(enc).(*commonpb.Payload)
		p.Data = data
		return p
	}
	flip := func(i int) []byte {
		d := bytes.Clone(enc.Data)
		d[i] ^= 0x01
		return d
	}
	withoutKeyID := proto.Clone(enc).(*commonpb.Payload)
	delete(withoutKeyID.Metadata, MetadataKeyID)

	tests := []struct {
		name    string
		reader  Keys
		payload *commonpb.Payload
		wantErr string
		// wantType is one of *UnknownKeyError, *DecryptError or nil (any error).
		wantType any
	}{
		{"unknown key id", keyring("k2", map[string][]byte{"k2": newKey(t)}), enc,
			`payload encrypted with key "k1", which this keyring does not have`, &UnknownKeyError{}},
		{"wrong key under the same id", keyring("k1", map[string][]byte{"k1": newKey(t)}), enc,
			`payload with key "k1" failed to decrypt: wrong key or tampered data`, &DecryptError{}},
		{"tampered nonce", keyring("k1", map[string][]byte{"k1": k1}), withData(flip(0)),
			`payload with key "k1" failed to decrypt: wrong key or tampered data`, &DecryptError{}},
		{"tampered ciphertext", keyring("k1", map[string][]byte{"k1": k1}), withData(flip(12)),
			`payload with key "k1" failed to decrypt: wrong key or tampered data`, &DecryptError{}},
		{"tampered tag", keyring("k1", map[string][]byte{"k1": k1}), withData(flip(len(enc.Data) - 1)),
			`payload with key "k1" failed to decrypt: wrong key or tampered data`, &DecryptError{}},
		{"truncated data", keyring("k1", map[string][]byte{"k1": k1}), withData(enc.Data[:20]),
			`payload with key "k1" failed to decrypt: wrong key or tampered data`, &DecryptError{}},
		{"empty data", keyring("k1", map[string][]byte{"k1": k1}), withData(nil),
			`payload with key "k1" failed to decrypt: wrong key or tampered data`, &DecryptError{}},
		{"missing key id", keyring("k1", map[string][]byte{"k1": k1}), withoutKeyID,
			`codec: encrypted payload has no "encryption-key-id" metadata`, nil},
		{"key of the wrong length in a hand-built keyring", keyring("k1", map[string][]byte{"k1": k1[:16]}), enc,
			`codec: key "k1": key is 16 bytes, want 32 (AES-256)`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := NewCodec(tt.reader).Decode([]*commonpb.Payload{jsonPayload("plain"), tt.payload})
			if err == nil {
				t.Fatalf("Decode succeeded with %v, want an error", out)
			}
			if err.Error() != tt.wantErr {
				t.Errorf("error = %q, want %q", err, tt.wantErr)
			}
			switch tt.wantType.(type) {
			case *UnknownKeyError:
				var e *UnknownKeyError
				if !errors.As(err, &e) || e.KeyID != "k1" {
					t.Errorf("error %v is not an UnknownKeyError for k1", err)
				}
			case *DecryptError:
				var e *DecryptError
				if !errors.As(err, &e) || e.KeyID != "k1" {
					t.Errorf("error %v is not a DecryptError for k1", err)
				}
			}
			if strings.Contains(err.Error(), "confidential") {
				t.Errorf("error %q leaks the plaintext", err)
			}
		})
	}
}

func TestEncodeFailsWithoutAUsableCurrentKey(t *testing.T) {
	tests := []struct {
		name    string
		keys    Keys
		wantErr string
	}{
		{"current key missing from the keyring", keyring("k2", map[string][]byte{"k1": newKey(t)}),
			`codec: current key "k2" is not in the keyring`},
		{"empty keyring", Keys{}, `codec: current key "" is not in the keyring`},
		{"current key of the wrong length", keyring("k1", map[string][]byte{"k1": make([]byte, 16)}),
			`codec: key "k1": key is 16 bytes, want 32 (AES-256)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewCodec(tt.keys).Encode([]*commonpb.Payload{jsonPayload("x")})
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("Encode error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestDecodePassesUnencryptedPayloadsThrough(t *testing.T) {
	c := NewCodec(keyring("k1", map[string][]byte{"k1": newKey(t)}))
	plain := []*commonpb.Payload{
		jsonPayload("written before encryption was turned on"),
		{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingBinary)}, Data: []byte{1, 2, 3}},
		{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingNil)}},
		{},
	}
	want := make([]*commonpb.Payload, len(plain))
	for i, p := range plain {
		want[i] = proto.Clone(p).(*commonpb.Payload)
	}
	mixed := append([]*commonpb.Payload{}, plain...)
	mixed = append(mixed, encode(t, c, jsonPayload("new"))...)

	got := decode(t, c, mixed...)
	requireSamePayloads(t, got[:len(plain)], want)
	requireSamePayloads(t, got[len(plain):], []*commonpb.Payload{jsonPayload("new")})
	requireSamePayloads(t, plain, want) // the inputs were not mutated
}

func TestParseKeys(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	tests := []struct {
		name        string
		in          string
		wantCurrent string
		wantIDs     []string
		wantErr     string // substring; empty when parsing succeeds
	}{
		{name: "one key is current", in: "k1:" + b64(k1), wantCurrent: "k1", wantIDs: []string{"k1"}},
		{name: "first entry is current", in: "new:" + b64(k2) + ",old:" + b64(k1), wantCurrent: "new", wantIDs: []string{"new", "old"}},
		{name: "spaces around entries", in: " k1:" + b64(k1) + " , k2:" + b64(k2) + "\n", wantCurrent: "k1", wantIDs: []string{"k1", "k2"}},
		{name: "every id character class", in: "Az09._-:" + b64(k1), wantCurrent: "Az09._-", wantIDs: []string{"Az09._-"}},
		{name: "64-char id", in: strings.Repeat("a", 64) + ":" + b64(k1), wantCurrent: strings.Repeat("a", 64), wantIDs: []string{strings.Repeat("a", 64)}},

		{name: "empty", in: "", wantErr: "empty keyring"},
		{name: "only whitespace", in: "  \n", wantErr: "empty keyring"},
		{name: "empty entry", in: "k1:" + b64(k1) + ",", wantErr: "entry 2 is empty"},
		{name: "no colon", in: b64(k1), wantErr: "entry 1 is not id:base64key"},
		{name: "bad base64", in: "k1:not*base64!", wantErr: `key "k1" is not standard base64`},
		{name: "url-safe base64", in: "k1:" + base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, 32)), wantErr: `key "k1" is not standard base64`},
		{name: "16-byte key", in: "k1:" + b64(k1[:16]), wantErr: `key "k1" is 16 bytes, want 32`},
		{name: "empty key", in: "k1:", wantErr: `key "k1" is 0 bytes, want 32`},
		{name: "duplicate id", in: "k1:" + b64(k1) + ",k1:" + b64(k2), wantErr: `duplicate key id "k1"`},
		{name: "empty id", in: ":" + b64(k1), wantErr: `key id "" must be 1-64 characters`},
		{name: "65-char id", in: strings.Repeat("a", 65) + ":" + b64(k1), wantErr: "must be 1-64 characters"},
		{name: "id with a slash", in: "k/1:" + b64(k1), wantErr: `key id "k/1" may hold only [A-Za-z0-9._-]`},
		{name: "id with a space", in: "k 1:" + b64(k1), wantErr: "may hold only"},
		{name: "non-ASCII id", in: "clé:" + b64(k1), wantErr: "may hold only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := ParseKeys(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseKeys error = %v, want one containing %q", err, tt.wantErr)
				}
				for _, k := range [][]byte{k1, k2} {
					if strings.Contains(err.Error(), b64(k)) {
						t.Errorf("error %q leaks key material", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseKeys: %v", err)
			}
			if keys.Current != tt.wantCurrent {
				t.Errorf("Current = %q, want %q", keys.Current, tt.wantCurrent)
			}
			if len(keys.ByID) != len(tt.wantIDs) {
				t.Errorf("ByID has %d keys, want %v", len(keys.ByID), tt.wantIDs)
			}
			for _, id := range tt.wantIDs {
				if len(keys.ByID[id]) != KeySize {
					t.Errorf("ByID[%q] is %d bytes, want %d", id, len(keys.ByID[id]), KeySize)
				}
			}
		})
	}
}

func TestLoadKeys(t *testing.T) {
	envKey, fileKey, oldKey := newKey(t), newKey(t), newKey(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	commented := write("keys", "# tacp codec keys; the first is current\n"+
		"file-2:"+b64(fileKey)+"   # rotated in 2025-06\n"+
		"\n"+
		"  # file-0 retired\r\n"+
		"file-1:"+b64(oldKey)+",\n")
	bad := write("bad", "# nothing but a comment\n")

	tests := []struct {
		name        string
		env         map[string]string
		wantOK      bool
		wantCurrent string
		wantKeys    map[string][]byte
		wantErr     string
	}{
		{name: "none set: encryption off", env: nil, wantOK: false},
		{name: "whitespace-only env and no file: encryption off", env: map[string]string{EnvKeys: " "}, wantOK: false},
		{name: "from env", env: map[string]string{EnvKeys: "env-1:" + b64(envKey)},
			wantOK: true, wantCurrent: "env-1", wantKeys: map[string][]byte{"env-1": envKey}},
		{name: "from a file with comments", env: map[string]string{EnvKeyFile: commented},
			wantOK: true, wantCurrent: "file-2", wantKeys: map[string][]byte{"file-2": fileKey, "file-1": oldKey}},
		{name: "env wins over the file", env: map[string]string{EnvKeys: "env-1:" + b64(envKey), EnvKeyFile: commented},
			wantOK: true, wantCurrent: "env-1", wantKeys: map[string][]byte{"env-1": envKey}},
		{name: "bad env", env: map[string]string{EnvKeys: "env-1:short"}, wantErr: EnvKeys + ": codec:"},
		{name: "missing file", env: map[string]string{EnvKeyFile: filepath.Join(dir, "absent")}, wantErr: EnvKeyFile + ": open"},
		{name: "file without keys", env: map[string]string{EnvKeyFile: bad}, wantErr: "empty keyring"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, ok, err := LoadKeys(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LoadKeys error = %v, want one containing %q", err, tt.wantErr)
				}
				if ok {
					t.Error("ok = true with an error")
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadKeys: %v", err)
			}
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if keys.Current != tt.wantCurrent {
				t.Errorf("Current = %q, want %q", keys.Current, tt.wantCurrent)
			}
			if len(keys.ByID) != len(tt.wantKeys) {
				t.Errorf("ByID has %d keys, want %d", len(keys.ByID), len(tt.wantKeys))
			}
			for id, want := range tt.wantKeys {
				if !bytes.Equal(keys.ByID[id], want) {
					t.Errorf("ByID[%q] differs from the configured key", id)
				}
			}
		})
	}
}

func TestDataConverterHidesTheValue(t *testing.T) {
	dc := DataConverter(keyring("k1", map[string][]byte{"k1": newKey(t)}))
	p, err := dc.ToPayload("secret prompt text")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := proto.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("secret")) {
		t.Error("encoded payload contains \"secret\"")
	}
	if bytes.Contains(raw, []byte(converter.MetadataEncodingJSON)) {
		t.Error("encoded payload reveals its json/plain encoding")
	}
	var got string
	if err := dc.FromPayload(p, &got); err != nil {
		t.Fatal(err)
	}
	if got != "secret prompt text" {
		t.Errorf("FromPayload = %q, want the original text", got)
	}
}

// Codec server.

const (
	testToken  = "s3cret-token"
	uiOrigin   = "http://localhost:8233"
	evilOrigin = "https://evil.example"
)

// post sends body to path on srv with the given headers and returns status, headers and body.
func post(t *testing.T, srv *httptest.Server, method, path string, headers map[string]string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// payloadsBody is a request body in the format the SDK's handler reads: protojson Payloads.
func payloadsBody(t *testing.T, ps ...*commonpb.Payload) []byte {
	t.Helper()
	b, err := protojson.Marshal(&commonpb.Payloads{Payloads: ps})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parsePayloads(t *testing.T, body []byte) []*commonpb.Payload {
	t.Helper()
	var ps commonpb.Payloads
	if err := protojson.Unmarshal(body, &ps); err != nil {
		t.Fatalf("response %q is not protojson Payloads: %v", body, err)
	}
	return ps.Payloads
}

func newTestServer(t *testing.T, keys Keys, token string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(NewServer(keys, token, []string{"", " " + uiOrigin + " "}))
	t.Cleanup(srv.Close)
	return srv
}

func TestServerDecodeRequiresTheBearerToken(t *testing.T) {
	keys := keyring("k1", map[string][]byte{"k1": newKey(t)})
	enc := encode(t, NewCodec(keys), jsonPayload("hello"))
	srv := newTestServer(t, keys, testToken)
	tests := []struct {
		name          string
		authorization string
		wantStatus    int
	}{
		{"right token", "Bearer " + testToken, http.StatusOK},
		{"scheme in lower case", "bearer " + testToken, http.StatusOK},
		{"no header", "", http.StatusUnauthorized},
		{"wrong token", "Bearer not-the-token", http.StatusUnauthorized},
		{"token prefix", "Bearer " + testToken[:4], http.StatusUnauthorized},
		{"token with a suffix", "Bearer " + testToken + "x", http.StatusUnauthorized},
		{"bare token without scheme", testToken, http.StatusUnauthorized},
		{"basic scheme", "Basic " + testToken, http.StatusUnauthorized},
		{"empty bearer", "Bearer ", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{"Content-Type": "application/json", "Origin": uiOrigin}
			if tt.authorization != "" {
				h["Authorization"] = tt.authorization
			}
			resp, body := post(t, srv, http.MethodPost, "/decode", h, payloadsBody(t, enc...))
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d (%s), want %d", resp.StatusCode, body, tt.wantStatus)
			}
			if tt.wantStatus == http.StatusOK {
				requireSamePayloads(t, parsePayloads(t, body), []*commonpb.Payload{jsonPayload("hello")})
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("401 Content-Type = %q, want application/json", ct)
			}
			if want := `{"error":"missing or invalid bearer token"}` + "\n"; string(body) != want {
				t.Errorf("401 body = %q, want %q", body, want)
			}
			// The UI must be able to read the 401, so it carries the CORS headers too.
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != uiOrigin {
				t.Errorf("401 Access-Control-Allow-Origin = %q, want %q", got, uiOrigin)
			}
			if bytes.Contains(body, []byte("hello")) {
				t.Error("401 body leaks the payload")
			}
		})
	}
}

func TestServerWithoutTokenNeedsNoAuthorization(t *testing.T) {
	keys := keyring("k1", map[string][]byte{"k1": newKey(t)})
	srv := newTestServer(t, keys, "")
	resp, body := post(t, srv, http.MethodPost, "/decode", nil, payloadsBody(t, jsonPayload("x")))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d (%s), want 200", resp.StatusCode, body)
	}
}

func TestServerCORSPreflightAllowsOnlyConfiguredOrigins(t *testing.T) {
	srv := newTestServer(t, keyring("k1", map[string][]byte{"k1": newKey(t)}), testToken)
	wantAllowed := map[string]string{
		"Access-Control-Allow-Origin":      uiOrigin,
		"Access-Control-Allow-Credentials": "true",
		"Access-Control-Allow-Headers":     "Content-Type, Authorization, X-Namespace",
		"Access-Control-Allow-Methods":     "POST, OPTIONS",
	}
	tests := []struct {
		name        string
		path        string
		origin      string
		wantHeaders bool
	}{
		{"allowed origin, decode", "/decode", uiOrigin, true},
		{"allowed origin, encode", "/encode", uiOrigin, true},
		{"other origin", "/decode", evilOrigin, false},
		{"allowed origin with a different port", "/decode", "http://localhost:8234", false},
		{"no origin", "/decode", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{
				"Access-Control-Request-Method":  "POST",
				"Access-Control-Request-Headers": "authorization,content-type,x-namespace",
			}
			if tt.origin != "" {
				h["Origin"] = tt.origin
			}
			resp, _ := post(t, srv, http.MethodOptions, tt.path, h, nil) // no Authorization
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("preflight status = %d, want 200", resp.StatusCode)
			}
			for k, v := range wantAllowed {
				got := resp.Header.Get(k)
				if tt.wantHeaders && got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
				if !tt.wantHeaders && got != "" {
					t.Errorf("%s = %q for origin %q, want none", k, got, tt.origin)
				}
			}
		})
	}
}

func TestServerEncodeThenDecodeOverHTTP(t *testing.T) {
	keys := keyring("k1", map[string][]byte{"k1": newKey(t)})
	srv := newTestServer(t, keys, testToken)
	auth := map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + testToken, "X-Namespace": "default"}
	orig := []*commonpb.Payload{
		jsonPayload("secret prompt through the UI"),
		{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingBinary)}, Data: []byte{0, 1, 2}},
	}

	resp, body := post(t, srv, http.MethodPost, "/encode", auth, payloadsBody(t, orig...))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/encode status = %d (%s)", resp.StatusCode, body)
	}
	enc := parsePayloads(t, body)
	if len(enc) != len(orig) {
		t.Fatalf("/encode returned %d payloads, want %d", len(enc), len(orig))
	}
	for i, p := range enc {
		if string(p.Metadata[converter.MetadataEncoding]) != EncodingEncrypted {
			t.Errorf("/encode payload %d is not encrypted: %v", i, p)
		}
	}
	if bytes.Contains(body, []byte("secret")) {
		t.Error("/encode response contains the plaintext")
	}
	// What the server encrypted, the package's own codec decrypts: one format.
	requireSamePayloads(t, decode(t, NewCodec(keys), enc...), orig)

	resp, body = post(t, srv, http.MethodPost, "/decode", auth, payloadsBody(t, enc...))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/decode status = %d (%s)", resp.StatusCode, body)
	}
	requireSamePayloads(t, parsePayloads(t, body), orig)
}

func TestServerDecodeErrorNamesTheKey(t *testing.T) {
	writer := keyring("k1", map[string][]byte{"k1": newKey(t)})
	enc := encode(t, NewCodec(writer), jsonPayload("hidden"))
	srv := newTestServer(t, keyring("k2", map[string][]byte{"k2": newKey(t)}), "")
	resp, body := post(t, srv, http.MethodPost, "/decode", nil, payloadsBody(t, enc...))
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status = %d, want 400", resp.StatusCode)
	}
	if !strings.Contains(string(body), `payload encrypted with key "k1", which this keyring does not have`) {
		t.Errorf("body = %q, want the unknown-key error", body)
	}
}

func TestServerHealthz(t *testing.T) {
	srv := newTestServer(t, keyring("k1", map[string][]byte{"k1": newKey(t)}), testToken)
	tests := []struct {
		name       string
		method     string
		path       string
		wantStatus int
	}{
		{"healthz without a token", http.MethodGet, "/healthz", http.StatusOK},
		{"decode is POST only", http.MethodGet, "/decode", http.StatusMethodNotAllowed},
		{"unknown path", http.MethodGet, "/nope", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(t, srv, tt.method, tt.path, nil, nil)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d (%s), want %d", resp.StatusCode, body, tt.wantStatus)
			}
		})
	}
}

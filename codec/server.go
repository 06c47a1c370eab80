// The codec server: the HTTP endpoint the Temporal UI (and `temporal --codec-endpoint`)
// posts payloads to, so that a person holding the token sees decrypted history while the
// Temporal server and its operators only ever store ciphertext.

package codec

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
)

// maxRequestBytes bounds a /encode or /decode body. The UI batches the payloads of a
// history page; this is well above any such batch yet stops a caller from exhausting
// memory, since the SDK's handler reads the whole body.
const maxRequestBytes = 64 << 20

// NewServer returns the codec server handler:
//
//	POST /encode, POST /decode  the SDK's payload codec handler over NewCodec(keys); the
//	                            body is {"payloads":[...]} in protojson, and so is the reply
//	GET  /healthz               200, no authentication
//	OPTIONS (any path)          CORS preflight, 200, no authentication
//
// When token is not empty, /encode and /decode require "Authorization: Bearer <token>" and
// answer 401 with a JSON error otherwise. Requests from an Origin in allowedOrigins (exact
// match, e.g. "http://localhost:8233") get CORS headers allowing the UI to call with
// credentials; other origins get none, so browsers refuse them. Surrounding spaces and empty
// entries in allowedOrigins are ignored.
func NewServer(keys Keys, token string, allowedOrigins []string) http.Handler {
	codec := converter.NewPayloadCodecHTTPHandler(NewCodec(keys))
	payloads := requireToken(token, http.MaxBytesHandler(codec, maxRequestBytes))

	mux := http.NewServeMux()
	mux.Handle("POST /encode", payloads)
	mux.Handle("POST /decode", payloads)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	return withCORS(cleanOrigins(allowedOrigins), mux)
}

// cleanOrigins trims the origins and drops empty ones, so that a flag split on commas
// ("a, b" or "") configures what it reads as.
func cleanOrigins(origins []string) []string {
	var out []string
	for _, o := range origins {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, o)
		}
	}
	return out
}

// withCORS answers preflights and adds the CORS headers for allowed origins. It runs before
// authentication: a browser sends a preflight without the Authorization header, and a 401
// must itself carry CORS headers for the UI to read it.
func withCORS(allowedOrigins []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" {
			h := w.Header()
			h.Add("Vary", "Origin")
			if slices.Contains(allowedOrigins, origin) {
				h.Set("Access-Control-Allow-Origin", origin)
				h.Set("Access-Control-Allow-Credentials", "true")
				h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization, X-Namespace")
				h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			}
		}
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusOK)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireToken lets a request through only with "Authorization: Bearer <token>"; an empty
// token disables the check. Both sides are hashed before the constant-time comparison, so
// neither the token's bytes nor its length leak through timing.
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		gotSum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(gotSum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="tacp codec"`)
			writeJSONError(w, http.StatusUnauthorized, "missing or invalid bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error string `json:"error"`
	}{msg})
}

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/tacp-dev/tacp/codec"
)

// cmdCodecServer serves the payload codec's /encode and /decode for the Temporal UI, so an
// operator with the key (and the bearer token) reads encrypted sessions in the UI.
func cmdCodecServer(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	listen := fs.String("listen", "127.0.0.1:8081", "address to serve on")
	token := fs.String("token", "", "bearer token the UI must send (TACP_TOKEN; empty: none, loopback only)")
	origins := fs.String("origins", "http://127.0.0.1:8233,http://localhost:8233", "comma-separated origins of the Temporal UI (CORS)")
	if !e.parse(fs, args, false) {
		return exitError
	}
	keys, ok, err := codec.LoadKeys(os.Getenv)
	if err != nil {
		return e.fail(fmt.Errorf("payload encryption keys: %w", err))
	}
	if !ok {
		return e.fail(errors.New("no keys: set TACP_CODEC_KEYS or TACP_CODEC_KEY_FILE"))
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return e.fail(fmt.Errorf("--listen %q: %w", *listen, err))
	}
	if *token == "" && !isLoopback(host) {
		return e.fail(errors.New("--token is required to serve beyond loopback"))
	}
	allowed := strings.Split(*origins, ",")
	handler := codec.NewServer(keys, *token, allowed)
	if *token == "" {
		handler = tokenlessGuard(allowed, handler)
	}
	srv := &http.Server{
		Addr:              *listen,
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	fmt.Fprintf(e.err, "codec server on http://%s (keys: current %s; set it as the Temporal UI's codec endpoint)\n", *listen, keys.Current)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return e.fail(err)
	}
	return exitOK
}

// tokenlessGuard is what stands before the keys of a tokenless codec server, the set-up the
// Temporal UI can use (its pages send no bearer token of ours). It refuses a request whose
// Host is not a loopback name: a page of another site whose name resolves to 127.0.0.1 (DNS
// rebinding) reaches the loopback address with its own name in Host. And it refuses a
// request from a page of an origin not in allowed: only the Temporal UI's pages, and programs
// on this machine (which send no Origin), reach the codec.
func tokenlessGuard(allowed []string, next http.Handler) http.Handler {
	origins := map[string]bool{}
	for _, o := range allowed {
		origins[strings.TrimSpace(o)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if !isLoopback(strings.Trim(host, "[]")) {
			http.Error(w, "a tokenless codec server answers only requests to a loopback name (localhost, 127.0.0.1, [::1]); serve it with --token to name it otherwise", http.StatusMisdirectedRequest)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && r.Method != http.MethodOptions && !origins[o] {
			http.Error(w, "a tokenless codec server answers only the pages of its --origins", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

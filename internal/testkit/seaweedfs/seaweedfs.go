// Package seaweedfs starts a real S3-compatible object store for tests: SeaweedFS's `weed
// mini` (master, volume, filer and S3 gateway in one process) on loopback ports, in a
// directory of the test's, with one identity whose keys the test gets.
//
// The binary is $TACP_WEED, else .ci/bin/weed (which .ci/peers builds from the module at
// the version it pins), else weed on PATH. Without it a test skips, or fails under
// TACP_REQUIRE_PEERS=1, as every test of a peer nobody on this team wrote does.
package seaweedfs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tacp-dev/tacp/internal/freeport"
)

// Server is a running store.
type Server struct {
	// Endpoint is its S3 URL, http://127.0.0.1:PORT.
	Endpoint string
	// AccessKeyID and SecretAccessKey are the keys of its one identity, which may do
	// everything.
	AccessKeyID, SecretAccessKey string
}

// Binary is the weed binary the tests run ("": none found).
func Binary() string {
	if b := os.Getenv("TACP_WEED"); b != "" {
		return b
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		b := filepath.Join(filepath.Dir(file), "..", "..", "..", ".ci", "bin", "weed")
		if _, err := os.Stat(b); err == nil {
			return b
		}
	}
	if b, err := exec.LookPath("weed"); err == nil {
		return b
	}
	return ""
}

// Command prepares a store in dir (its S3 identity and data) on free loopback ports, and
// returns it with the command that runs it, not started; bin is the weed binary.
func Command(bin, dir string) (*Server, *exec.Cmd, error) {
	s := &Server{AccessKeyID: "tacp-test", SecretAccessKey: "tacp-test-secret-" + strconv.Itoa(os.Getpid())}
	cfg, _ := json.Marshal(map[string]any{"identities": []any{map[string]any{
		"name":        "tacp",
		"credentials": []any{map[string]string{"accessKey": s.AccessKeyID, "secretKey": s.SecretAccessKey}},
		"actions":     []string{"Admin", "Read", "Write", "List", "Tagging"},
	}}})
	cfgFile := filepath.Join(dir, "s3.json")
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		return nil, nil, err
	}
	ports, err := freeport.Take("127.0.0.1", 8)
	if err != nil {
		return nil, nil, err
	}
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", ports[6])
	cmd := exec.Command(bin, "mini", "-dir="+data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-webdav=false", "-admin.ui=false", "-master.telemetry=false",
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.config="+cfgFile,
		"-master.port="+strconv.Itoa(ports[0]), "-master.port.grpc="+strconv.Itoa(ports[1]),
		"-volume.port="+strconv.Itoa(ports[2]), "-volume.port.grpc="+strconv.Itoa(ports[3]),
		"-filer.port="+strconv.Itoa(ports[4]), "-filer.port.grpc="+strconv.Itoa(ports[5]),
		"-s3.port="+strconv.Itoa(ports[6]), "-s3.port.grpc="+strconv.Itoa(ports[7]))
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return s, cmd, nil
}

// Ready waits until the store's S3 gateway answers, exited closes (with the process's end)
// or ctx ends.
func (s *Server) Ready(ctx context.Context, exited <-chan error) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("weed mini exited before it served S3: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("weed mini did not serve S3 at %s: %w", s.Endpoint, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Start runs a store until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		if os.Getenv("TACP_REQUIRE_PEERS") == "1" {
			t.Fatal("TACP_REQUIRE_PEERS=1 but " + Missing)
		}
		t.Skip(Missing + " (TACP_REQUIRE_PEERS=1 makes this a failure)")
	}
	dir := t.TempDir()
	s, cmd, err := Command(bin, dir)
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "weed.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		_ = log.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := s.Ready(ctx, exited); err != nil {
		b, _ := os.ReadFile(log.Name())
		t.Fatalf("%v\n%s", err, tail(b, 4000))
	}
	return s
}

// Missing says how to get the weed binary.
const Missing = "no SeaweedFS weed binary ($TACP_WEED, .ci/bin/weed or PATH): run `bash .ci/peers`"

// Env is the worker's environment that reaches the store with its keys.
func (s *Server) Env() []string {
	return []string{"TACP_S3_ACCESS_KEY_ID=" + s.AccessKeyID, "TACP_S3_SECRET_ACCESS_KEY=" + s.SecretAccessKey}
}

// Lookup reads a variable of env, a list of NAME=VALUE as Env gives ("" when it has none),
// for checkpoint.Reader's Getenv.
func Lookup(env []string) func(string) string {
	return func(name string) string {
		for _, kv := range env {
			if k, v, _ := strings.Cut(kv, "="); k == name {
				return v
			}
		}
		return ""
	}
}

// URL is a checkpoint store in bucket on this server.
func (s *Server) URL(bucket, prefix string) string {
	return "s3://" + bucket + "/" + prefix + "?endpoint=" + s.Endpoint
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

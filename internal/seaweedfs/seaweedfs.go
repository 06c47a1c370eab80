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
		b := filepath.Join(filepath.Dir(file), "..", "..", ".ci", "bin", "weed")
		if _, err := os.Stat(b); err == nil {
			return b
		}
	}
	if b, err := exec.LookPath("weed"); err == nil {
		return b
	}
	return ""
}

// Start runs a store until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		const missing = "no SeaweedFS weed binary ($TACP_WEED, .ci/bin/weed or PATH): run `bash .ci/peers`"
		if os.Getenv("TACP_REQUIRE_PEERS") == "1" {
			t.Fatal("TACP_REQUIRE_PEERS=1 but " + missing)
		}
		t.Skip(missing + " (TACP_REQUIRE_PEERS=1 makes this a failure)")
	}
	dir := t.TempDir()
	s := &Server{AccessKeyID: "tacp-test", SecretAccessKey: "tacp-test-secret-" + strconv.Itoa(os.Getpid())}
	cfg, _ := json.Marshal(map[string]any{"identities": []any{map[string]any{
		"name":        "tacp",
		"credentials": []any{map[string]string{"accessKey": s.AccessKeyID, "secretKey": s.SecretAccessKey}},
		"actions":     []string{"Admin", "Read", "Write", "List", "Tagging"},
	}}})
	cfgFile := filepath.Join(dir, "s3.json")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	ports, err := freeport.Take("127.0.0.1", 8)
	if err != nil {
		t.Fatal(err)
	}
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", ports[6])
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "weed.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "mini", "-dir="+data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-webdav=false", "-admin.ui=false", "-master.telemetry=false",
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.config="+cfgFile,
		"-master.port="+strconv.Itoa(ports[0]), "-master.port.grpc="+strconv.Itoa(ports[1]),
		"-volume.port="+strconv.Itoa(ports[2]), "-volume.port.grpc="+strconv.Itoa(ports[3]),
		"-filer.port="+strconv.Itoa(ports[4]), "-filer.port.grpc="+strconv.Itoa(ports[5]),
		"-s3.port="+strconv.Itoa(ports[6]), "-s3.port.grpc="+strconv.Itoa(ports[7]))
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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
	// Ready when the S3 gateway answers a signed-or-not request with any HTTP status and a
	// bucket can be written: the filer behind it is up.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			return s
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("weed mini exited before it served S3: %v\n%s", err, tail(b, 4000))
		case <-ctx.Done():
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("weed mini did not serve S3 at %s: %s", s.Endpoint, tail(b, 4000))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Env is the worker's environment that reaches the store with its keys.
func (s *Server) Env() []string {
	return []string{"TACP_S3_ACCESS_KEY_ID=" + s.AccessKeyID, "TACP_S3_SECRET_ACCESS_KEY=" + s.SecretAccessKey}
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

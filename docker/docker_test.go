// Package docker holds the container files; no Docker engine runs where the tests run, so
// these tests check what can be checked without one: the compose file parses and names the
// images, ports and health checks the README promises, and the Dockerfile builds with the
// command CI runs.
package docker

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/tacp-dev/tacp/checkpoint"
	"github.com/tacp-dev/tacp/internal/testkit/seaweedfs"
)

type compose struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Ports       []string          `yaml:"ports"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		Build *struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
	} `yaml:"services"`
}

func TestComposeNamesTheServicesTheREADMEPromises(t *testing.T) {
	b, err := os.ReadFile("compose.yaml")
	require.NoError(t, err)
	var c compose
	require.NoError(t, yaml.Unmarshal(b, &c))
	images := map[string]string{}
	for name, s := range c.Services {
		images[name] = s.Image
	}
	require.Equal(t, "postgres:15", images["postgresql"])
	require.True(t, strings.HasPrefix(images["temporal"], "temporalio/auto-setup:"), images["temporal"])
	require.True(t, strings.HasPrefix(images["temporal-ui"], "temporalio/ui:"), images["temporal-ui"])
	require.Equal(t, "tacp", images["worker"])
	require.Equal(t, []string{"127.0.0.1:7233:7233"}, c.Services["temporal"].Ports)
	require.Equal(t, []string{"127.0.0.1:8080:8080"}, c.Services["temporal-ui"].Ports)
	for _, name := range []string{"postgresql", "temporal", "worker"} {
		require.NotNil(t, c.Services[name].Healthcheck, "%s has a health check", name)
	}
	require.Equal(t, "docker/Dockerfile", c.Services["worker"].Build.Dockerfile)
	require.Equal(t, "temporal:7233", c.Services["worker"].Environment["TEMPORAL_ADDRESS"])

	// The server reads tacp's dynamic config, and that file sets what the embedded server sets.
	require.Contains(t, c.Services["temporal"].Volumes, "./dynamicconfig:/etc/temporal/config/dynamicconfig:ro")
	require.Equal(t, "config/dynamicconfig/tacp.yaml", c.Services["temporal"].Environment["DYNAMIC_CONFIG_FILE_PATH"])
	b, err = os.ReadFile("dynamicconfig/tacp.yaml")
	require.NoError(t, err)
	var dc map[string][]struct {
		Value any `yaml:"value"`
	}
	require.NoError(t, yaml.Unmarshal(b, &dc))
	for key, want := range map[string]any{
		"history.transferProcessorMaxPollRPS": 1000,
		"history.timerProcessorMaxPollRPS":    1000,
		"system.enableActivityEagerExecution": true,
		"history.MaxBufferedQueryCount":       32,
	} {
		require.Len(t, dc[key], 1, key)
		require.Equal(t, want, dc[key][0].Value, key)
	}
}

var buildLine = regexp.MustCompile(`CGO_ENABLED=0 go build -o (?:"[^"]*"|\S+) (\./\S+(?: \./\S+)*)`)

func TestDockerfileBuildsWhatCIBuilds(t *testing.T) {
	dockerfile, err := os.ReadFile("Dockerfile")
	require.NoError(t, err)
	ci, err := os.ReadFile("../.ci/run")
	require.NoError(t, err)
	d := buildLine.FindStringSubmatch(string(dockerfile))
	c := buildLine.FindStringSubmatch(string(ci))
	require.NotNil(t, d, "the Dockerfile's build command")
	require.NotNil(t, c, ".ci/run's build command")
	require.Equal(t, c[1], d[1], "the Dockerfile builds the packages CI builds")
	require.Contains(t, string(dockerfile), "FROM golang:"+strings.TrimPrefix(toolchain(t), "go"), "the Go of go.mod's toolchain line")
	require.Contains(t, string(ci), "export GOTOOLCHAIN="+toolchain(t), "CI builds with that Go too")
}

// The compose file's S3 store as the worker reaches it: the s3 service's command (its paths
// and ports moved onto this machine) runs the weed binary the tests pin, and the worker's
// store URL and keys take a checkpoint there and read it back.
func TestComposeCheckpointStoreTakesTheWorkersKeys(t *testing.T) {
	b, err := os.ReadFile("compose.yaml")
	require.NoError(t, err)
	var c compose
	require.NoError(t, yaml.Unmarshal(b, &c))
	s3svc, worker := c.Services["s3"], c.Services["worker"]
	require.True(t, strings.HasPrefix(s3svc.Image, "chrislusf/seaweedfs:"), s3svc.Image)
	require.Contains(t, s3svc.Volumes, "./s3.json:/etc/seaweedfs/s3.json:ro")
	env := worker.Environment
	store, err := url.Parse(env["TACP_CHECKPOINT_STORE"])
	require.NoError(t, err)
	require.Equal(t, "http://s3:8333", store.Query().Get("endpoint"), "the worker reaches the s3 service")

	bin := seaweedfs.Binary()
	if bin == "" {
		if os.Getenv("TACP_REQUIRE_PEERS") == "1" {
			t.Fatal("TACP_REQUIRE_PEERS=1 but " + seaweedfs.Missing)
		}
		t.Skip(seaweedfs.Missing)
	}
	dir := t.TempDir()
	srv, probe, err := seaweedfs.Command(bin, dir) // its free ports, on loopback
	require.NoError(t, err)
	var args []string
	for _, a := range s3svc.Command {
		switch {
		case a == "-dir=/data":
			a = "-dir=" + filepath.Join(dir, "data")
		case a == "-s3.config=/etc/seaweedfs/s3.json":
			a = "-s3.config=s3.json"
		case a == "-ip.bind=0.0.0.0":
			a = "-ip.bind=127.0.0.1"
		}
		args = append(args, a)
	}
	for _, a := range probe.Args[1:] {
		if strings.Contains(a, ".port") || strings.HasPrefix(a, "-ip=") {
			args = append(args, a)
		}
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = "." // s3.json is the compose file's own
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, srv.Ready(ctx, exited))

	q := store.Query()
	q.Set("endpoint", srv.Endpoint)
	store.RawQuery = q.Encode()
	rd := checkpoint.Reader{URL: store.String(), Getenv: func(k string) string { return env[k] }}
	st, err := checkpoint.OpenStoreWith(ctx, rd)
	require.NoError(t, err, "the worker's keys open the store")
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644))
	sh := &checkpoint.Shadows{Dir: t.TempDir(), Store: st}
	res, err := sh.Checkpoint(ctx, "compose", ws, 1, "one")
	require.NoError(t, err)
	id, err := rd.Commit(ctx, "compose", 1)
	require.NoError(t, err)
	require.Equal(t, res.ID, id)

	bad := rd
	bad.Getenv = func(k string) string {
		if k == checkpoint.EnvS3SecretAccessKey {
			return "not-the-secret"
		}
		return env[k]
	}
	_, err = bad.Commit(ctx, "compose", 1)
	require.Error(t, err, "another secret is refused")
}

// toolchain is the Go that go.mod's toolchain line names ("go1.27.3").
func toolchain(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../go.mod")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^toolchain (go\S+)$`).FindSubmatch(b)
	require.NotNil(t, m, "go.mod names the toolchain releases are built with")
	return string(m[1])
}

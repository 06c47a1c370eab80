package main

// The cluster itself: its state (state.json in the state dir), and `up`, which builds the
// server and its SQL tool, takes the ports and starts it all in order: PostgreSQL and the
// schema (postgres.go), the four service processes (config.go, services.go) and the
// namespace (namespace.go); down.go tears it all down. Every process is started in a
// process group of its own (so a ctrl-C in the terminal reaches only this command) and
// killed by the process id recorded in state.json, after checking that the id still names
// a process of this cluster (its command line holds this cluster's config path).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tacp-dev/tacp/internal/freeport"
	"github.com/tacp-dev/tacp/internal/testkit/seaweedfs"
)

// Services are the Temporal services, each run as its own process, in start order. They
// start one after the other: the first start of each races to create the cluster metadata
// row otherwise.
var Services = []string{"history", "matching", "frontend", "worker"}

const (
	namespace = "default"
	stateFile = "state.json"
	pgUser    = "temporal"
	pgPass    = "temporal"
)

// Ports are one service's listening ports on 127.0.0.1.
type Ports struct {
	GRPC       int `json:"grpc"`
	Membership int `json:"membership"`
	HTTP       int `json:"http,omitempty"`
}

// State is what `up` leaves behind for chaos, bench and down: state.json in the state dir.
type State struct {
	Dir       string           `json:"dir"`
	PGBin     string           `json:"pg_bin"`
	PGPort    int              `json:"pg_port"`
	Server    string           `json:"server"`   // temporal-server binary
	SQLTool   string           `json:"sql_tool"` // temporal-sql-tool binary
	Config    string           `json:"config"`
	ModRoot   string           `json:"mod_root"` // tacp's module root
	Ports     map[string]Ports `json:"ports"`
	PIDs      map[string]int   `json:"pids"` // service (or "tacp-worker") → process id
	LogLevel  string           `json:"log_level"`
	Shards    int              `json:"shards"`
	StartedAt time.Time        `json:"started_at"`
	// S3 is the workers' checkpoint store (s3.go; nil: none runs).
	S3 *seaweedfs.Server `json:"s3,omitempty"`
}

// Frontend is the frontend's gRPC address, the cluster's TEMPORAL_ADDRESS.
func (st *State) Frontend() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(st.Ports["frontend"].GRPC))
}

func (st *State) pgData() string { return filepath.Join(st.Dir, "pg", "data") }

func (st *State) logDir() string { return filepath.Join(st.Dir, "logs") }

func (st *State) save() error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(st.Dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(st.Dir, stateFile))
}

func loadState(dir string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("no cluster state in %s: %w", dir, err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, stateFile), err)
	}
	return &st, nil
}

// logf prints a progress line with the time since start.
var t0 = time.Now()

func logf(format string, args ...any) {
	fmt.Printf("[%6.1fs] %s\n", time.Since(t0).Seconds(), fmt.Sprintf(format, args...))
}

// up builds and starts the whole cluster. On any error (ctrl-C and -timeout included) it
// tears down what it started.
func up(ctx context.Context, o options) (st *State, err error) {
	if prev, lerr := loadState(o.dir); lerr == nil {
		if alive := prev.alive(); len(alive) > 0 {
			return nil, fmt.Errorf("a cluster is already up in %s (services %v, frontend %s); `down` first", o.dir, alive, prev.Frontend())
		}
		return nil, fmt.Errorf("stale cluster state in %s; run `go run ./bench/cluster down` first", o.dir)
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return nil, err
	}
	// PostgreSQL runs as the postgres user, which must reach its data dir inside this one.
	if err := os.Chmod(o.dir, 0o755); err != nil {
		return nil, err
	}
	st = &State{Dir: o.dir, PGBin: o.pgBin, PIDs: map[string]int{}, LogLevel: o.logLevel, Shards: o.shards, StartedAt: time.Now()}
	defer func() {
		if err != nil {
			logf("up failed: tearing down (logs were in %s)", st.logDir())
			printLogTails(st)
			if derr := down(o.dir); derr != nil {
				logf("down: %v", derr)
			}
		}
	}()
	if err := os.MkdirAll(st.logDir(), 0o755); err != nil {
		return st, err
	}
	if st.ModRoot, err = modRoot(ctx); err != nil {
		return st, err
	}
	if err := st.save(); err != nil {
		return st, err
	}

	logf("building temporal-server and temporal-sql-tool (go.temporal.io/server v1.32.0; minutes on a cold build cache)")
	if err := st.build(ctx); err != nil {
		return st, err
	}
	if err := st.allocatePorts(); err != nil {
		return st, err
	}
	logf("starting PostgreSQL on 127.0.0.1:%d", st.PGPort)
	if err := st.startPostgres(ctx); err != nil {
		return st, err
	}
	if err := st.save(); err != nil {
		return st, err
	}
	if err := st.startS3(ctx); err != nil {
		return st, err
	}
	if st.S3 != nil {
		logf("the workers' checkpoint store is up: %s", st.checkpointStore())
	}
	logf("setting up the temporal and temporal_visibility schemas")
	if err := st.setupSchema(ctx); err != nil {
		return st, err
	}
	if err := st.writeConfig(); err != nil {
		return st, err
	}
	for _, svc := range Services {
		if _, err := st.startService(svc); err != nil {
			return st, err
		}
		if err := st.waitPort(ctx, svc, 2*time.Minute); err != nil {
			return st, err
		}
		logf("%s is up (pid %d, grpc 127.0.0.1:%d)", svc, st.PIDs[svc], st.Ports[svc].GRPC)
	}
	logf("registering namespace %q and tacp's search attributes", namespace)
	if err := st.register(ctx); err != nil {
		return st, err
	}
	logf("cluster is up: TEMPORAL_ADDRESS=%s TEMPORAL_NAMESPACE=%s (state in %s)", st.Frontend(), namespace, st.Dir)
	return st, nil
}

// modRoot is tacp's module root, where `go` runs.
func modRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("run this inside the tacp module")
	}
	return filepath.Dir(gomod), nil
}

// goCmd is a go command in the module root, without cgo (the build cache is warm that way).
// It runs in a process group of its own, which ctx's end stops as a whole: the go command
// and what it started (compilers, a test binary and its agents).
func (st *State) goCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = st.ModRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	return cmd
}

// build builds the server and the SQL tool. go.mod lists both as tools (`tool` directive),
// so their dependencies are pinned beside tacp's and `go tool -n` builds each once into the
// Go build cache and prints its path.
func (st *State) build(ctx context.Context) error {
	for _, t := range []struct {
		name string
		dst  *string
	}{{"server", &st.Server}, {"sql", &st.SQLTool}} {
		out, err := st.goCmd(ctx, "tool", "-n", t.name).Output()
		if err != nil {
			return fmt.Errorf("go tool -n %s: %w%s", t.name, err, stderrOf(err))
		}
		*t.dst = strings.TrimSpace(string(out))
	}
	return nil
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return "\n" + string(ee.Stderr)
	}
	return ""
}

// allocatePorts takes free loopback ports for PostgreSQL and every service, below 32768
// (freeport): the SQL schema keeps membership ports in a smallint, so ephemeral ports will
// not do. The search starts at a random port so that two clusters on one machine rarely meet.
func (st *State) allocatePorts() error {
	ports, err := freeport.Take("127.0.0.1", 1+2*len(Services)+1)
	if err != nil {
		return err
	}
	st.PGPort, ports = ports[0], ports[1:]
	st.Ports = map[string]Ports{}
	for i, svc := range Services {
		st.Ports[svc] = Ports{GRPC: ports[2*i], Membership: ports[2*i+1]}
	}
	fe := st.Ports["frontend"]
	fe.HTTP = ports[len(ports)-1]
	st.Ports["frontend"] = fe
	return nil
}

// printLogTails prints the end of every service log, to explain a failure.
func printLogTails(st *State) {
	ents, err := os.ReadDir(st.logDir())
	if err != nil {
		return
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(st.logDir(), e.Name()))
		if err != nil || len(b) == 0 {
			continue
		}
		if len(b) > 2000 {
			b = b[len(b)-2000:]
		}
		fmt.Printf("--- tail of %s ---\n%s\n", e.Name(), b)
	}
}

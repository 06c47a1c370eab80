package main

// The cluster itself: building the server, PostgreSQL, the schema, the four service
// processes, the namespace, and tearing it all down. Every process is started in a process
// group of its own (so a ctrl-C in the terminal reaches only this command) and killed by the
// process id recorded in state.json, after checking that the id still names a process of
// this cluster (its command line holds this cluster's config path).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/template"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tacp-dev/tacp/internal/freeport"
	"github.com/tacp-dev/tacp/internal/proctree"
	"github.com/tacp-dev/tacp/signals"
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

// --- PostgreSQL ---

// asPostgres runs a PostgreSQL binary; as root it runs as the postgres user, which
// PostgreSQL insists on.
func (st *State) asPostgres(ctx context.Context, bin string, args ...string) *exec.Cmd {
	path := filepath.Join(st.PGBin, bin)
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = filepath.Join(st.Dir, "pg")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// run runs cmd; a failure carries the end of its output.
func run(cmd *exec.Cmd) error {
	out, err := cmd.CombinedOutput()
	if err != nil {
		if len(out) > 4000 {
			out = append([]byte("..."), out[len(out)-4000:]...)
		}
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return nil
}

func (st *State) startPostgres(ctx context.Context) error {
	pgDir := filepath.Join(st.Dir, "pg")
	if err := os.MkdirAll(pgDir, 0o700); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("PostgreSQL will not run as root and there is no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(pgDir, uid, gid); err != nil {
			return err
		}
	}
	if err := run(st.asPostgres(ctx, "initdb", "-D", st.pgData(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync")); err != nil {
		return err
	}
	// Loopback TCP only; no unix socket. Each service keeps up to 20+10 connections.
	conf := fmt.Sprintf("\n# tacp bench/cluster\nport = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\nmax_connections = 300\n", st.PGPort)
	f, err := os.OpenFile(filepath.Join(st.pgData(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(conf); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := run(st.asPostgres(ctx, "pg_ctl", "-D", st.pgData(), "-l", filepath.Join(pgDir, "postgres.log"), "-w", "-t", "60", "start")); err != nil {
		return err
	}
	psql := exec.CommandContext(ctx, filepath.Join(st.PGBin, "psql"), "-X", "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(st.PGPort), "-U", "postgres", "-d", "postgres",
		"-v", "ON_ERROR_STOP=1", "-c", fmt.Sprintf("CREATE ROLE %s LOGIN SUPERUSER PASSWORD '%s'", pgUser, pgPass))
	return run(psql)
}

// setupSchema creates both databases and applies the versioned schema shipped in the
// server module, with the server's own SQL tool.
func (st *State) setupSchema(ctx context.Context) error {
	out, err := st.goCmd(ctx, "list", "-m", "-f", "{{.Dir}}", "go.temporal.io/server").Output()
	if err != nil {
		return fmt.Errorf("locate go.temporal.io/server: %w%s", err, stderrOf(err))
	}
	schemaRoot := filepath.Join(strings.TrimSpace(string(out)), "schema", "postgresql", "v12")
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for _, db := range []struct{ name, schema string }{
		{"temporal", "temporal"},
		{"temporal_visibility", "visibility"},
	} {
		base := []string{"--ep", "127.0.0.1", "-p", strconv.Itoa(st.PGPort), "-u", pgUser, "--pw", pgPass, "--pl", "postgres12", "--db", db.name}
		for _, args := range [][]string{
			{"create-database"},
			{"setup-schema", "-v", "0.0"},
			{"update-schema", "-d", filepath.Join(schemaRoot, db.schema, "versioned")},
		} {
			cmd := exec.CommandContext(ctx, st.SQLTool, append(base, args...)...)
			cmd.Dir = st.Dir
			if err := run(cmd); err != nil {
				return fmt.Errorf("the schema of %s (bounded by 3m0s): %w", db.name, err)
			}
		}
	}
	return nil
}

// --- the Temporal services ---

var configTemplate = template.Must(template.New("config").Parse(`# Written by tacp bench/cluster: four services on loopback, PostgreSQL 15.
log:
  stdout: true
  level: {{.LogLevel}}

persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: {{.Shards}}
  datastores:
    postgres-default:
      sql:
        pluginName: postgres12
        databaseName: temporal
        connectAddr: "127.0.0.1:{{.PGPort}}"
        connectProtocol: tcp
        user: {{.User}}
        password: {{.Pass}}
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: 1h
    postgres-visibility:
      sql:
        pluginName: postgres12
        databaseName: temporal_visibility
        connectAddr: "127.0.0.1:{{.PGPort}}"
        connectProtocol: tcp
        user: {{.User}}
        password: {{.Pass}}
        maxConns: 10
        maxIdleConns: 10
        maxConnLifetime: 1h

global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: "127.0.0.1"

services:
{{- range $name, $p := .Ports}}
  {{$name}}:
    rpc:
      grpcPort: {{$p.GRPC}}
      membershipPort: {{$p.Membership}}
      bindOnLocalHost: true
{{- if $p.HTTP}}
      httpPort: {{$p.HTTP}}
{{- end}}
{{- end}}

clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: "{{.Frontend}}"

dcRedirectionPolicy:
  policy: noop

archival:
  history:
    state: disabled
  visibility:
    state: disabled

namespaceDefaults:
  archival:
    history:
      state: disabled
    visibility:
      state: disabled

dynamicConfigClient:
  filepath: "{{.DynamicConfig}}"
  pollInterval: 10s
`))

// dynamicConfig matches devserver's settings, except that search attributes are read
// through the cache as in production (devserver forces a refresh on every read).
const dynamicConfig = `frontend.enableUpdateWorkflowExecution:
  - value: true
frontend.enableUpdateWorkflowExecutionAsyncAccepted:
  - value: true
system.enableEagerWorkflowStart:
  - value: true
system.enableActivityEagerExecution:
  - value: true
history.transferProcessorMaxPollRPS:
  - value: 1000
history.timerProcessorMaxPollRPS:
  - value: 1000
history.MaxBufferedQueryCount:
  - value: 32
limit.maxIDLength:
  - value: 255
`

func (st *State) writeConfig() error {
	dc := filepath.Join(st.Dir, "dynamicconfig.yaml")
	if err := os.WriteFile(dc, []byte(dynamicConfig), 0o644); err != nil {
		return err
	}
	var b bytes.Buffer
	err := configTemplate.Execute(&b, map[string]any{
		"LogLevel": st.LogLevel, "Shards": st.Shards, "PGPort": st.PGPort, "User": pgUser, "Pass": pgPass,
		"Ports": st.Ports, "Frontend": st.Frontend(), "DynamicConfig": dc,
	})
	if err != nil {
		return err
	}
	st.Config = st.configPath()
	return os.WriteFile(st.Config, b.Bytes(), 0o644)
}

// startService starts one service process, appending to its log, and records its pid.
func (st *State) startService(svc string) (int, error) {
	logf, err := os.OpenFile(filepath.Join(st.logDir(), svc+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n=== tacp bench/cluster: start %s at %s ===\n", svc, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(st.Server, "--config-file", st.Config, "--allow-no-auth", "start", "--service", svc)
	cmd.Dir = st.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", svc, err)
	}
	pid := track(cmd)
	st.PIDs[svc] = pid
	return pid, st.save()
}

// child is a process this process started and reaps: done closes when it has exited, how
// is then how it ended ("signal: killed", "exit status 1").
type child struct {
	done chan struct{}
	how  string
}

// children are the processes this process started (track), by pid.
var children sync.Map

// track reaps cmd, started, when it exits, and remembers how it ended; it returns its pid.
// While this process has not reaped it, its pid names it and nothing else.
func track(cmd *exec.Cmd) int {
	c := &child{done: make(chan struct{})}
	pid := cmd.Process.Pid
	children.Store(pid, c)
	go func() {
		_ = cmd.Wait()
		c.how = cmd.ProcessState.String()
		close(c.done)
	}()
	return pid
}

// running reports whether pid is a live process of this cluster. A process this process
// started is asked through its reaper: /proc/PID/cmdline, which ours reads, is empty for a
// moment after exec has returned to the parent and before the new program's arguments are
// in place, and a service just started would pass for dead then.
func (st *State) running(pid int) bool {
	if v, ok := children.Load(pid); ok {
		select {
		case <-v.(*child).done:
			return false
		default:
			return true
		}
	}
	return st.ours(pid)
}

// exitOf says how the process pid, which this process started, ended, waiting a moment for
// its reaper; "" when it was not started here.
func exitOf(pid int) string {
	v, ok := children.Load(pid)
	if !ok {
		return ""
	}
	select {
	case <-v.(*child).done:
		return v.(*child).how
	case <-time.After(time.Second):
		return ""
	}
}

// waitPort waits until svc accepts TCP connections on its gRPC port.
func (st *State) waitPort(ctx context.Context, svc string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(st.Ports[svc].GRPC))
	for {
		if pid := st.PIDs[svc]; !st.running(pid) {
			how := ""
			if e := exitOf(pid); e != "" {
				how = " (" + e + ")"
			}
			return fmt.Errorf("%s (pid %d) exited%s before it opened %s%s", svc, pid, how, addr, st.logTail(svc))
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s did not open %s within %s%s", svc, addr, limit, st.logTail(svc))
			}
			return fmt.Errorf("waiting for %s to open %s: %w", svc, addr, context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// logTail is the end of a service's log, for an error message.
func (st *State) logTail(svc string) string {
	path := filepath.Join(st.logDir(), svc+".log")
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return fmt.Sprintf("\n(%s's log %s is empty)", svc, path)
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return fmt.Sprintf("\n--- end of %s's log (%s) ---\n%s", svc, path, b)
}

// ours reports whether pid is a live process of this cluster: a service started with this
// cluster's config file, or a binary built into its state directory (tacp's worker and
// testagent). PostgreSQL is pg_ctl's to stop.
func (st *State) ours(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// A zombie (exited, not yet reaped) is not running.
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
			return false
		}
	}
	args := bytes.Split(b, []byte{0})
	if bytes.HasPrefix(args[0], []byte(st.Dir+string(os.PathSeparator))) {
		return true
	}
	return bytes.Contains(b, []byte("--config-file\x00"+st.configPath()+"\x00"))
}

func (st *State) configPath() string { return filepath.Join(st.Dir, "temporal.yaml") }

// restartDead starts again every service that is not running (a chaos run cut short
// between a kill and the restart leaves one dead) and waits until it listens.
func (st *State) restartDead(ctx context.Context) {
	for _, svc := range Services {
		if st.running(st.PIDs[svc]) {
			continue
		}
		if err := st.restart(ctx, svc); err != nil {
			logf("restart %s: %v", svc, err)
			continue
		}
		logf("restarted %s (pid %d)", svc, st.PIDs[svc])
	}
}

// alive lists the services whose recorded process still runs.
func (st *State) alive() []string {
	var out []string
	for _, svc := range Services {
		if st.running(st.PIDs[svc]) {
			out = append(out, svc)
		}
	}
	return out
}

// kill9 kills a service with SIGKILL and waits until it is gone: every thread of it ended
// and its ports refusing connections. The process shows as a zombie as soon as its main
// thread has exited, while its other threads may still be ending and holding its listening
// sockets: a service started again then would find its ports taken, and a dial to the old
// socket would pass for the new process being up.
func (st *State) kill9(ctx context.Context, svc string) error {
	pid := st.PIDs[svc]
	if !st.running(pid) {
		return fmt.Errorf("%s (pid %d) is not running", svc, pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 %s (pid %d): %w", svc, pid, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for !gone(pid) || st.listening(svc) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s (pid %d) still runs or holds its ports after kill -9: %w", svc, pid, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// gone reports whether pid has exited with every thread: reaped, or a zombie whose other
// threads have ended too (its only task is itself).
func gone(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return true
	}
	if len(tasks) > 1 {
		return false
	}
	f := statFields(pid)
	return f == nil || f[0] == "Z"
}

// listening reports whether any of svc's ports accepts a connection.
func (st *State) listening(svc string) bool {
	p := st.Ports[svc]
	for _, port := range []int{p.GRPC, p.Membership, p.HTTP} {
		if port == 0 {
			continue
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			_ = c.Close()
			return true
		}
	}
	return false
}

// restart starts svc again after kill9 and waits until it serves, as a supervisor (systemd,
// Kubernetes) does: a start that exits before it opens its port is logged with how it ended
// and tried again, up to three starts.
func (st *State) restart(ctx context.Context, svc string) error {
	var err error
	for try := 1; try <= 3; try++ {
		if _, err = st.startService(svc); err != nil {
			return err
		}
		if err = st.waitPort(ctx, svc, 2*time.Minute); err == nil || st.running(st.PIDs[svc]) || ctx.Err() != nil {
			return err
		}
		logf("start %d of %s: %v", try, svc, err)
	}
	return err
}

// register registers the namespace and tacp's search attributes, then waits until a
// workflow can upsert all of them: that proves frontend, history and matching serve the
// namespace and every service's caches know the attributes.
func (st *State) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	nc, err := retryDial(ctx, func() (client.NamespaceClient, error) {
		return client.NewNamespaceClient(client.Options{HostPort: st.Frontend(), Logger: quietLogger()})
	})
	if err != nil {
		return err
	}
	defer nc.Close()
	for {
		err = nc.Register(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace:                        namespace,
			WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
		})
		var exists *serviceerror.NamespaceAlreadyExists
		if err == nil || errors.As(err, &exists) {
			break
		}
		if serr := sleepCtx(ctx, 500*time.Millisecond); serr != nil {
			return fmt.Errorf("register namespace %s: %w", namespace, err)
		}
	}
	c, err := retryDial(ctx, func() (client.Client, error) {
		return client.Dial(client.Options{HostPort: st.Frontend(), Namespace: namespace, Logger: quietLogger()})
	})
	if err != nil {
		return err
	}
	defer c.Close()
	for {
		_, err = signals.EnsureSearchAttributes(ctx, c, namespace)
		if err == nil {
			break
		}
		if serr := sleepCtx(ctx, 500*time.Millisecond); serr != nil {
			return fmt.Errorf("search attributes: %w", err)
		}
	}
	return probe(ctx, c)
}

// probeWorkflow upserts every tacp search attribute, as SessionWorkflow does.
func probeWorkflow(ctx workflow.Context) error {
	return workflow.UpsertTypedSearchAttributes(ctx,
		temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrSessionState).ValueSet(signals.StateIdle),
		temporal.NewSearchAttributeKeyInt64(signals.SearchAttrTurn).ValueSet(0),
		temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrAgent).ValueSet("probe"),
		temporal.NewSearchAttributeKeyBool(signals.SearchAttrAwaitingApproval).ValueSet(false),
	)
}

func probe(ctx context.Context, c client.Client) error {
	queue := "tacp-cluster-probe-" + signals.NewID()[:8]
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(probeWorkflow, workflow.RegisterOptions{Name: "TacpClusterProbe"})
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		run, err := c.ExecuteWorkflow(pctx, client.StartWorkflowOptions{
			ID: "tacp-cluster-probe-" + signals.NewID(), TaskQueue: queue,
			WorkflowExecutionTimeout: 30 * time.Second,
		}, "TacpClusterProbe")
		if err == nil {
			err = run.Get(pctx, nil)
		}
		cancel()
		if err == nil {
			return nil
		}
		if serr := sleepCtx(ctx, time.Second); serr != nil {
			return fmt.Errorf("probe workflow: %w", err)
		}
	}
}

func retryDial[T any](ctx context.Context, dial func() (T, error)) (T, error) {
	for {
		c, err := dial()
		if err == nil {
			return c, nil
		}
		if serr := sleepCtx(ctx, 500*time.Millisecond); serr != nil {
			var zero T
			return zero, fmt.Errorf("dial frontend: %w", err)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// --- down ---

// down stops every process of the cluster in dir and removes dir.
func down(dir string) error {
	st, err := loadState(dir)
	if err != nil {
		if _, serr := os.Stat(dir); errors.Is(serr, os.ErrNotExist) {
			fmt.Println("nothing to stop: no", dir)
			return nil
		}
		st = &State{Dir: dir, PGBin: "/usr/lib/postgresql/15/bin"}
	}
	stopCluster(st)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	logf("removed %s", dir)
	return nil
}

// stopCluster stops every process of the cluster in st and PostgreSQL, and keeps the state
// directory (its logs). The processes are the cluster's (ours: the recorded ones and any a
// crashed run started without recording) and every process they started (an agent runs the
// binary its profile names, anywhere).
func stopCluster(st *State) {
	pids := map[int]bool{}
	for _, pid := range st.PIDs {
		pids[pid] = true
	}
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			if pid, err := strconv.Atoi(e.Name()); err == nil && pid != os.Getpid() {
				pids[pid] = true
			}
		}
	}
	var stopping, tree []proc
	for pid := range pids {
		if !st.ours(pid) {
			continue
		}
		if p, ok := procOf(pid); ok {
			stopping = append(stopping, p)
			tree = append(tree, procsOf(proctree.Descendants(pid))...)
		}
	}
	for _, p := range stopping {
		_ = syscall.Kill(p.pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range stopping {
		for p.running() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	killAll(append(stopping, tree...))
	if len(stopping) > 0 {
		logf("stopped %d processes and the %d they started", len(stopping), len(tree))
	}
	if _, err := os.Stat(filepath.Join(st.pgData(), "postmaster.pid")); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := run(st.asPostgres(ctx, "pg_ctl", "-D", st.pgData(), "-m", "fast", "-w", "-t", "30", "stop")); err != nil {
			logf("pg_ctl stop: %v", err)
		} else {
			logf("stopped PostgreSQL")
		}
	}
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

func quietLogger() sdklog.Logger { return sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)) }

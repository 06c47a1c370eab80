package main

// PostgreSQL for the cluster: initdb and pg_ctl in the state directory (as the postgres
// user when run as root), loopback TCP only, and the temporal and temporal_visibility
// schemas applied with the server's own SQL tool.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

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

package main

// down: stopping every process of the cluster (and every process they started) and
// PostgreSQL, and removing the state directory.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/tacp-dev/tacp/internal/proctree"
)

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

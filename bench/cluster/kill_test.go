package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// listenerEnv makes the test binary a stand-in for a Temporal service (TestMain): it
// listens on the address the variable names and keeps many threads busy, so that after a
// SIGKILL its main thread is a zombie well before its last thread (and its socket) is gone.
const listenerEnv = "TACP_CLUSTER_TEST_LISTENER"

func runListener(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(3)
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0) // the test is gone
	}()
	for range 4 * runtime.NumCPU() {
		go func() {
			runtime.LockOSThread()
			//lint:ignore SA5002 the spin is the point: this process is a CPU burner
			for {
			}
		}()
	}
	for {
		c, err := ln.Accept()
		if err == nil {
			_ = c.Close()
		}
	}
}

// kill9 returns only once the killed service's port is free for the service started again:
// not when the process first shows as a zombie (its main thread gone, its other threads and
// its listening socket not yet).
func TestKill9ReturnsOnceThePortIsFree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	st := &State{Dir: t.TempDir(), PIDs: map[string]int{}, Ports: map[string]Ports{"matching": {GRPC: port}}}

	for round := range 5 {
		// Named as a service of st is (ours), so that kill9 takes it for one.
		cmd := exec.Command(os.Args[0], "--config-file", st.configPath())
		cmd.Env = append(os.Environ(), listenerEnv+"="+addr)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		// Its stdin is a pipe only this test holds: it exits at EOF, so that its busy threads
		// never outlive the test, however the test ends.
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		t.Cleanup(func() { _ = stdin.Close() })
		require.NoError(t, cmd.Start())
		pid := track(cmd)
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exitDone(pid)
		})
		st.PIDs["matching"] = pid
		require.NoError(t, st.waitPort(ctx, "matching", time.Minute), "round %d", round)

		require.NoError(t, st.kill9(ctx, "matching"), "round %d", round)
		require.True(t, gone(pid), "round %d: a thread of the killed process still runs", round)
		again, err := net.Listen("tcp", addr)
		require.NoError(t, err, "round %d: the port is still taken when kill9 returns", round)
		require.NoError(t, again.Close())
	}
}

// exitDone is closed once the process pid, started here (track), has exited.
func exitDone(pid int) <-chan struct{} {
	v, _ := children.Load(pid)
	return v.(*child).done
}

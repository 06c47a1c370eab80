package bench

// What the kernel sandbox (issue 26) costs an agent start: the test agent started and
// answering initialize, directly and through the sandboxing step (the worker's binary run
// again, no_new_privs, the seccomp filter, two Landlock layers, the mount namespace that
// protects .git/hooks and the marker, then exec). The bound: at most 20 ms more.
// "sandboxed" is network all: its 65,000 port rules (every port but the denied ones) are
// built once per worker, but the kernel copies them into every agent's Landlock domain
// (once: the file layer is stacked below them, internal/sandbox/apply_linux.go).
//
//	go test ./bench -run '^$' -bench BenchmarkAgentStart -benchtime 50x

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tacp-dev/tacp/internal/sandbox"
	"github.com/tacp-dev/tacp/testagent/agent"
)

func BenchmarkAgentStart(b *testing.B) {
	dir := b.TempDir()
	data := filepath.Join(dir, "data")
	ws := filepath.Join(data, "workspaces", "s1")
	if err := os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, sandbox.WorkspaceMarker), []byte("s1\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	argv := []string{env.agentBinary, "-steering"}
	baseEnv := append(os.Environ(), agent.TranscriptsEnv+"="+filepath.Join(data, "transcripts"))
	settings := sandbox.Settings{State: map[string]string{agent.TranscriptsEnv: ""}}
	newBox := func() *sandbox.Box {
		box, err := sandbox.NewBox(filepath.Join(data, "sandbox"), []string{data}, []uint16{7233})
		if err != nil {
			b.Fatal(err)
		}
		return box
	}
	start := func(b *testing.B, box *sandbox.Box, network ...string) {
		argv, env := argv, baseEnv
		if box != nil {
			s := settings
			if len(network) > 0 {
				s.Network = network[0]
				if s.Network == sandbox.NetworkAllowlist {
					s.Allow = []string{"127.0.0.1:1"}
				}
			}
			var err error
			if argv, env, err = box.Command(s, "s1", ws, argv, env); err != nil {
				b.Fatal(err)
			}
		}
		startAndInitialize(b, argv, env, ws)
	}
	b.Run("unsandboxed", func(b *testing.B) {
		for b.Loop() {
			start(b, nil)
		}
	})
	b.Run("sandboxed", func(b *testing.B) {
		box := newBox()
		defer box.Close()
		start(b, box) // the worker builds its network rules once, at its first agent
		for b.Loop() {
			start(b, box)
		}
	})
	for _, network := range []string{sandbox.NetworkAllowlist, sandbox.NetworkNone} {
		b.Run("sandboxed-network-"+network, func(b *testing.B) {
			box := newBox()
			defer box.Close()
			start(b, box, network)
			for b.Loop() {
				start(b, box, network)
			}
		})
	}
	b.Run("sandboxed-first-of-a-worker", func(b *testing.B) {
		for b.Loop() {
			box := newBox()
			start(b, box)
			box.Close()
		}
	})
}

// startAndInitialize starts argv as startAgent does and waits for its answer to initialize.
func startAndInitialize(b *testing.B, argv, env []string, dir string) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sandbox.ForkAttr(cmd.SysProcAttr, env)
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := sandbox.Start(cmd); err != nil {
		b.Fatal(err)
	}
	if _, err := in.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}` + "\n")); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.Contains(line, `"result"`) {
		b.Fatalf("initialize: %q %v", line, err)
	}
	_ = in.Close()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
}

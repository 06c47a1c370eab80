//go:build !linux

package sandbox

// Landlock and seccomp are Linux's: elsewhere no profile can be sandboxed, and a worker
// refuses a sandboxed profile (fail closed).

import (
	"errors"
	"os/exec"
	"syscall"
)

var errNotLinux = errors.New("the agent sandbox needs Linux (Landlock and seccomp)")

// ABI is 0: no Landlock here.
func ABI() int { return 0 }

// MinABI is the Landlock ABI a sandbox needs.
const MinABI = 6

// Supported reports that this system cannot sandbox an agent.
func Supported() error { return errNotLinux }

// Box is the worker's side of the sandbox; none can be made here.
type Box struct{ Dir string }

// NewBox fails: no sandbox here.
func NewBox(string, []string, []uint16) (*Box, error) { return nil, errNotLinux }

// Command fails: no sandbox here.
func (b *Box) Command(Settings, string, string, []string, []string) ([]string, []string, error) {
	return nil, nil, errNotLinux
}

// Refusals is 0.
func (b *Box) Refusals() int64 { return 0 }

// Close does nothing.
func (b *Box) Close() {}

// ForkAttr changes nothing.
func ForkAttr(*syscall.SysProcAttr, []string) {}

// ListeningPorts is none here.
func ListeningPorts() []uint16 { return nil }

// PretendABI changes nothing here: no ABI makes a sandbox.
func PretendABI(int) func() { return func() {} }

// Start starts cmd: nothing here is sandboxed.
func Start(cmd *exec.Cmd) error { return cmd.Start() }

//go:build linux

package sandbox

// The seccomp filter: what Landlock's TCP rules do not see. Landlock (ABI 7) governs the
// connect and bind of classic TCP sockets only: a Multipath TCP socket, a raw or packet
// socket, and io_uring's own socket operations go around it. The filter refuses those
// socket(2) calls with an errno (EPROTONOSUPPORT for Multipath TCP, which programs take as
// "fall back to TCP"), and without network every IP socket; with an allowlist UDP too, since
// the egress proxy resolves the hosts and the agent needs no DNS of its own. A system call of
// another architecture (32-bit compat, x32) is refused as not implemented.

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	bpfLdAbs  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeq    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJge    = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfAnd    = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	bpfRet    = unix.BPF_RET | unix.BPF_K
	ipMPTCP   = 262 // IPPROTO_MPTCP
	x32Bit    = 0x40000000
	offNr     = 0
	offArch   = 4
	offArgLow = 16 // seccomp_data.args[0], low half (little endian)
)

// insn is one BPF instruction whose jumps name labels.
type insn struct {
	op     uint16
	jt, jf string // labels; "" is the next instruction
	k      uint32
	label  string // set on a label pseudo-instruction
}

func label(name string) insn { return insn{label: name} }

// assemble resolves labels into relative jumps.
func assemble(prog []insn) ([]unix.SockFilter, error) {
	at := map[string]int{}
	n := 0
	for _, in := range prog {
		if in.label != "" {
			at[in.label] = n
			continue
		}
		n++
	}
	var out []unix.SockFilter
	for _, in := range prog {
		if in.label != "" {
			continue
		}
		i := len(out)
		rel := func(l string) (uint8, error) {
			if l == "" {
				return 0, nil
			}
			t, ok := at[l]
			if !ok || t <= i || t-i-1 > 255 {
				return 0, fmt.Errorf("seccomp: bad jump to %q", l)
			}
			return uint8(t - i - 1), nil
		}
		jt, err := rel(in.jt)
		if err != nil {
			return nil, err
		}
		jf, err := rel(in.jf)
		if err != nil {
			return nil, err
		}
		out = append(out, unix.SockFilter{Code: in.op, Jt: jt, Jf: jf, K: in.k})
	}
	return out, nil
}

// nativeArch is this build's AUDIT_ARCH.
func nativeArch() (uint32, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, true
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, true
	}
	return 0, false
}

// seccompProgram is the filter for a network mode.
func seccompProgram(network string) ([]unix.SockFilter, error) {
	arch, ok := nativeArch()
	if !ok {
		return nil, fmt.Errorf("seccomp: no filter for %s", runtime.GOARCH)
	}
	errno := func(e unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e) }
	prog := []insn{
		{op: bpfLdAbs, k: offArch},
		{op: bpfJeq, k: arch, jf: "enosys"},
		{op: bpfLdAbs, k: offNr},
	}
	if runtime.GOARCH == "amd64" {
		prog = append(prog, insn{op: bpfJge, k: x32Bit, jt: "enosys"})
	}
	prog = append(prog,
		insn{op: bpfJeq, k: unix.SYS_IO_URING_SETUP, jt: "enosys"},
		insn{op: bpfJeq, k: unix.SYS_SOCKET, jf: "allow"},
		insn{op: bpfLdAbs, k: offArgLow}, // domain
		insn{op: bpfJeq, k: unix.AF_PACKET, jt: "eacces"},
		insn{op: bpfJeq, k: unix.AF_INET, jt: "ip"},
		insn{op: bpfJeq, k: unix.AF_INET6, jt: "ip", jf: "allow"},
		label("ip"),
		insn{op: bpfLdAbs, k: offArgLow + 16}, // protocol
		insn{op: bpfJeq, k: ipMPTCP, jt: "eprotonosupport"},
	)
	if network == NetworkNone {
		prog = append(prog, insn{op: bpfRet, k: errno(unix.EACCES)})
	}
	prog = append(prog,
		insn{op: bpfLdAbs, k: offArgLow + 8}, // type, less SOCK_NONBLOCK and SOCK_CLOEXEC
		insn{op: bpfAnd, k: 0xf},
		insn{op: bpfJeq, k: unix.SOCK_RAW, jt: "eacces"},
		insn{op: bpfJeq, k: unix.SOCK_PACKET, jt: "eacces"},
	)
	if network == NetworkAllowlist {
		prog = append(prog, insn{op: bpfJeq, k: unix.SOCK_DGRAM, jt: "eacces"})
	}
	prog = append(prog,
		label("allow"), insn{op: bpfRet, k: unix.SECCOMP_RET_ALLOW},
		label("enosys"), insn{op: bpfRet, k: errno(unix.ENOSYS)},
		label("eacces"), insn{op: bpfRet, k: errno(unix.EACCES)},
		label("eprotonosupport"), insn{op: bpfRet, k: errno(unix.EPROTONOSUPPORT)},
	)
	return assemble(prog)
}

// installSeccomp loads the filter on the calling thread (no_new_privs already set).
func installSeccomp(network string) error {
	filter, err := seccompProgram(network)
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, errno := unix.Syscall(unix.SYS_PRCTL, unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return nil
}

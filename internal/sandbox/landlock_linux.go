//go:build linux

package sandbox

// Landlock through its three system calls (landlock(7)). golang.org/x/sys has the numbers
// and most types; the network rule's attribute is declared here. go-landlock does the same
// job for a Go program that restricts itself, but restricts every thread of the process at
// once (psx), cannot build a ruleset once and apply it in many children (the network rules
// of NetworkAll are 65,000 port rules, ~0.4 s to build), and its newer releases require a
// newer golang.org/x/sys than this module's Temporal server is pinned with. The sandboxing
// step applies rules to the one thread that then execs: a few raw calls.

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MinABI is the Landlock ABI a sandbox needs: files with truncate and device ioctls (3, 5),
// TCP bind and connect (4), and the scopes that keep signals and abstract unix sockets inside
// the sandbox (6: Linux 6.12).
const MinABI = 6

const landlockRuleNetPort = 2 // LANDLOCK_RULE_NET_PORT

type landlockNetPortAttr struct {
	AllowedAccess uint64
	Port          uint64
}

// Access rights (ABI 5 and later handle every one of them).
const (
	fsAll = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM | unix.LANDLOCK_ACCESS_FS_REFER | unix.LANDLOCK_ACCESS_FS_TRUNCATE |
		unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	// fsFile are the rights a rule on a file (not a directory) may hold.
	fsFile = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	fsRead = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// fsWrite is everything but making device nodes.
	fsWrite = fsAll &^ (unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK)

	netAll    = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	scopedAll = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
)

// ABI returns the kernel's Landlock ABI version (0: none, or disabled at boot).
func ABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

func createRuleset(fs, net, scoped uint64) (int, error) {
	attr := unix.LandlockRulesetAttr{Access_fs: fs, Access_net: net, Scoped: scoped}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return -1, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	return int(fd), nil
}

func addPortRule(ruleset int, access uint64, port uint16) error {
	attr := landlockNetPortAttr{AllowedAccess: access, Port: uint64(port)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), landlockRuleNetPort, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("landlock_add_rule port %d: %w", port, errno)
	}
	return nil
}

// addPathRule grants access beneath path (only the file rights when it is no directory).
func addPathRule(ruleset int, access uint64, path string) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= fsFile
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("landlock_add_rule %s: %w", path, errno)
	}
	return nil
}

// restrictSelf enforces ruleset on the calling thread (no_new_privs already set).
func restrictSelf(ruleset int) error {
	_, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0)
	if errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}

// netRuleset builds the network layer of a policy: what connect (and, without network, bind)
// may reach. deny are ports NetworkAll leaves out; ports what an allowlist connects to; own
// (0: none) the port of the agent's own server, which it may bind and connect to.
func netRuleset(mode string, ports, deny []uint16, own uint16) (int, error) {
	handled := uint64(unix.LANDLOCK_ACCESS_NET_CONNECT_TCP)
	if mode == NetworkNone {
		handled = netAll
	}
	fd, err := createRuleset(0, handled, 0)
	if err != nil {
		return -1, err
	}
	add := func(p uint16) error { return addPortRule(fd, unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, p) }
	switch mode {
	case NetworkAll:
		denied := make(map[uint16]bool, len(deny))
		for _, p := range deny {
			denied[p] = true
		}
		for p := 1; p <= 65535; p++ {
			if !denied[uint16(p)] {
				if err := add(uint16(p)); err != nil {
					unix.Close(fd)
					return -1, err
				}
			}
		}
	case NetworkAllowlist:
		for _, p := range ports {
			if err := add(p); err != nil {
				unix.Close(fd)
				return -1, err
			}
		}
	case NetworkNone:
	default:
		unix.Close(fd)
		return -1, fmt.Errorf("network %q", mode)
	}
	if own != 0 && mode != NetworkAll {
		if err := addPortRule(fd, handled, own); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

// fsRuleset builds the file layer of a policy, with the IPC scopes.
func fsRuleset(p Policy) (int, error) {
	fd, err := createRuleset(fsAll, 0, scopedAll)
	if err != nil {
		return -1, err
	}
	grant := func(access uint64, paths []string, optional bool) error {
		for _, path := range paths {
			if err := addPathRule(fd, access, path); err != nil {
				if optional && errors.Is(err, unix.ENOENT) {
					continue
				}
				return err
			}
		}
		return nil
	}
	if err := grant(fsRead, p.Optional, true); err == nil {
		if err = grant(fsRead, p.ReadOnly, false); err == nil {
			err = grant(fsWrite, p.ReadWrite, false)
		}
		if err != nil {
			unix.Close(fd)
			return -1, err
		}
	} else {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

//go:build linux

// Package seccomp builds and installs the seccomp filter of the sandbox
// runtime: a deny-list, in classic BPF, of the system calls that untrusted
// code has no business making. It is pure Go (no libseccomp, no cgo), so
// the binary that carries the in-boundary agent stays static.
//
// # Policy
//
// The filter allows every system call except:
//
//   - mounting and changing the mount tree: mount, umount2, pivot_root and
//     the new mount API (fsopen, fsconfig, fsmount, fspick, move_mount,
//     open_tree, mount_setattr);
//   - joining or creating namespaces: setns always, and clone and unshare
//     with any CLONE_NEW* flag (clone3 cannot be inspected, its arguments
//     being in memory; the boundary stops it otherwise: the sandbox's user
//     namespace allows no nested user namespace, and no capability is left
//     for the other kinds);
//   - reading or writing other processes: ptrace, process_vm_readv,
//     process_vm_writev, kcmp, pidfd_getfd;
//   - the kernel's keyrings (add_key, request_key, keyctl), bpf,
//     perf_event_open, userfaultfd, io_uring, the kernel log (syslog);
//   - kernel modules, kexec, reboot, swap, accounting, quotas, the clock,
//     file handles (open_by_handle_at: the "shocker" escape), and obsolete
//     calls (uselib, ustat, sysfs, _sysctl, nfsservctl, iopl, ioperm);
//   - TIOCSTI and TIOCLINUX ioctls (pushing input into a terminal);
//   - AF_VSOCK sockets: vsock is not namespaced, and on a virtual machine
//     it reaches the hypervisor's services.
//
// Denied calls fail with EPERM (EAFNOSUPPORT for vsock), never kill the
// process, so programs that probe for a feature degrade as they would in
// a container. A call made under another architecture's ABI (i386 on
// amd64, x32) is refused with ENOSYS. The model is Docker's default
// profile, reduced to what is dangerous for a process that has no
// capabilities; the capabilities themselves are dropped elsewhere.
package seccomp

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Classic BPF opcodes (linux/filter.h).
const (
	bpfLD   = 0x00
	bpfJMP  = 0x05
	bpfRET  = 0x06
	bpfW    = 0x00
	bpfABS  = 0x20
	bpfJEQ  = 0x10
	bpfJGE  = 0x30
	bpfJSET = 0x40
	bpfK    = 0x00
)

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16 // low 32 bits of args[0] on a little-endian machine
	offArg1 = 24
)

// x32SyscallBit marks x32 ABI system calls on amd64.
const x32SyscallBit = 0x40000000

// nsFlags are the clone flags that create namespaces.
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// denied are the system calls refused with EPERM on every architecture;
// deniedArch (per architecture) adds the ones only some have.
var denied = []uintptr{
	// Mounts.
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT,
	unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK,
	unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE, unix.SYS_MOUNT_SETATTR,
	// Namespaces (clone and unshare are checked by flag below).
	unix.SYS_SETNS,
	// Other processes.
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
	unix.SYS_KCMP, unix.SYS_PIDFD_GETFD, unix.SYS_PROCESS_MADVISE,
	// Kernel facilities with a history of escapes.
	unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_KEYCTL,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_SYSLOG,
	// The machine itself.
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_REBOOT,
	unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_ACCT,
	unix.SYS_QUOTACTL, unix.SYS_QUOTACTL_FD, unix.SYS_NFSSERVCTL, unix.SYS_LOOKUP_DCOOKIE,
	unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME,
	unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
}

// Filter is a compiled seccomp program.
type Filter []unix.SockFilter

// errnoRet is the return value that fails a call with errno.
func errnoRet(errno unix.Errno) uint32 {
	return unix.SECCOMP_RET_ERRNO | uint32(errno)&unix.SECCOMP_RET_DATA
}

// Build compiles the policy for the architecture this binary runs on. It
// fails only on an architecture without a table (see Supported).
func Build() (Filter, error) {
	if auditArch == 0 {
		return nil, fmt.Errorf("seccomp: no system call table for this architecture")
	}
	const allow = unix.SECCOMP_RET_ALLOW
	var p []unix.SockFilter
	stmt := func(code uint16, k uint32) { p = append(p, unix.SockFilter{Code: code, K: k}) }
	// jump appends a conditional jump whose targets are patched later.
	type fix struct {
		at     int
		target string // "deny", "enosys", "vsock", "allow" when true; false falls through
	}
	var fixes []fix
	jumpTo := func(op uint16, k uint32, target string) {
		fixes = append(fixes, fix{len(p), target})
		p = append(p, unix.SockFilter{Code: bpfJMP | op | bpfK, K: k})
	}

	stmt(bpfLD|bpfW|bpfABS, offArch)
	// Another ABI on this machine (i386 on amd64): refuse everything.
	p = append(p, unix.SockFilter{Code: bpfJMP | bpfJEQ | bpfK, Jt: 1, Jf: 0, K: auditArch})
	stmt(bpfRET|bpfK, errnoRet(unix.ENOSYS))
	stmt(bpfLD|bpfW|bpfABS, offNr)
	if x32Check {
		jumpTo(bpfJGE, x32SyscallBit, "enosys")
	}
	for _, nr := range append(append([]uintptr(nil), denied...), deniedArch...) {
		jumpTo(bpfJEQ, uint32(nr), "deny")
	}
	jumpTo(bpfJEQ, uint32(unix.SYS_CLONE), "nsflags")
	jumpTo(bpfJEQ, uint32(unix.SYS_UNSHARE), "nsflags")
	jumpTo(bpfJEQ, uint32(unix.SYS_IOCTL), "ioctl")
	jumpTo(bpfJEQ, uint32(unix.SYS_SOCKET), "socket")
	stmt(bpfRET|bpfK, allow)

	labels := map[string]int{}
	labels["nsflags"] = len(p)
	stmt(bpfLD|bpfW|bpfABS, offArg0)
	jumpTo(bpfJSET, nsFlags, "deny")
	stmt(bpfRET|bpfK, allow)

	labels["ioctl"] = len(p)
	stmt(bpfLD|bpfW|bpfABS, offArg1)
	jumpTo(bpfJEQ, unix.TIOCSTI, "deny")
	jumpTo(bpfJEQ, unix.TIOCLINUX, "deny")
	stmt(bpfRET|bpfK, allow)

	labels["socket"] = len(p)
	stmt(bpfLD|bpfW|bpfABS, offArg0)
	jumpTo(bpfJEQ, unix.AF_VSOCK, "vsock")
	stmt(bpfRET|bpfK, allow)

	labels["deny"] = len(p)
	stmt(bpfRET|bpfK, errnoRet(unix.EPERM))
	labels["enosys"] = len(p)
	stmt(bpfRET|bpfK, errnoRet(unix.ENOSYS))
	labels["vsock"] = len(p)
	stmt(bpfRET|bpfK, errnoRet(unix.EAFNOSUPPORT))

	for _, f := range fixes {
		off := labels[f.target] - f.at - 1
		if off > 255 {
			return nil, fmt.Errorf("seccomp: jump of %d instructions is too long", off)
		}
		p[f.at].Jt = uint8(off)
	}
	if len(p) > 4096 {
		return nil, errors.New("seccomp: program too long")
	}
	return Filter(p), nil
}

// Supported reports whether Build has a table for this architecture.
func Supported() bool { return auditArch != 0 }

// Install loads f into the calling thread, or with sync into every thread
// of the process (SECCOMP_FILTER_FLAG_TSYNC, which also gives them all
// no_new_privs). The caller must have set no_new_privs (see
// SetNoNewPrivs) or hold CAP_SYS_ADMIN. Filters are inherited by children
// and kept across execve.
func Install(f Filter, sync bool) error {
	if len(f) == 0 {
		return errors.New("seccomp: empty filter")
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	var flags uintptr
	if sync {
		flags = unix.SECCOMP_FILTER_FLAG_TSYNC
	}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&prog)))
	switch {
	case errno != 0:
		return fmt.Errorf("seccomp: install filter: %w", errno)
	case r != 0:
		return fmt.Errorf("seccomp: install filter: thread %d cannot be synchronised", r)
	}
	return nil
}

// SetNoNewPrivs sets the calling thread's no_new_privs bit: execve never
// grants privileges again (setuid bits and file capabilities are ignored).
// Children inherit it.
func SetNoNewPrivs() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	return nil
}

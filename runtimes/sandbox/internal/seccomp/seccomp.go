//go:build linux

// Package seccomp builds and installs the seccomp filter of the sandbox
// runtime: an allow-list, in classic BPF, of the system calls untrusted
// code may make. It is pure Go (no libseccomp, no cgo), so the binary that
// carries the in-boundary agent stays static.
//
// # Policy
//
// The reference is moby's default profile for a container without
// capabilities (policy.go lists every call by name):
//
//   - allowed: what an ordinary program needs (policy.go's allowed);
//   - EPERM: mounts and the new mount API, namespaces (setns, and clone
//     and unshare with any CLONE_NEW* flag), other processes (ptrace,
//     process_vm_*, kcmp, pidfd_getfd), bpf, perf_event_open, keyrings,
//     userfaultfd, io_uring, modify_ldt, file handles, the kernel log,
//     modules, kexec, reboot, swap, quotas, the clock, personality other
//     than moby's harmless values, the TIOCSTI and TIOCLINUX ioctls;
//   - EPERM for a mode with S_ISUID or S_ISGID in chmod, fchmod,
//     fchmodat, fchmodat2, mknod, mknodat, creat, and open and openat
//     with O_CREAT or O_TMPFILE: no file written inside can become
//     setuid or setgid, so none is a setuid-root file on the host.
//     mkdir needs no check: the kernel keeps only the permission and
//     sticky bits of its mode (a directory gets S_ISGID only from a
//     parent that has it, which chmod refuses to set);
//   - EAFNOSUPPORT for AF_VSOCK sockets: vsock is not namespaced, and on
//     a virtual machine it reaches the hypervisor's services;
//   - ENOSYS for openat2, whose mode is in memory a filter cannot read,
//     so that libc falls back to openat, which it checks; for obsolete
//     calls; and for every number the filter does not know (a call newer
//     than golang.org/x/sys); and for clone3, whose flags are in memory
//     too, so that libc falls back to clone, which it checks. Where the
//     agent needs clone3 (CLONE_INTO_CGROUP on cgroup v2: Options.Clone3)
//     it is allowed, for commands too, which inherit the agent's filter;
//     its namespace flags are of no use to them there (no CAP_SYS_ADMIN;
//     no user namespaces inside).
//
// Denied calls fail, never kill the process, so programs that probe for
// a feature degrade as they would in a container. A call made under
// another architecture's ABI (i386 on amd64, x32) fails with ENOSYS.
//
// The filter is installed by the sandbox's init before it starts the
// agent, after its own mounts, and is inherited by the agent and every
// command. The agent needs none of the refused calls.
//
// # Program
//
// The filter checks the architecture, then finds the call's number in a
// binary tree of ranges (about eight comparisons for any call, where a
// list would take hundreds), whose leaves return or jump to the
// argument check of that call.
package seccomp

//go:generate ./mksysnum.sh amd64
//go:generate ./mksysnum.sh arm64

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
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
	bpfJA   = 0x00
	bpfK    = 0x00
)

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16 // low 32 bits of args[0] on a little-endian machine
)

// x32SyscallBit marks x32 ABI system calls on amd64.
const x32SyscallBit = 0x40000000

// nsFlags are the clone flags that create namespaces.
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// setIDBits are the mode bits no file made inside may carry.
const setIDBits = unix.S_ISUID | unix.S_ISGID

// createFlags are the open flags that create a file (O_TMPFILE without
// the O_DIRECTORY it includes).
const createFlags = unix.O_CREAT | unix.O_TMPFILE&^unix.O_DIRECTORY

// personalities are the values personality(2) accepts, as in moby:
// PER_LINUX, UNAME26, PER_LINUX32, UNAME26|PER_LINUX32 and 0xffffffff
// (a query).
var personalities = []uint32{0x0, 0x0008, 0x20000, 0x20008, 0xffffffff}

// Filter is a compiled seccomp program.
type Filter []unix.SockFilter

// errnoRet is the return value that fails a call with errno.
func errnoRet(errno unix.Errno) uint32 {
	return unix.SECCOMP_RET_ERRNO | uint32(errno)&unix.SECCOMP_RET_DATA
}

// argOff is the offset in struct seccomp_data of the low 32 bits of
// args[i] on a little-endian machine (amd64, arm64). Every argument
// checked is a 32-bit int or mode in the kernel, which ignores the rest.
func argOff(i int) uint32 { return offArg0 + 8*uint32(i) }

// span is a range of call numbers [lo, next span's lo) with one action.
type span struct {
	lo  uint32
	act action
}

// spans maps every number from 0 to 2^32-1 to an action: the known
// calls, and ENOSYS between them; neighbours with one action merge.
func spans(nums map[string]uint32, o Options) []span {
	byNr := map[uint32]action{}
	for name, nr := range nums {
		a := policy()[name]
		if name == "clone3" && o.Clone3 {
			a = actAllow
		}
		if a != actInvalid {
			byNr[nr] = a
		}
	}
	nrs := make([]uint32, 0, len(byNr))
	for nr := range byNr {
		nrs = append(nrs, nr)
	}
	slices.Sort(nrs)
	out := []span{{0, actENOSYS}}
	add := func(lo uint32, a action) {
		if last := &out[len(out)-1]; last.lo == lo {
			last.act = a
		} else if last.act != a {
			out = append(out, span{lo, a})
		}
		if len(out) > 1 && out[len(out)-2].act == out[len(out)-1].act {
			out = out[:len(out)-1]
		}
	}
	for _, nr := range nrs {
		add(nr, byNr[nr])
		if nr != math.MaxUint32 {
			add(nr+1, actENOSYS)
		}
	}
	return out
}

// builder appends instructions and remembers the jumps to patch.
type builder struct {
	p     []unix.SockFilter
	toAct []int // JA instructions to the check of p[i].K's action
}

func (b *builder) stmt(code uint16, k uint32) {
	b.p = append(b.p, unix.SockFilter{Code: code, K: k})
}

func (b *builder) jump(op uint16, k uint32, jt, jf uint8) {
	b.p = append(b.p, unix.SockFilter{Code: bpfJMP | op | bpfK, Jt: jt, Jf: jf, K: k})
}

func (b *builder) ret(k uint32) { b.stmt(bpfRET|bpfK, k) }

// treeLen is the length of the code tree(s) emits.
func treeLen(s []span) int {
	if len(s) == 1 {
		return 1
	}
	left := treeLen(s[:len(s)/2])
	n := 1 + left + treeLen(s[len(s)/2:])
	if left > 255 {
		n++ // a JA over the left half
	}
	return n
}

// tree emits a binary search of the call number (already loaded) over s.
func (b *builder) tree(s []span) {
	if len(s) == 1 {
		switch a := s[0].act; a {
		case actAllow:
			b.ret(unix.SECCOMP_RET_ALLOW)
		case actEPERM:
			b.ret(errnoRet(unix.EPERM))
		case actENOSYS:
			b.ret(errnoRet(unix.ENOSYS))
		default:
			b.toAct = append(b.toAct, len(b.p))
			b.stmt(bpfJMP|bpfJA, uint32(a))
		}
		return
	}
	mid := len(s) / 2
	left := treeLen(s[:mid])
	if left > 255 {
		b.jump(bpfJGE, s[mid].lo, 0, 1)
		b.stmt(bpfJMP|bpfJA, uint32(left))
	} else {
		b.jump(bpfJGE, s[mid].lo, uint8(left), 0)
	}
	b.tree(s[:mid])
	b.tree(s[mid:])
}

// check emits the argument check of a, which ends in returns.
func (b *builder) check(a action) {
	allow, eperm := uint32(unix.SECCOMP_RET_ALLOW), errnoRet(unix.EPERM)
	load := func(arg int) { b.stmt(bpfLD|bpfW|bpfABS, argOff(arg)) }
	mode := func(arg int) {
		load(arg)
		b.jump(bpfJSET, setIDBits, 0, 1)
		b.ret(eperm)
		b.ret(allow)
	}
	switch a {
	case actNamespace:
		load(0)
		b.jump(bpfJSET, nsFlags, 0, 1)
		b.ret(eperm)
		b.ret(allow)
	case actPersonality:
		load(0)
		for i, v := range personalities {
			b.jump(bpfJEQ, v, uint8(len(personalities)-i), 0)
		}
		b.ret(eperm)
		b.ret(allow)
	case actSocket:
		load(0)
		b.jump(bpfJEQ, unix.AF_VSOCK, 0, 1)
		b.ret(errnoRet(unix.EAFNOSUPPORT))
		b.ret(allow)
	case actIoctl:
		load(1)
		b.jump(bpfJEQ, unix.TIOCSTI, 1, 0)
		b.jump(bpfJEQ, unix.TIOCLINUX, 0, 1)
		b.ret(eperm)
		b.ret(allow)
	case actMode1:
		mode(1)
	case actMode2:
		mode(2)
	case actOpen, actOpenat:
		flags := 1
		if a == actOpenat {
			flags = 2
		}
		load(flags)
		b.jump(bpfJSET, createFlags, 1, 0)
		b.ret(allow)
		mode(flags + 1)
	default:
		panic(fmt.Sprintf("seccomp: no check for action %d", a))
	}
}

// Options adjust the policy to the process the filter confines.
type Options struct {
	// Clone3 allows clone3, which the policy otherwise fails with
	// ENOSYS. The sandbox's agent needs it on cgroup v2, where it starts
	// each command with CLONE_INTO_CGROUP.
	Clone3 bool
}

// Build compiles the policy for the architecture this binary runs on. It
// fails only on an architecture without a table (see Supported).
func Build(o Options) (Filter, error) {
	if auditArch == 0 {
		return nil, fmt.Errorf("seccomp: no system call table for this architecture")
	}
	return build(sysnums(), auditArch, x32Check, o)
}

func build(nums map[string]uint32, arch uint32, x32 bool, o Options) (Filter, error) {
	var b builder
	b.stmt(bpfLD|bpfW|bpfABS, offArch)
	// Another ABI on this machine (i386 on amd64): refuse everything.
	b.jump(bpfJEQ, arch, 1, 0)
	b.ret(errnoRet(unix.ENOSYS))
	b.stmt(bpfLD|bpfW|bpfABS, offNr)
	if x32 {
		b.jump(bpfJGE, x32SyscallBit, 0, 1)
		b.ret(errnoRet(unix.ENOSYS))
	}
	b.tree(spans(nums, o))
	checks := map[action]int{}
	for _, at := range b.toAct {
		a := action(b.p[at].K)
		if _, ok := checks[a]; !ok {
			checks[a] = len(b.p)
			b.check(a)
		}
		b.p[at].K = uint32(checks[a] - at - 1)
	}
	if len(b.p) > unix.BPF_MAXINSNS {
		return nil, errors.New("seccomp: program too long")
	}
	return Filter(b.p), nil
}

// sockFilterSize is the size of struct sock_filter.
const sockFilterSize = int(unsafe.Sizeof(unix.SockFilter{}))

// Bytes returns f as the kernel reads it (struct sock_filter, in this
// machine's byte order): the form in which the sandbox's host, which
// compiles the filter once, hands it to the init that installs it.
func (f Filter) Bytes() []byte {
	b := make([]byte, 0, len(f)*sockFilterSize)
	for _, in := range f {
		b = binary.NativeEndian.AppendUint16(b, in.Code)
		b = append(b, in.Jt, in.Jf)
		b = binary.NativeEndian.AppendUint32(b, in.K)
	}
	return b
}

// ParseFilter returns the filter whose Bytes are b.
func ParseFilter(b []byte) (Filter, error) {
	if len(b) == 0 || len(b)%sockFilterSize != 0 || len(b)/sockFilterSize > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: %d bytes are no filter", len(b))
	}
	f := make(Filter, len(b)/sockFilterSize)
	for i := range f {
		in := b[i*sockFilterSize:]
		f[i] = unix.SockFilter{Code: binary.NativeEndian.Uint16(in), Jt: in[2], Jf: in[3], K: binary.NativeEndian.Uint32(in[4:])}
	}
	return f, nil
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

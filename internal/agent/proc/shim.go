package proc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/fds"
	"golang.org/x/sys/unix"
)

// Go cannot run code between fork and exec, so resource limits are applied
// by a re-exec of the current binary: Start runs /proc/self/exe with argv
// [shimArg0, program, args...] and shimEnv set; this package's init sees
// them, applies the limits to itself and execs the program. Limits survive
// exec. The cost is one extra exec, paid only when a limit is set.
//
// With Options.DropCapabilities, a command that would run as root goes
// through the shim too, which then also drops every capability, on the
// thread that execs, before switching to the command's credential.
const (
	shimArg0    = "execbox-rlimit-shim"
	shimEnv     = "_EXECBOX_RLIMITS"
	shimDropEnv = "_EXECBOX_DROP_CAPS" // "uid:gid:g1,g2,...", or "" for the shim's own
	// shimStatusEnv names the descriptor of a close-on-exec pipe to the
	// parent: the shim writes "ERRNO message" there when it cannot exec
	// the program, and an exec closes it, so Start reports a missing
	// program as an error, as a direct exec does. Descriptors below it
	// (from 3) are the ones passed on purpose (a terminal); above it,
	// none reaches the program.
	shimStatusEnv = "_EXECBOX_SHIM_STATUS"
)

func init() {
	if len(os.Args) >= 2 && os.Args[0] == shimArg0 {
		if spec, ok := os.LookupEnv(shimEnv); ok {
			runShim(spec, os.Args[1], os.Args[2:])
		}
	}
}

type rlimit struct {
	resource int
	value    uint64
}

func rlimitsOf(l execbox.Limits) []rlimit {
	var out []rlimit
	if l.CPUTime > 0 {
		secs := uint64((l.CPUTime + 999_999_999) / 1_000_000_000)
		out = append(out, rlimit{unix.RLIMIT_CPU, secs})
	}
	if l.FileSize > 0 {
		out = append(out, rlimit{unix.RLIMIT_FSIZE, uint64(l.FileSize)})
	}
	if l.OpenFiles > 0 {
		out = append(out, rlimit{unix.RLIMIT_NOFILE, uint64(l.OpenFiles)})
	}
	if l.AddressSpace > 0 {
		out = append(out, rlimit{unix.RLIMIT_AS, uint64(l.AddressSpace)})
	}
	return out
}

func encodeRlimits(rl []rlimit) string {
	parts := make([]string, len(rl))
	for i, r := range rl {
		parts[i] = fmt.Sprintf("%d=%d", r.resource, r.value)
	}
	return strings.Join(parts, ",")
}

func runShim(spec, path string, args []string) {
	status := -1
	if v, err := strconv.Atoi(os.Getenv(shimStatusEnv)); err == nil && v >= 3 {
		status = v
	}
	failErrno := func(errno syscall.Errno, format string, a ...any) {
		msg := fmt.Sprintf(format, a...)
		if status >= 0 {
			fmt.Fprintf(os.NewFile(uintptr(status), "status"), "%d %s", int(errno), msg)
		}
		fmt.Fprintf(os.Stderr, "execbox: %s\n", msg)
		os.Exit(126)
	}
	fail := func(format string, a ...any) { failErrno(0, format, a...) }
	// Only 0-2 and what the parent passed on purpose reach the program:
	// not what the process that called Start held without close-on-exec.
	keepBelow := 3
	if status >= 0 {
		keepBelow = status
	}
	if err := fds.CloseExecFrom(keepBelow); err != nil {
		fail("close-on-exec: %v", err)
	}
	// Everything that allocates happens before the limits apply: under an
	// address-space limit below what this process has mapped already (a
	// Go binary, more so one built with -race), any growth of the heap
	// after setrlimit fails and the runtime aborts. So the limits are
	// parsed and the exec's arguments converted first, and the exec is a
	// raw execve, which allocates nothing.
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, shimEnv+"=") && !strings.HasPrefix(e, shimDropEnv+"=") && !strings.HasPrefix(e, shimStatusEnv+"=") {
			env = append(env, e)
		}
	}
	type limit struct {
		res int
		lim syscall.Rlimit
	}
	var limits []limit
	for _, kv := range strings.Split(spec, ",") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		res, err1 := strconv.Atoi(k)
		val, err2 := strconv.ParseUint(v, 10, 64)
		if err1 != nil || err2 != nil {
			fail("bad rlimit spec %q", kv)
		}
		lim := syscall.Rlimit{Cur: val, Max: val}
		if res == unix.RLIMIT_CPU {
			// The soft limit sends SIGXCPU, which the result reports as a CPU
			// limit; the hard limit one second later is SIGKILL for programs
			// that catch SIGXCPU.
			lim.Max = val + 1
		}
		var old syscall.Rlimit
		if err := syscall.Getrlimit(res, &old); err == nil && old.Max != unix.RLIM_INFINITY {
			lim.Cur, lim.Max = min(lim.Cur, old.Max), min(lim.Max, old.Max)
		}
		limits = append(limits, limit{res, lim})
	}
	pathp, err := syscall.BytePtrFromString(path)
	if err != nil {
		fail("exec %s: %v", path, err)
	}
	argvp, err := syscall.SlicePtrFromStrings(args)
	if err != nil {
		fail("exec %s: %v", path, err)
	}
	envp, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		fail("exec %s: %v", path, err)
	}
	if cred, ok := os.LookupEnv(shimDropEnv); ok {
		if err := dropCapabilities(cred); err != nil {
			fail("drop privileges: %v", err)
		}
	}
	// Lowering limits needs no privilege, so it works after the drop.
	for _, l := range limits {
		if err := syscall.Setrlimit(l.res, &l.lim); err != nil {
			fail("setrlimit %d: %v", l.res, err)
		}
	}
	_, _, errno := syscall.RawSyscall(syscall.SYS_EXECVE,
		uintptr(unsafe.Pointer(pathp)),
		uintptr(unsafe.Pointer(&argvp[0])),
		uintptr(unsafe.Pointer(&envp[0])))
	failErrno(errno, "exec %s: %v", path, errno)
}

// shimError is what the shim reported on its status pipe, as the error
// a direct exec would have returned.
func shimError(msg []byte) error {
	code, text, _ := strings.Cut(string(msg), " ")
	n, _ := strconv.Atoi(code)
	if n == 0 {
		return errors.New(text)
	}
	return &os.SyscallError{Syscall: text, Err: syscall.Errno(n)}
}

// encodeCredential renders c for shimDropEnv; nil is "".
func encodeCredential(c *syscall.Credential) string {
	if c == nil {
		return ""
	}
	groups := make([]string, len(c.Groups))
	for i, g := range c.Groups {
		groups[i] = strconv.FormatUint(uint64(g), 10)
	}
	return fmt.Sprintf("%d:%d:%s", c.Uid, c.Gid, strings.Join(groups, ","))
}

// dropCapabilities empties the ambient, bounding, inheritable, permitted
// and effective capability sets of the calling thread and switches it to
// cred ("uid:gid:groups", empty for no change). Capabilities and
// credentials belong to a thread; the shim runs in package init, which Go
// runs on the main thread, locked to it, and that thread is the one that
// execs: the program starts with exactly this state. Raw system calls are
// used because the syscall package's wrappers act on every thread (and
// refuse to when cgo is in use).
func dropCapabilities(cred string) error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if cred != "" {
		f := strings.SplitN(cred, ":", 3)
		if len(f) != 3 {
			return fmt.Errorf("bad credential %q", cred)
		}
		uid, err1 := strconv.ParseUint(f[0], 10, 32)
		gid, err2 := strconv.ParseUint(f[1], 10, 32)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("bad credential %q", cred)
		}
		var groups []uint32
		for g := range strings.SplitSeq(f[2], ",") {
			if g == "" {
				continue
			}
			n, err := strconv.ParseUint(g, 10, 32)
			if err != nil {
				return fmt.Errorf("bad credential %q", cred)
			}
			groups = append(groups, uint32(n))
		}
		var gp uintptr
		if len(groups) > 0 {
			gp = uintptr(unsafe.Pointer(&groups[0]))
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), gp, 0); e != 0 {
			return fmt.Errorf("setgroups: %w", e)
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
			return fmt.Errorf("setresgid: %w", e)
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			return fmt.Errorf("setresuid: %w", e)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

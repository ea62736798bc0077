package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/execbox/execbox"
	"golang.org/x/sys/unix"
)

// Go cannot run code between fork and exec, so resource limits are applied
// by a re-exec of the current binary: Start runs /proc/self/exe with argv
// [shimArg0, program, args...] and shimEnv set; this package's init sees
// them, applies the limits to itself and execs the program. Limits survive
// exec. The cost is one extra exec, paid only when a limit is set.
const (
	shimArg0 = "execbox-rlimit-shim"
	shimEnv  = "_EXECBOX_RLIMITS"
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
	fail := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "execbox: "+format+"\n", a...)
		os.Exit(126)
	}
	for _, kv := range strings.Split(spec, ",") {
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
		// syscall.Setrlimit, not unix.Setrlimit: only the former stops
		// syscall.Exec from restoring Go's saved RLIMIT_NOFILE.
		if err := syscall.Setrlimit(res, &lim); err != nil {
			fail("setrlimit %d: %v", res, err)
		}
	}
	env := os.Environ()
	out := env[:0]
	for _, e := range env {
		if !strings.HasPrefix(e, shimEnv+"=") {
			out = append(out, e)
		}
	}
	err := syscall.Exec(path, args, out)
	fail("exec %s: %v", path, err)
}

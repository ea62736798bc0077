//go:build linux

package seccomp

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
	"golang.org/x/sys/unix"
)

// benchEnv makes the test binary time system calls, under the filter
// when it is "filter", and print nanoseconds per call.
const benchEnv = "EXECBOX_SECCOMP_BENCH"

// benchCalls is how many times the helper makes each call.
const benchCalls = 200000

func benchHelper(mode string) {
	if mode == "filter" {
		f, err := Build(Options{})
		if err != nil {
			panic(err)
		}
		if err := SetNoNewPrivs(); err != nil {
			panic(err)
		}
		if err := Install(f, true); err != nil {
			panic(err)
		}
	}
	// getppid: early in the table; close(-1), futex(NULL, WAKE): hot calls
	// of every program, further in.
	t0 := time.Now()
	for range benchCalls {
		unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
		unix.RawSyscall(unix.SYS_CLOSE, ^uintptr(0), 0, 0)
		unix.RawSyscall(unix.SYS_FUTEX, 0, 1, 0)
	}
	os.Stdout.WriteString(strconv.FormatInt(time.Since(t0).Nanoseconds()/(3*benchCalls), 10))
}

// BenchmarkFilteredSyscall reports the cost of a system call under the
// filter (filter_ns) and without (plain_ns), measured in the same run by
// helper processes, and their ratio.
func BenchmarkFilteredSyscall(b *testing.B) {
	testutil.Require(b, table)
	var plain, filtered float64
	ns := func(mode string) float64 {
		cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
		cmd.Env = append(os.Environ(), benchEnv+"="+mode)
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("helper: %v", err)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			b.Fatalf("helper printed %q", out)
		}
		return v
	}
	for range b.N {
		plain += ns("plain")
		filtered += ns("filter")
	}
	b.ReportMetric(plain/float64(b.N), "plain_ns")
	b.ReportMetric(filtered/float64(b.N), "filter_ns")
	b.ReportMetric(filtered/plain, "x_plain")
}

package testutil

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ResetPeakRSS resets the peak resident set size (VmHWM) of process pid:
// Linux >= 4.0, "5" written to its clear_refs.
func ResetPeakRSS(tb testing.TB, pid int) {
	tb.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		tb.Fatalf("reset the peak RSS of %d: %v", pid, err)
	}
}

// PeakRSS returns the peak resident set size (VmHWM) of process pid in
// bytes.
func PeakRSS(tb testing.TB, pid int) int64 {
	tb.Helper()
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(string(s), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				tb.Fatalf("VmHWM of %d: %v", pid, err)
			}
			return kb << 10
		}
	}
	tb.Fatalf("no VmHWM for %d", pid)
	return 0
}

// RawCopy runs argv and copies its stdout to io.Discard, checking it
// wrote size bytes: the baseline of output throughput benchmarks.
func RawCopy(tb testing.TB, argv []string, size int64) time.Duration {
	tb.Helper()
	t0 := time.Now()
	cmd := exec.Command(argv[0], argv[1:]...)
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, pipe); err != nil || n != size {
		tb.Fatal(n, err)
	}
	if err := cmd.Wait(); err != nil {
		tb.Fatal(err)
	}
	return time.Since(t0)
}

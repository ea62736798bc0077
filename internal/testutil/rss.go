package testutil

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
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

// BenchOutput1GiB runs a command printing 1 GiB to stdout in sb under
// the default output cap, against RawCopy of the same command, and
// reports x_raw (throughput ratio), name+"_GiB/s" and the peak RSS of the
// caller and, when other is not 0, of process other (the agent or server
// between them), as other_name+"_rss_MiB".
func BenchOutput1GiB(b *testing.B, sb execbox.Sandbox, name string, other int, otherName string) {
	const size = 1 << 30
	argv := []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}
	var raw, ours time.Duration
	var peak, otherPeak int64
	for b.Loop() {
		raw += RawCopy(b, argv, size)
		// Return the raw copy's and earlier iterations' garbage to the OS
		// first, so the peak measures this Exec.
		debug.FreeOSMemory()
		ResetPeakRSS(b, os.Getpid())
		if other != 0 {
			ResetPeakRSS(b, other)
		}
		t0 := time.Now()
		res, err := sb.Exec(b.Context(), execbox.ExecRequest{Command: argv})
		ours += time.Since(t0)
		peak = max(peak, PeakRSS(b, os.Getpid()))
		if other != 0 {
			otherPeak = max(otherPeak, PeakRSS(b, other))
		}
		if err != nil || !res.Success() || res.Stdout.Total != size || !res.Stdout.Truncated() {
			b.Fatal(err, res.String(), res.Stdout.Total)
		}
	}
	gib := float64(b.N) // 1 GiB per iteration
	b.ReportMetric(gib/raw.Seconds(), "raw_GiB/s")
	b.ReportMetric(gib/ours.Seconds(), name+"_GiB/s")
	b.ReportMetric(raw.Seconds()/ours.Seconds(), "x_raw")
	b.ReportMetric(float64(peak)/(1<<20), "caller_rss_MiB")
	if other != 0 {
		b.ReportMetric(float64(otherPeak)/(1<<20), otherName+"_rss_MiB")
	}
}

package local_test

import (
	"bytes"
	"os/exec"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
)

func newBenchSandbox(b *testing.B) execbox.Sandbox {
	b.Helper()
	sb, err := local.New(local.Options{}).Create(b.Context(), execbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sb.Close() })
	return sb
}

// BenchmarkExecTrue compares Exec of `true` with raw os/exec capturing both
// streams, interleaved in the same loop so both see the same machine. The
// x_raw metric is the ratio (target: at most 1.15).
func BenchmarkExecTrue(b *testing.B) {
	sb := newBenchSandbox(b)
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	req := execbox.ExecRequest{Command: []string{truePath}}
	var raw, ours time.Duration
	for b.Loop() {
		t0 := time.Now()
		var out, errb bytes.Buffer
		cmd := exec.Command(truePath)
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		res, err := sb.Exec(b.Context(), req)
		if err != nil || !res.Success() {
			b.Fatal(err, res.String())
		}
		raw += t1.Sub(t0)
		ours += time.Since(t1)
	}
	b.ReportMetric(float64(raw.Microseconds())/float64(b.N), "raw_us/op")
	b.ReportMetric(float64(ours.Microseconds())/float64(b.N), "execbox_us/op")
	b.ReportMetric(float64(ours)/float64(raw), "x_raw")
}

// BenchmarkOutput1GiB prints 1 GiB to stdout under the default 16 MiB cap.
// It reports throughput against a raw io.Copy from the same command's pipe
// (x_raw, target at least 0.5) and the test process's peak RSS while
// execbox runs (peak_rss_MiB, target under 64).
func BenchmarkOutput1GiB(b *testing.B) {
	sb := newBenchSandbox(b)
	testutil.BenchOutput1GiB(b, sb, "execbox", 0, "")
}

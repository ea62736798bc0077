package local_test

import (
	"bytes"
	"os/exec"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
)

// openBenchSession opens a session of kind in a new local sandbox.
func openBenchSession(b *testing.B, kind execbox.SessionKind) execbox.Session {
	b.Helper()
	s, err := execbox.OpenSession(b.Context(), newBenchSandbox(b), execbox.SessionOptions{Kind: kind})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkSessionBashTrue compares the round trip of `true` in a bash
// session with starting `bash -c true` through raw os/exec (both streams
// captured), interleaved in the same loop so both see the same machine.
// The x_faster metric is raw time over session time (target: at least 5).
func BenchmarkSessionBashTrue(b *testing.B) {
	testutil.Require(b, testutil.Command("bash"))
	bash, err := exec.LookPath("bash")
	if err != nil {
		b.Fatal(err)
	}
	s := openBenchSession(b, execbox.SessionBash)
	req := execbox.SessionRequest{Code: "true"}
	var raw, ours time.Duration
	for b.Loop() {
		t0 := time.Now()
		var out, errb bytes.Buffer
		cmd := exec.Command(bash, "-c", "true")
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		res, err := s.Run(b.Context(), req)
		if err != nil || !res.Success() {
			b.Fatal(err, res.Reason, res.ExitCode)
		}
		raw += t1.Sub(t0)
		ours += time.Since(t1)
	}
	b.ReportMetric(float64(raw.Microseconds())/float64(b.N), "raw_us/op")
	b.ReportMetric(float64(ours.Microseconds())/float64(b.N), "session_us/op")
	b.ReportMetric(float64(raw)/float64(ours), "x_faster")
}

// BenchmarkSessionPythonCell measures the round trip of the cell `1+1` in
// a Python session, against starting `python3 -c 1+1` through raw
// os/exec in the same loop (x_faster).
func BenchmarkSessionPythonCell(b *testing.B) {
	testutil.Require(b, testutil.Command("python3"))
	python, err := exec.LookPath("python3")
	if err != nil {
		b.Fatal(err)
	}
	s := openBenchSession(b, execbox.SessionPython)
	req := execbox.SessionRequest{Code: "1+1"}
	var raw, ours time.Duration
	for b.Loop() {
		t0 := time.Now()
		var out, errb bytes.Buffer
		cmd := exec.Command(python, "-c", "1+1")
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		res, err := s.Run(b.Context(), req)
		if err != nil || !res.Success() || res.Value != "2" {
			b.Fatal(err, res.Reason, res.Value, res.Exception)
		}
		raw += t1.Sub(t0)
		ours += time.Since(t1)
	}
	b.ReportMetric(float64(raw.Microseconds())/float64(b.N), "raw_us/op")
	b.ReportMetric(float64(ours.Microseconds())/float64(b.N), "session_us/op")
	b.ReportMetric(float64(raw)/float64(ours), "x_faster")
}

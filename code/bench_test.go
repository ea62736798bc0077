package code_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/code"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
)

// BenchmarkPythonHello runs a Python hello world through Run (default
// limits: CPU time, address space and file size rlimits; a fresh run
// directory with the source written to it) and, interleaved in the same
// loop, `python3 -c` launched by raw os/exec capturing both streams, in two
// forms:
//
//   - x_raw: the interpreter Run resolved (sys.executable), the fair
//     baseline for Run's own overhead (target: at most 1.2);
//   - x_raw_path: "python3" as found in PATH, which on machines with a
//     version manager is a shim script (pyenv: ~70ms a start), the cost
//     an agent pays without execbox resolving it.
func BenchmarkPythonHello(b *testing.B) {
	testutil.Require(b, langDeps[code.Python])
	sb, err := local.New(local.Options{}).Create(b.Context(), execbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sb.Close() })
	r := code.NewRunner(sb, code.Options{})
	const src = `print("hello")`
	req := code.Request{Language: code.Python, Source: src, Cleanup: true}
	res, err := r.Run(b.Context(), req) // resolves python3 once
	if err != nil || !res.Success() {
		b.Fatal(err, res.String())
	}
	real := res.Command[0]
	shim, err := exec.LookPath("python3")
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("resolved %s; PATH has %s", real, shim)
	raw := func(path string) time.Duration {
		t0 := time.Now()
		var out, errb bytes.Buffer
		cmd := exec.Command(path, "-c", src)
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil || out.String() != "hello\n" {
			b.Fatal(err, out.String(), errb.String())
		}
		return time.Since(t0)
	}
	var tReal, tShim, tRun time.Duration
	for b.Loop() {
		tReal += raw(real)
		tShim += raw(shim)
		t0 := time.Now()
		res, err := r.Run(b.Context(), req)
		tRun += time.Since(t0)
		if err != nil || !res.Success() || !strings.HasPrefix(res.Stdout.Text(), "hello") {
			b.Fatal(err, res.String())
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(tRun.Microseconds())/n, "run_us/op")
	b.ReportMetric(float64(tReal.Microseconds())/n, "raw_us/op")
	b.ReportMetric(float64(tShim.Microseconds())/n, "raw_path_us/op")
	b.ReportMetric(float64(tRun)/float64(tReal), "x_raw")
	b.ReportMetric(float64(tRun)/float64(tShim), "x_raw_path")
}

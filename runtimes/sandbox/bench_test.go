//go:build linux

package sandbox_test

import (
	"log/slog"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
	"github.com/execbox/execbox/runtimes/sandbox"
)

// Benchmarks report ratios to baselines measured in the same run,
// interleaved in the same loop so that both see the same machine.

// baseline is a command run per iteration for comparison, or nil when
// the tool is not installed.
func baseline(b *testing.B, name string, args ...string) *exec.Cmd {
	b.Helper()
	if os.Getenv("EXECBOX_BENCH_NO_BASELINES") != "" {
		return nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		b.Logf("%s not installed: no %s baseline", name, name)
		return nil
	}
	cmd := exec.Command(p, args...)
	if err := cmd.Run(); err != nil {
		b.Logf("%s baseline does not run here (%v): skipped", name, err)
		return nil
	}
	return exec.Command(p, args...)
}

func rerun(b *testing.B, c *exec.Cmd) time.Duration {
	t0 := time.Now()
	if err := exec.Command(c.Path, c.Args[1:]...).Run(); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

var (
	// unshareArgs creates the namespaces a sandbox has, per process.
	unshareArgs = []string{"--user", "--map-root-user", "--mount", "--pid", "--fork", "--net", "--ipc", "--uts", "--cgroup", "true"}
	bwrapArgs   = []string{"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--unshare-all", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "true"}
)

// BenchmarkExecTrue compares Exec of `true` in a live sandbox with the
// local runtime (x_local, target at most 2), and with a new set of
// namespaces per command through unshare(1) and bwrap(1) when present.
func BenchmarkExecTrue(b *testing.B) {
	rt := requireSandbox(b, sandbox.Options{Logger: quiet})
	sb, err := rt.Create(b.Context(), execbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	lsb, err := local.New(local.Options{}).Create(b.Context(), execbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	defer lsb.Close()
	req := execbox.ExecRequest{Command: []string{"true"}}
	var ours, loc time.Duration
	for b.Loop() {
		t0 := time.Now()
		if res, err := lsb.Exec(b.Context(), req); err != nil || !res.Success() {
			b.Fatal(err, res.String())
		}
		t1 := time.Now()
		if res, err := sb.Exec(b.Context(), req); err != nil || !res.Success() {
			b.Fatal(err, res.String())
		}
		loc += t1.Sub(t0)
		ours += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(ours.Microseconds())/n, "sandbox_us/op")
	b.ReportMetric(float64(loc.Microseconds())/n, "local_us/op")
	b.ReportMetric(float64(ours)/float64(loc), "x_local")
	reportBaselines(b, "_us/op", func(d time.Duration) float64 { return float64(d.Microseconds()) })
}

// reportBaselines times unshare(1) and bwrap(1) running `true` in new
// namespaces, after the benchmark's own loop: interleaved, the network
// namespaces they create and destroy (whose cleanup is asynchronous and
// costly) would slow down what is measured.
func reportBaselines(b *testing.B, unit string, conv func(time.Duration) float64) {
	b.StopTimer()
	for _, bl := range []struct {
		name string
		cmd  *exec.Cmd
	}{{"unshare", baseline(b, "unshare", unshareArgs...)}, {"bwrap", baseline(b, "bwrap", bwrapArgs...)}} {
		if bl.cmd == nil {
			continue
		}
		var d []time.Duration
		for range min(b.N, 50) {
			d = append(d, rerun(b, bl.cmd))
		}
		b.ReportMetric(conv(median(d)), bl.name+"_median"+unit)
	}
}

// BenchmarkThroughput runs short execs across 8 sandboxes from 8
// concurrent callers, against raw os/exec from 8 goroutines, each for
// the same number of commands (x_raw: the ratio of throughputs, target
// at least 0.5).
func BenchmarkThroughput(b *testing.B) {
	const callers = 8
	rt := requireSandbox(b, sandbox.Options{Logger: quiet})
	sbs := make([]execbox.Sandbox, callers)
	for i := range sbs {
		sb, err := rt.Create(b.Context(), execbox.Spec{})
		if err != nil {
			b.Fatal(err)
		}
		defer sb.Close()
		sbs[i] = sb
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	const perIter = 64
	run := func(fn func(i int) error) time.Duration {
		var next atomic.Int64
		var wg sync.WaitGroup
		t0 := time.Now()
		for c := range callers {
			wg.Go(func() {
				for next.Add(1) <= perIter {
					if err := fn(c); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(t0)
	}
	var raw, ours time.Duration
	for b.Loop() {
		raw += run(func(int) error { return exec.Command(truePath).Run() })
		ours += run(func(i int) error {
			_, err := sbs[i].Exec(b.Context(), execbox.ExecRequest{Command: []string{"true"}})
			return err
		})
	}
	total := float64(b.N * perIter)
	b.ReportMetric(total/raw.Seconds(), "raw_execs/s")
	b.ReportMetric(total/ours.Seconds(), "sandbox_execs/s")
	b.ReportMetric(raw.Seconds()/ours.Seconds(), "x_raw")
}

// BenchmarkCreateExecClose measures a whole sandbox's life, Create, one
// Exec of `true`, Close (median_ms, target under 25), against one command
// in new namespaces through unshare(1) and bwrap(1).
func BenchmarkCreateExecClose(b *testing.B) {
	rt := requireSandbox(b, sandbox.Options{Logger: quiet})
	var ours []time.Duration
	for b.Loop() {
		t0 := time.Now()
		sb, err := rt.Create(b.Context(), execbox.Spec{})
		if err != nil {
			b.Fatal(err)
		}
		if res, err := sb.Exec(b.Context(), execbox.ExecRequest{Command: []string{"true"}}); err != nil || !res.Success() {
			b.Fatal(err, res.String())
		}
		if err := sb.Close(); err != nil {
			b.Fatal(err)
		}
		ours = append(ours, time.Since(t0))
	}
	b.ReportMetric(ms(median(ours)), "median_ms")
	reportBaselines(b, "_ms", ms)
}

// BenchmarkOutput1GiB prints 1 GiB to stdout in a sandbox under the
// default 16 MiB cap, against a raw io.Copy of the same command's pipe on
// the host (x_raw, target at least 0.5). It reports the peak RSS of the
// caller (this process) and of the sandbox's agent (target under 64 MiB
// each).
func BenchmarkOutput1GiB(b *testing.B) {
	rt := requireSandbox(b, sandbox.Options{Logger: quiet})
	sb, err := rt.Create(b.Context(), execbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	agent, err := sandbox.AgentPID(sb.(*sandbox.Sandbox))
	if err != nil {
		b.Fatal(err)
	}
	const size = 1 << 30
	argv := []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}
	var raw, ours time.Duration
	var peak, agentPeak int64
	for b.Loop() {
		raw += testutil.RawCopy(b, argv, size)
		debug.FreeOSMemory()
		testutil.ResetPeakRSS(b, os.Getpid())
		testutil.ResetPeakRSS(b, agent)
		t0 := time.Now()
		res, err := sb.Exec(b.Context(), execbox.ExecRequest{Command: argv})
		ours += time.Since(t0)
		peak = max(peak, testutil.PeakRSS(b, os.Getpid()))
		agentPeak = max(agentPeak, testutil.PeakRSS(b, agent))
		if err != nil || !res.Success() || res.Stdout.Total != size || !res.Stdout.Truncated() {
			b.Fatal(err, res.String(), res.Stdout.Total)
		}
	}
	gib := float64(b.N)
	b.ReportMetric(gib/raw.Seconds(), "raw_GiB/s")
	b.ReportMetric(gib/ours.Seconds(), "sandbox_GiB/s")
	b.ReportMetric(raw.Seconds()/ours.Seconds(), "x_raw")
	b.ReportMetric(float64(peak)/(1<<20), "caller_rss_MiB")
	b.ReportMetric(float64(agentPeak)/(1<<20), "agent_rss_MiB")
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// quiet discards the runtime's logs: at debug level the agent logs every
// request, which a benchmark would measure.
var quiet = slog.New(slog.DiscardHandler)

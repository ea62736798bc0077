//go:build linux

package sandbox_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

// BenchmarkExecTrue compares Exec of `true` in a live sandbox with raw
// os/exec capturing both streams (x_raw, target at most 1.5), with the
// local runtime (x_local), and with a new set of namespaces per command
// through unshare(1) and bwrap(1) when present.
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
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	var ours, loc, raw time.Duration
	for b.Loop() {
		tr := time.Now()
		if err := rawExec(truePath); err != nil {
			b.Fatal(err)
		}
		raw += time.Since(tr)
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
	b.ReportMetric(float64(raw.Microseconds())/n, "raw_us/op")
	b.ReportMetric(float64(ours)/float64(loc), "x_local")
	b.ReportMetric(float64(ours)/float64(raw), "x_raw")
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

// rawExec runs path with os/exec capturing both streams, as an Exec does:
// the baseline of the short-exec benchmarks.
func rawExec(path string) error {
	var out, errb bytes.Buffer
	cmd := exec.Command(path)
	cmd.Stdout, cmd.Stderr = &out, &errb
	return cmd.Run()
}

// BenchmarkThroughput runs short execs across 8 sandboxes from 8
// concurrent callers, against raw os/exec capturing both streams from 8
// goroutines, each for the same number of commands (x_raw: the ratio of
// throughputs, target at least 0.7). It reports the CPU time per exec of
// this process (the callers) and of its children (the agents, their
// commands and the raw commands), for each side.
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
	var rawCPU, oursCPU, agentCPU time.Duration
	for b.Loop() {
		c0, k0 := cpuTimes()
		a0 := agentsCPU(b, sbs)
		raw += run(func(int) error { return rawExec(truePath) })
		c1, k1 := cpuTimes()
		ours += run(func(i int) error {
			_, err := sbs[i].Exec(b.Context(), execbox.ExecRequest{Command: []string{"true"}})
			return err
		})
		c2, _ := cpuTimes()
		rawCPU += c1 - c0 + k1 - k0
		oursCPU += c2 - c1
		agentCPU += agentsCPU(b, sbs) - a0
	}
	total := float64(b.N * perIter)
	b.ReportMetric(total/raw.Seconds(), "raw_execs/s")
	b.ReportMetric(total/ours.Seconds(), "sandbox_execs/s")
	b.ReportMetric(raw.Seconds()/ours.Seconds(), "x_raw")
	b.ReportMetric(float64(rawCPU.Microseconds())/total/1000, "raw_cpu_ms/exec")
	b.ReportMetric(float64(oursCPU.Microseconds())/total/1000, "caller_cpu_ms/exec")
	b.ReportMetric(float64(agentCPU.Microseconds())/total/1000, "agent_cpu_ms/exec")
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
	testutil.BenchOutput1GiB(b, sb, "sandbox", agent, "agent")
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

// cpuTimes returns the CPU time of this process and of its reaped
// children.
func cpuTimes() (self, children time.Duration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return self, time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// agentsCPU returns the CPU time the sandboxes' agents have used, and
// their reaped children (the commands).
func agentsCPU(b *testing.B, sbs []execbox.Sandbox) time.Duration {
	var total time.Duration
	for _, sb := range sbs {
		pid, err := sandbox.AgentPID(sb.(*sandbox.Sandbox))
		if err != nil {
			b.Fatal(err)
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			b.Fatal(err)
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
			ticks, _ := strconv.ParseInt(f[i], 10, 64)
			total += time.Duration(ticks) * time.Second / 100 // USER_HZ
		}
	}
	return total
}

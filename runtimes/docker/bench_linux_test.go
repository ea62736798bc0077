package docker_test

import (
	"io"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/runtimes/docker"
	"github.com/execbox/execbox/runtimes/local"
)

// BenchmarkExecTrue is Exec of `true` on a docker sandbox (the agent in
// the container, over its socket), interleaved in the same run with the
// baselines: the local runtime's Exec (target: at most 2 ms more,
// median: docker_extra_ms), the Engine SDK's exec (create, attach, start,
// inspect) and `docker exec` in the same container.
func BenchmarkExecTrue(b *testing.B) {
	rt := newRuntime(b, docker.Options{})
	sb, err := rt.Create(b.Context(), execbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	cid := sb.(*docker.Sandbox).ContainerID()
	lsb, err := local.New(local.Options{}).Create(b.Context(), execbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	defer lsb.Close()
	dc := engine(b)
	execTrue := func(s execbox.Sandbox) time.Duration {
		t0 := time.Now()
		if res, err := s.Exec(b.Context(), execbox.ExecRequest{Command: []string{"true"}}); err != nil || !res.Success() {
			b.Fatal(err, res.String())
		}
		return time.Since(t0)
	}
	sdkExec := func() time.Duration {
		t0 := time.Now()
		ex, err := dc.ExecCreate(b.Context(), cid, client.ExecCreateOptions{Cmd: []string{"true"}, AttachStdout: true, AttachStderr: true})
		if err != nil {
			b.Fatal(err)
		}
		att, err := dc.ExecAttach(b.Context(), ex.ID, client.ExecAttachOptions{})
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, att.Reader)
		att.Close()
		if in, err := dc.ExecInspect(b.Context(), ex.ID, client.ExecInspectOptions{}); err != nil || in.ExitCode != 0 {
			b.Fatal(err, in.ExitCode)
		}
		return time.Since(t0)
	}
	cliExec := func() time.Duration {
		t0 := time.Now()
		if out, err := exec.Command("docker", "exec", cid, "true").CombinedOutput(); err != nil {
			b.Fatalf("docker exec: %v: %s", err, out)
		}
		return time.Since(t0)
	}
	for range 5 { // warm both
		execTrue(sb)
		execTrue(lsb)
	}
	var dock, loc, sdk, cli []time.Duration
	for b.Loop() {
		dock = append(dock, execTrue(sb))
		loc = append(loc, execTrue(lsb))
		if len(sdk) < 50 {
			sdk = append(sdk, sdkExec())
			cli = append(cli, cliExec())
		}
	}
	b.ReportMetric(ms(median(dock)), "docker_median_ms")
	b.ReportMetric(ms(median(loc)), "local_median_ms")
	b.ReportMetric(ms(median(dock)-median(loc)), "docker_extra_ms")
	b.ReportMetric(ms(median(sdk)), "sdk_exec_median_ms")
	b.ReportMetric(ms(median(cli)), "docker_exec_median_ms")
	b.ReportMetric(float64(median(dock))/float64(median(sdk)), "x_sdk_exec")
}

// BenchmarkCreateExecClose is Create + Exec of `true` + Close of a docker
// sandbox against `docker run --rm` of the same image, interleaved.
func BenchmarkCreateExecClose(b *testing.B) {
	rt := newRuntime(b, docker.Options{})
	cycle := func() time.Duration {
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
		return time.Since(t0)
	}
	run := func() time.Duration {
		t0 := time.Now()
		if out, err := exec.Command("docker", "run", "--rm", "--network", "none", shared.tag, "true").CombinedOutput(); err != nil {
			b.Fatalf("docker run: %v: %s", err, out)
		}
		return time.Since(t0)
	}
	cycle()
	var ours, dock []time.Duration
	for b.Loop() {
		ours = append(ours, cycle())
		dock = append(dock, run())
	}
	b.ReportMetric(ms(median(ours)), "execbox_median_ms")
	b.ReportMetric(ms(median(dock)), "docker_run_median_ms")
	b.ReportMetric(float64(median(ours))/float64(median(dock)), "x_docker_run")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

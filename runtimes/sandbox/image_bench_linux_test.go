package sandbox_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/image"
	"github.com/execbox/execbox/image/imagetest"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/sandbox"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// BenchmarkImageCreateExecClose is Create + Exec of true + Close of a
// sandbox from a cached image (busybox) against the same without an
// image, interleaved, both with the same static agent (target: at most
// 5 ms more, median: image_extra_ms), and against `docker run --rm` of
// the same image on the same machine (where a Docker engine answers).
func BenchmarkImageCreateExecClose(b *testing.B) {
	rt := imageRuntime(b, sandbox.Options{Logger: quiet})
	ref := layoutOf(b, "busybox", imagetest.BusyboxImage)
	cycle := func(spec execbox.Spec) time.Duration {
		t0 := time.Now()
		sb, err := rt.Create(b.Context(), spec)
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
	cycle(execbox.Spec{Image: ref}) // unpacked once, outside the measure
	var img, plain []time.Duration
	for b.Loop() {
		img = append(img, cycle(execbox.Spec{Image: ref}))
		plain = append(plain, cycle(execbox.Spec{}))
	}
	b.ReportMetric(ms(median(img)), "image_median_ms")
	b.ReportMetric(ms(median(plain)), "plain_median_ms")
	b.ReportMetric(ms(median(img)-median(plain)), "image_extra_ms")
	if !testutil.Docker.Available() {
		return
	}
	b.StopTimer()
	tag := dockerLoad(b, imagetest.BusyboxImage, "execbox-bench/busybox:1")
	var dock []time.Duration
	for range min(b.N, 10) {
		t0 := time.Now()
		if out, err := exec.Command("docker", "run", "--rm", "--network", "none", tag, "true").CombinedOutput(); err != nil {
			b.Fatalf("docker run: %v: %s", err, out)
		}
		dock = append(dock, time.Since(t0))
	}
	b.ReportMetric(ms(median(dock)), "docker_run_median_ms")
	b.ReportMetric(float64(median(img))/float64(median(dock)), "x_docker_run")
}

// dockerLoad loads img into the Docker engine as tag (docker load of a
// `docker save` tarball) and removes it at the end of b.
func dockerLoad(b *testing.B, img func() (v1.Image, error), tag string) string {
	b.Helper()
	im, err := img()
	if err != nil {
		b.Fatal(err)
	}
	r, err := name.NewTag(tag)
	if err != nil {
		b.Fatal(err)
	}
	file := filepath.Join(b.TempDir(), "image.tar")
	if err := tarball.WriteToFile(file, r, im); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("docker", "load", "-i", file).CombinedOutput(); err != nil {
		b.Fatalf("docker load: %v: %s", err, out)
	}
	b.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })
	return tag
}

// BenchmarkImagePull is the first pull of the Python image from a
// registry on loopback into an empty store (pull and unpack), against
// `docker pull` of it by the Docker engine from the same registry (where
// one answers), in the same run.
func BenchmarkImagePull(b *testing.B) {
	testutil.Require(b, testutil.Root, testutil.Registry)
	reg := testutil.StartRegistry(b, testutil.RegistryOptions{})
	py, err := imagetest.PythonImage()
	if err != nil {
		b.Fatal(err)
	}
	ref := reg.Host + "/py:3.11"
	imagetest.PushImage(b, py, ref)
	docker := testutil.Docker.Available()
	var ours, dock []time.Duration
	for b.Loop() {
		st, err := image.Open(image.Options{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, err := st.Pull(b.Context(), ref); err != nil {
			b.Fatal(err)
		}
		ours = append(ours, time.Since(t0))
		if err := os.RemoveAll(st.Dir()); err != nil {
			b.Fatal(err)
		}
		if docker {
			exec.Command("docker", "rmi", "-f", ref).Run()
			t0 := time.Now()
			if out, err := exec.Command("docker", "pull", "-q", ref).CombinedOutput(); err != nil {
				b.Fatalf("docker pull: %v: %s", err, out)
			}
			dock = append(dock, time.Since(t0))
			exec.Command("docker", "rmi", "-f", ref).Run()
		}
	}
	b.ReportMetric(ms(median(ours)), "pull_median_ms")
	if docker {
		b.ReportMetric(ms(median(dock)), "docker_pull_median_ms")
		b.ReportMetric(float64(median(ours))/float64(median(dock)), "x_docker_pull")
	}
}

//go:build integration

package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/image/imagetest"
	"github.com/execbox/execbox/internal/staticbin"
	"github.com/execbox/execbox/internal/testutil"
)

// TestDynamicBinaryRunsImages is issue 23's item 3: the execbox that a
// plain `go build` (or go run, or go install …@latest) makes is
// dynamically linked, and it runs an image pushed to a registry on the
// sandbox runtime and on the docker runtime, building the static agent
// they need once (into $XDG_CACHE_HOME) and finding it the next time.
func TestDynamicBinaryRunsImages(t *testing.T) {
	testutil.Require(t, testutil.Root, testutil.Docker, testutil.Registry, testutil.Command("go"),
		testutil.NewDep("busybox-static", func() error { _, err := imagetest.BusyboxImage(); return err }))
	bin := dynamicBinary(t)
	cache := worldSearchableDir(t)
	t.Setenv("XDG_CACHE_HOME", cache)

	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	bb, err := imagetest.BusyboxImage()
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Host + "/execbox-it/busybox:" + randomHex(t)[:8]
	imagetest.PushImage(t, bb, ref)
	t.Cleanup(func() {
		// t.Context is cancelled by now.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := imagetest.DockerRemove(ctx, ref); err != nil {
			t.Errorf("remove the image %s from the engine: %v", ref, err)
		}
	})
	images := t.TempDir()

	const built = "building a static execbox once"
	for i, args := range [][]string{
		{"exec", "--image", ref, "--images-dir", images, "--", "true"},
		{"exec", "--runtime", "docker", "--image", ref, "--", "true"},
		{"exec", "--image", ref, "--images-dir", images, "--", "echo", "again"},
	} {
		stdout, stderr, code := runBinary(t, bin, args...)
		if code != 0 {
			t.Fatalf("execbox %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
		}
		if i == 2 && stdout != "again\n" {
			t.Errorf("execbox %s: stdout %q", strings.Join(args, " "), stdout)
		}
		// The first one builds the agent; the others find it.
		if got := strings.Contains(stderr, built); got != (i == 0) {
			t.Errorf("execbox %s: stderr %q: says %q: %v, want %v", strings.Join(args, " "), stderr, built, got, i == 0)
		}
	}
	agents, _ := filepath.Glob(filepath.Join(cache, "execbox", "agent", "*", "execbox"))
	if len(agents) != 1 {
		t.Fatalf("cached agents %q, want one", agents)
	}
	if interp, err := staticbin.Interpreter(agents[0]); err != nil || interp != "" {
		t.Errorf("cached agent %s: interpreter %q, %v; want a static program", agents[0], interp, err)
	}
}

// dynamicBinary is the binary TestMain built as `go build` does, which
// must be dynamically linked (cgo on) for the test to mean anything.
func dynamicBinary(t *testing.T) string {
	t.Helper()
	interp, err := staticbin.Interpreter(binary)
	if err != nil {
		t.Fatal(err)
	}
	if interp != "" {
		return binary
	}
	testutil.Require(t, testutil.Command("cc"))
	bin := filepath.Join(t.TempDir(), "execbox-dynamic")
	build := exec.Command("go", "build", "-o", bin, "../cmd/execbox")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build with cgo: %v\n%s", err, out)
	}
	if interp, err := staticbin.Interpreter(bin); err != nil || interp == "" {
		t.Fatalf("go build with cgo made a static program (%v)", err)
	}
	return bin
}

// worldSearchableDir is a temporary directory others may search (mode
// 0755, unlike t.TempDir's parent), removed at cleanup: a sandbox's init
// starts the agent from it as an unprivileged uid.
func worldSearchableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "execbox-agent-cache-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

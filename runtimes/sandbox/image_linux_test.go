package sandbox_test

import (
	"archive/tar"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/execboxtest"
	"github.com/execbox/execbox/image"
	"github.com/execbox/execbox/image/imagetest"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/sandbox"
	"github.com/execbox/execbox/runtimes/sandbox/sandboximage"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// testDir returns the directory that the tests of this package share
// for the life of the test binary (a static execbox, image layouts, an
// image store), made on first use (the binary's re-executions, as the
// sandbox's init or a test's child, never make one) and removed by
// TestMain.
func testDir() string {
	testDirOnce.Do(func() {
		dir, err := os.MkdirTemp("", "execbox-sandbox-test-")
		if err != nil {
			panic(err)
		}
		// The sandbox's init runs the static execbox in it as an
		// unprivileged host uid.
		if err := os.Chmod(dir, 0o755); err != nil {
			os.Remove(dir)
			panic(err)
		}
		testDirPath.Store(&dir)
	})
	return *testDirPath.Load()
}

var (
	testDirOnce sync.Once
	testDirPath atomic.Pointer[string]
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(ownerEnv); dir != "" {
		sweepOwner(dir) // TestSweep's child: never returns
	}
	code := testutil.LeakCheck(m.Run())
	if dir := testDirPath.Load(); dir != nil {
		os.RemoveAll(*dir)
	}
	os.Exit(code)
}

// imageDeps are what image sandboxes need here: a static busybox for the
// images the tests build, and a static execbox for the agent.
var imageDeps = []testutil.Dep{
	testutil.NewDep("busybox-static", func() error { _, err := imagetest.BusyboxImage(); return err }),
	testutil.StaticAgent,
}

// sharedStore is the image store of the tests that do not test the store
// itself: an image is unpacked once per test binary.
var sharedStore = sync.OnceValues(func() (*image.Store, error) {
	return image.Open(image.Options{Dir: filepath.Join(testDir(), "images")})
})

// imageRuntime returns a sandbox runtime that can make sandboxes from
// images: its agent runs from a static execbox, its store is
// sharedStore unless opts sets one.
func imageRuntime(t testing.TB, opts sandbox.Options) *sandbox.Runtime {
	t.Helper()
	// Images are root's for now (Capabilities.Images): rootless
	// sandboxes refuse them (TestImageRootless).
	testutil.Require(t, append([]testutil.Dep{testutil.Root}, imageDeps...)...)
	bin, err := testutil.StaticExecbox(testDir())
	if err != nil {
		t.Fatal(err)
	}
	opts.AgentBinary = bin
	if opts.Images == nil {
		st, err := sharedStore()
		if err != nil {
			t.Fatal(err)
		}
		opts.Images = sandboximage.New(st)
	}
	rt := requireSandbox(t, opts)
	if !rt.Capabilities().Images {
		t.Fatalf("sandbox runtime without images as root: %s", rt.Health(t.Context()).Detail)
	}
	return rt
}

// toolImage is imagetest.ToolImage: what the conformance suite runs.
var toolImage = imagetest.ToolImage

// envImage is toolImage with a variable of its own in its config.
func envImage() (v1.Image, error) {
	img, err := toolImage()
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Config.Env = append(cf.Config.Env, "EXECBOX_IMAGE_VAR=from-image", "EXECBOX_BOTH=image")
	return mutate.ConfigFile(img, cf)
}

// layoutOf writes img as an OCI image layout in a directory of testDir()
// named name (once per test binary) and returns its path.
func layoutOf(t testing.TB, name string, img func() (v1.Image, error)) string {
	t.Helper()
	layoutMu.Lock()
	defer layoutMu.Unlock()
	dir := filepath.Join(testDir(), "layout-"+name)
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err == nil {
		return dir
	}
	im, err := img()
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(im); err != nil {
		t.Fatal(err)
	}
	return dir
}

var layoutMu sync.Mutex

// TestImageConformance runs the conformance and session suites in
// sandboxes whose root is an image's. (Its image sets only PATH: the
// suite's environment check takes any other variable it did not set for
// one leaked from the runtime, and an image's are the base of every
// command's environment by design; TestImageEnv checks those.)
func TestImageConformance(t *testing.T) {
	rt := imageRuntime(t, sandbox.Options{})
	ref := layoutOf(t, "tools", toolImage)
	spec := func(*testing.T) execbox.Spec { return execbox.Spec{Image: ref} }
	t.Run("conformance", func(t *testing.T) {
		execboxtest.Run(t, execboxtest.Config{Runtime: rt, Spec: spec, Slack: 3 * time.Second, AfterClose: checkGone})
	})
	t.Run("sessions", func(t *testing.T) {
		execboxtest.RunSessions(t, execboxtest.Config{Runtime: rt, Spec: spec, Slack: 3 * time.Second, AfterClose: checkGone})
	})
}

// TestImageRoot: the root is the image's (not the host's), writable by
// the sandbox's root, each sandbox's writes its own, none reaching the
// image's cache; the image's environment and user apply.
func TestImageRoot(t *testing.T) {
	rt := imageRuntime(t, sandbox.Options{})
	ref := layoutOf(t, "env", envImage)
	ctx := t.Context()
	a, err := rt.Create(ctx, execbox.Spec{Image: ref})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := rt.Create(ctx, execbox.Spec{Image: ref})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	sh := func(sb execbox.Sandbox, script string) execbox.Result {
		t.Helper()
		res, err := sb.Exec(ctx, execbox.ExecRequest{Command: []string{"sh", "-c", script}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := sh(a, `id -u; echo $EXECBOX_IMAGE_VAR; test -e /bin/busybox && echo busybox; test -e /usr/bin/gcc || echo no-gcc; `+
		`echo mine > /usr/bin/written && cat /usr/bin/written; rm /bin/ls && echo removed; pwd`)
	if got, want := res.Stdout.String(), "0\nfrom-image\nbusybox\nno-gcc\nmine\nremoved\n/workspace\n"; got != want || res.ExitCode != 0 {
		t.Fatalf("in the image's root: %q (stderr %q, exit %d), want %q", got, res.Stderr.String(), res.ExitCode, want)
	}
	res = sh(b, `test -e /usr/bin/written || echo unseen; test -e /bin/ls && echo kept`)
	if got := res.Stdout.String(); got != "unseen\nkept\n" {
		t.Errorf("another sandbox of the image sees the first one's writes: %q", got)
	}
	st, _ := sharedStore()
	img, err := st.Get(ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(img.RootFS, "usr/bin/written")); err == nil {
		t.Error("a sandbox's write reached the image's cache")
	}
	if _, err := os.Lstat(filepath.Join(img.RootFS, "bin/ls")); err != nil {
		t.Errorf("a sandbox's removal reached the image's cache: %v", err)
	}
	if res := sh(a, `python3 -c 'import sys; print(sys.version_info[0])'`); res.Stdout.String() != "3\n" {
		t.Errorf("python3 in the image: %q %q", res.Stdout.String(), res.Stderr.String())
	}
}

// TestImageShellWithoutBash: in a root without bash (busybox's), a shell
// line runs under sh and the Result says so.
func TestImageShellWithoutBash(t *testing.T) {
	rt := imageRuntime(t, sandbox.Options{})
	sb, err := rt.Create(t.Context(), execbox.Spec{Image: layoutOf(t, "busybox", imagetest.BusyboxImage)})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: "echo $0; test -e /bin/bash || echo no-bash"})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Stdout.String(); res.Shell != "sh" || got != "sh\nno-bash\n" {
		t.Errorf("shell line in busybox: Result.Shell %q, stdout %q (stderr %q), want sh and %q", res.Shell, got, res.Stderr.String(), "sh\nno-bash\n")
	}
}

// TestImageEnv: an image's variables are the base of every command's
// environment under every policy; the spec's and the request's override
// them.
func TestImageEnv(t *testing.T) {
	rt := imageRuntime(t, sandbox.Options{})
	sb, err := rt.Create(t.Context(), execbox.Spec{Image: layoutOf(t, "env", envImage), Env: map[string]string{"EXECBOX_BOTH": "spec"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	for _, p := range []execbox.EnvPolicy{execbox.EnvClean, execbox.EnvInherit, execbox.EnvAllow} {
		res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: `echo $EXECBOX_IMAGE_VAR $EXECBOX_BOTH $PATH`, EnvPolicy: p})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := res.Stdout.String(), "from-image spec /usr/local/bin:/usr/bin:/bin\n"; got != want {
			t.Errorf("policy %q: %q, want %q", p, got, want)
		}
	}
}

// TestImageUser: the image's User is who commands run as (names from its
// /etc/passwd); Spec.User overrides it.
func TestImageUser(t *testing.T) {
	rt := imageRuntime(t, sandbox.Options{})
	ref := layoutOf(t, "busybox-user", func() (v1.Image, error) {
		img, err := imagetest.BusyboxImage()
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.Config.User = "user"
		return mutate.ConfigFile(img, cf)
	})
	for _, c := range []struct {
		user *execbox.User
		want string
	}{{nil, "1000 1000\n"}, {&execbox.User{UID: 0, GID: 0}, "0 0\n"}} {
		sb, err := rt.Create(t.Context(), execbox.Spec{Image: ref, User: c.user})
		if err != nil {
			t.Fatal(err)
		}
		res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: "echo $(id -u) $(id -g)"})
		sb.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Stdout.String(); got != c.want {
			t.Errorf("user %v: id %q, want %q (stderr %q)", c.user, got, c.want, res.Stderr.String())
		}
	}
}

// TestImageHostileLinks: an image whose paths the boundary mounts over
// are symlinks out of its root (to the host's /etc, /root, /) gets a
// working boundary all the same, and nothing of the host is reached.
func TestImageHostileLinks(t *testing.T) {
	rt := imageRuntime(t, sandbox.Options{})
	ref := layoutOf(t, "hostile-links", func() (v1.Image, error) {
		bb, err := imagetest.BusyboxImage()
		if err != nil {
			return nil, err
		}
		link := func(name, target string) imagetest.Entry {
			return imagetest.Entry{Header: tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target}}
		}
		evil := imagetest.Tar(
			imagetest.Entry{Header: tar.Header{Name: "etc/.wh.passwd", Typeflag: tar.TypeReg}},
			link("etc/passwd", "/etc/shadow"),
			link("proc", "/../../etc"),
			link("tmp", "/root"),
			link("workspace", "/"),
			link("run", "../../../../run"),
			link("var", "/var"),
		)
		return mutate.AppendLayers(bb, imagetest.Layer(evil))
	})
	sb, err := rt.Create(t.Context(), execbox.Spec{Image: ref})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: `cat /etc/passwd; test -e /proc/self/status && echo proc; ` +
		`echo x > /tmp/t && echo tmp; echo y > /workspace/w && echo ws; ls /run | wc -l`})
	if err != nil {
		t.Fatal(err)
	}
	out := res.Stdout.String()
	if strings.Contains(out, "root:$") || strings.Contains(out, ":!:") || !strings.Contains(out, "sandbox:x:") {
		t.Errorf("/etc/passwd is not the sandbox's: %q", out)
	}
	for _, want := range []string{"proc\n", "tmp\n", "ws\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q: %q (stderr %q)", want, out, res.Stderr.String())
		}
	}
	if _, err := os.Stat("/root/t"); err == nil {
		t.Error("a write to /tmp reached the host's /root")
	}
}

// TestImageRootSize: what a sandbox writes over its image is bounded by
// Options.RootSize.
func TestImageRootSize(t *testing.T) {
	rt := imageRuntime(t, sandbox.Options{RootSize: 8 << 20})
	ref := layoutOf(t, "tools", toolImage)
	sb, err := rt.Create(t.Context(), execbox.Spec{Image: ref})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: `dd if=/dev/zero of=/usr/big bs=1048576 count=16`})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Stderr.String(), "No space left") {
		t.Errorf("16 MiB over an 8 MiB root: stdout %q stderr %q", res.Stdout.String(), res.Stderr.String())
	}
}

// TestImageNotFound: a missing image fails Create with ErrNotFound naming
// the reference, and leaves nothing.
func TestImageNotFound(t *testing.T) {
	rt := imageRuntime(t, sandbox.Options{})
	missing := filepath.Join(t.TempDir(), "no-such-layout")
	_, err := rt.Create(t.Context(), execbox.Spec{Image: missing})
	if !errors.Is(err, execbox.ErrNotFound) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Create with a missing image: %v, want ErrNotFound naming %s", err, missing)
	}
}

// TestImageFromRegistry is the example: python3 from an image
// pulled from a real registry on loopback.
func TestImageFromRegistry(t *testing.T) {
	testutil.Require(t, testutil.Registry)
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	st, err := image.Open(image.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rt := imageRuntime(t, sandbox.Options{Images: sandboximage.New(st)})
	img, err := toolImage()
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Host + "/py:3.11"
	imagetest.PushImage(t, img, ref)
	sb, err := rt.Create(t.Context(), execbox.Spec{Image: ref})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"python3", "-c", "import sys; print(sys.version)"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Stdout.String(), "3.11") {
		t.Errorf("python3 -c 'print(sys.version)': %q %q", res.Stdout.String(), res.Stderr.String())
	}
	_, err = rt.Create(t.Context(), execbox.Spec{Image: reg.Host + "/py:nope"})
	if !errors.Is(err, execbox.ErrNotFound) || !strings.Contains(err.Error(), "py:nope") {
		t.Errorf("a missing tag: %v, want ErrNotFound naming it", err)
	}
}

// TestImageRootless: a runtime without images (rootless) refuses an image with
// ErrUnsupported naming the field, before making anything.
func TestImageRootless(t *testing.T) {
	rt := requireSandbox(t, sandbox.Options{})
	if rt.Capabilities().Images {
		return // root: TestImageRoot and the rest
	}
	_, err := rt.Create(t.Context(), execbox.Spec{Image: "busybox:1"})
	var fe *execbox.FieldError
	if !errors.As(err, &fe) || fe.Field != "image" || !errors.Is(err, execbox.ErrUnsupported) {
		t.Fatalf("rootless Create with an image: %v, want ErrUnsupported naming image", err)
	}
}

// TestImageCommit: what a sandbox changed in its image's root (new
// files, removals, a directory replaced, hard links, owners) becomes a new
// image that other sandboxes start from; the workspace is not part of it.
func TestImageCommit(t *testing.T) {
	rt := imageRuntime(t, sandbox.Options{})
	ref := layoutOf(t, "tools", toolImage)
	ctx := t.Context()
	sb, err := rt.Create(ctx, execbox.Spec{Image: ref})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	prep := `set -e
mkdir -p /opt/env && echo prepared > /opt/env/marker && ln /opt/env/marker /opt/env/hard
rm /bin/ls
rm -rf /usr/lib/python3.11/email && mkdir /usr/lib/python3.11/email && echo new > /usr/lib/python3.11/email/only
echo ws > /workspace/not-in-image`
	for _, req := range []execbox.ExecRequest{{Shell: prep}, {Shell: "mkdir /home/user/own", User: &execbox.User{UID: 1000, GID: 1000}}} {
		if res, err := sb.Exec(ctx, req); err != nil || res.ExitCode != 0 {
			t.Fatalf("prepare: %v %q %q", err, res.Stdout.String(), res.Stderr.String())
		}
	}
	dest := filepath.Join(t.TempDir(), "out") + ":prepared"
	c, err := sb.(execbox.ImageCommitter).CommitImage(ctx, dest)
	if err != nil {
		t.Fatal(err)
	}
	if c.Ref != dest || !strings.HasPrefix(c.ID, "sha256:") || !strings.HasPrefix(c.Digest, "sha256:") {
		t.Errorf("committed %+v", c)
	}
	next, err := rt.Create(ctx, execbox.Spec{Image: dest})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	check := `cat /opt/env/marker; stat -c %h /opt/env/hard; test -e /bin/ls || echo no-ls; (cd /usr/lib/python3.11/email && echo *); ` +
		`stat -c %u:%g /home/user/own /opt/env; test -e /workspace/not-in-image || echo no-ws; python3 -c 'import os; print("py")'`
	res, err := next.Exec(ctx, execbox.ExecRequest{Shell: check})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Stdout.String(), "prepared\n2\nno-ls\nonly\n1000:1000\n0:0\nno-ws\npy\n"; got != want {
		t.Errorf("sandbox of the committed image: %q, want %q (stderr %q)", got, want, res.Stderr.String())
	}
	plain, err := rt.Create(ctx, execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.(execbox.ImageCommitter).CommitImage(ctx, dest); !errors.Is(err, execbox.ErrUnsupported) {
		t.Errorf("CommitImage of a sandbox without an image: %v, want ErrUnsupported", err)
	}
}

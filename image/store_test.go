//go:build linux

package image

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/image/imagetest"
	"github.com/execbox/execbox/internal/testutil"
)

func openStore(t testing.TB, opts Options) *Store {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "images")
	}
	opts.Logger = testutil.Logger(t)
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testImage is a small image of its own content.
func testImage(t testing.TB, content string) v1.Image {
	t.Helper()
	img, err := imagetest.Image(v1.Config{WorkingDir: "/w", Cmd: []string{"cat", "/id"}},
		imagetest.Tar(dir("etc", 0o755), file("etc/base", "base")),
		imagetest.Tar(file("id", content)))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// writeLayout writes imgs into an OCI layout in a new directory, each
// annotated with its ref name, and returns the layout's path.
func writeLayout(t testing.TB, imgs map[string]v1.Image) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for tag, img := range imgs {
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: tag})); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantClean fails t if the store has anything in tmp/ or a root other
// than want.
func wantClean(t testing.TB, s *Store, roots int) {
	t.Helper()
	if ents, _ := os.ReadDir(s.path(tmpDir)); len(ents) != 0 {
		t.Errorf("tmp/ holds %d entries, want none", len(ents))
	}
	if ents, _ := os.ReadDir(s.path(rootsDir)); len(ents) != roots {
		t.Errorf("roots/ holds %d roots, want %d", len(ents), roots)
	}
}

func TestPullLayout(t *testing.T) {
	s := openStore(t, Options{})
	dir := writeLayout(t, map[string]v1.Image{"v1": testImage(t, "one")})
	img, err := s.Pull(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(img.RootFS, "id")); got != "one" {
		t.Errorf("id: %q", got)
	}
	if img.Ref != dir || !strings.HasPrefix(img.ID, "sha256:") || !strings.HasPrefix(img.Digest, "sha256:") ||
		img.Config.WorkingDir != "/w" || img.Size < int64(len("one")+len("base")) {
		t.Errorf("image %+v", img)
	}
	if want := filepath.Join(s.Dir(), "roots", strings.TrimPrefix(img.ChainID, "sha256:"), "rootfs"); img.RootFS != want {
		t.Errorf("RootFS %s, want %s", img.RootFS, want)
	}
	tagged, err := s.Pull(t.Context(), dir+":v1")
	if err != nil {
		t.Fatal(err)
	}
	if tagged.RootFS != img.RootFS || s.unpacked.Load() != 1 {
		t.Errorf("the same layers unpacked %d times, roots %s and %s", s.unpacked.Load(), img.RootFS, tagged.RootFS)
	}
	if _, err := s.Pull(t.Context(), dir+":v2"); !errors.Is(err, execbox.ErrNotFound) || !strings.Contains(err.Error(), dir+":v2") {
		t.Errorf("missing tag: %v, want ErrNotFound naming it", err)
	}
	got, err := s.Get(dir)
	if err != nil || !reflect.DeepEqual(got, img) {
		t.Errorf("Get: %+v, %v; want %+v", got, err, img)
	}
	wantClean(t, s, 1)
}

func TestPullLayoutPlatform(t *testing.T) {
	amd, arm := testImage(t, "amd64"), testImage(t, "arm64")
	cf, _ := arm.ConfigFile()
	cf = cf.DeepCopy()
	cf.Architecture = "arm64"
	arm, _ = mutate.ConfigFile(arm, cf)
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
	)
	dir := filepath.Join(t.TempDir(), "layout")
	if _, err := layout.Write(dir, idx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		s := openStore(t, Options{Platform: p})
		img, err := s.Pull(t.Context(), dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, filepath.Join(img.RootFS, "id")); "linux/"+got != p {
			t.Errorf("platform %s: got the %s image", p, got)
		}
	}
	s := openStore(t, Options{Platform: "linux/riscv64"})
	if _, err := s.Pull(t.Context(), dir); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("no such platform: %v, want ErrNotFound", err)
	}
}

func TestPullTarball(t *testing.T) {
	s := openStore(t, Options{})
	file := filepath.Join(t.TempDir(), "img.tar")
	tag, _ := name.NewTag("example/img:1")
	if err := tarball.WriteToFile(file, tag, testImage(t, "tarball")); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{file, file + ":example/img:1"} {
		img, err := s.Pull(t.Context(), ref)
		if err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, filepath.Join(img.RootFS, "id")); got != "tarball" {
			t.Errorf("%s: id %q", ref, got)
		}
	}
	if _, err := s.Pull(t.Context(), filepath.Join(t.TempDir(), "missing.tar")); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("missing file: %v, want ErrNotFound", err)
	}
}

// TestPullCorruptLayer corrupts, then truncates, a layer blob of a layout:
// the pull fails and leaves nothing behind.
func TestPullCorruptLayer(t *testing.T) {
	other, _ := imagetest.Layer(imagetest.Tar(file("id", "another layer"))).Compressed()
	otherBlob, _ := io.ReadAll(other)
	for name, damage := range map[string]func(b []byte) []byte{
		"flipped byte": func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b },
		"truncated":    func(b []byte) []byte { return b[:len(b)/2] },
		"other layer":  func([]byte) []byte { return otherBlob }, // valid, but not its diff ID
	} {
		t.Run(name, func(t *testing.T) {
			img := testImage(t, "corrupt me")
			dir := writeLayout(t, map[string]v1.Image{"v1": img})
			layers, _ := img.Layers()
			d, _ := layers[1].Digest()
			blob := filepath.Join(dir, "blobs", "sha256", d.Hex)
			if err := os.WriteFile(blob, damage([]byte(readFile(t, blob))), 0o644); err != nil {
				t.Fatal(err)
			}
			s := openStore(t, Options{})
			_, err := s.Pull(t.Context(), dir)
			if err == nil {
				t.Fatal("pulled a corrupt layer")
			}
			t.Logf("pull: %v", err)
			if _, err := s.Get(dir); !errors.Is(err, execbox.ErrNotFound) {
				t.Errorf("Get after a failed pull: %v, want ErrNotFound", err)
			}
			wantClean(t, s, 0)
		})
	}
}

func TestPullCancelled(t *testing.T) {
	s := openStore(t, Options{})
	dir := writeLayout(t, map[string]v1.Image{"v1": testImage(t, "x")})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Pull(ctx, dir); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled pull: %v", err)
	}
	wantClean(t, s, 0)
}

func TestEnsureConcurrentUnpacksOnce(t *testing.T) {
	s := openStore(t, Options{})
	dir := writeLayout(t, map[string]v1.Image{"v1": testImage(t, "once")})
	var wg sync.WaitGroup
	roots := make([]string, 8)
	for i := range roots {
		wg.Go(func() {
			img, err := s.Ensure(t.Context(), dir)
			if err != nil {
				t.Error(err)
				return
			}
			roots[i] = img.RootFS
		})
	}
	wg.Wait()
	if n := s.unpacked.Load(); n != 1 {
		t.Errorf("unpacked %d times, want 1", n)
	}
	// A second store on the same directory (another process) finds it.
	s2 := openStore(t, Options{Dir: s.Dir()})
	if img, err := s2.Ensure(t.Context(), dir); err != nil || img.RootFS != roots[0] || s2.unpacked.Load() != 0 {
		t.Errorf("second store: %+v, %v, unpacked %d", img, err, s2.unpacked.Load())
	}
}

func TestEnsureCachedIsFast(t *testing.T) {
	s := openStore(t, Options{})
	dir := writeLayout(t, map[string]v1.Image{"v1": testImage(t, "fast")})
	if _, err := s.Ensure(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	start := time.Now()
	for range n {
		if _, err := s.Ensure(t.Context(), dir); err != nil {
			t.Fatal(err)
		}
	}
	per := time.Since(start) / n
	t.Logf("Ensure, cached: %v per call", per)
	if per > testutil.Scale(time.Millisecond) {
		t.Errorf("Ensure of a cached image takes %v, want well under 1ms", per)
	}
}

func TestRemoveInUse(t *testing.T) {
	s := openStore(t, Options{})
	dir := writeLayout(t, map[string]v1.Image{"v1": testImage(t, "busy")})
	img, err := s.Pull(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	release, err := s.Use(img)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Remove(dir)
	if !errors.Is(err, ErrInUse) || !errors.Is(err, execbox.ErrUnavailable) {
		t.Errorf("Remove in use: %v, want ErrInUse", err)
	}
	if infos, _ := s.List(); len(infos) != 1 || !infos[0].InUse {
		t.Errorf("List: %+v, want one image in use", infos)
	}
	release()
	release()
	if err := s.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(dir); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("Get after Remove: %v", err)
	}
	if _, err := s.Use(img); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("Use after Remove: %v", err)
	}
	if err := s.Remove(dir); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("second Remove: %v", err)
	}
	wantClean(t, s, 0)
}

func TestPruneLRUSkipsInUse(t *testing.T) {
	s := openStore(t, Options{})
	base := time.Now().Add(-time.Hour)
	var imgs []*Image
	for i, c := range []string{"oldest", "middle", "newest"} {
		now = func() time.Time { return base.Add(time.Duration(i) * time.Minute) }
		img, err := s.Pull(t.Context(), writeLayout(t, map[string]v1.Image{"v1": testImage(t, c)}))
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
	}
	now = time.Now
	t.Cleanup(func() { now = time.Now })
	release, err := s.Use(imgs[0]) // the oldest, used now: newest of all
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	// Room for one image: the oldest is in use, so middle then newest go.
	removed, err := s.Prune(t.Context(), imgs[0].Size)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 || removed[0].ID != imgs[1].ID || removed[1].ID != imgs[2].ID {
		t.Errorf("pruned %+v, want middle then newest", removed)
	}
	if _, err := s.Get(imgs[0].Ref); err != nil {
		t.Errorf("the image in use was pruned: %v", err)
	}
	wantClean(t, s, 1)
	release()
	if removed, _ := s.Prune(t.Context(), 0); len(removed) != 1 {
		t.Errorf("prune to 0: removed %d", len(removed))
	}
	wantClean(t, s, 0)
}

func TestMaxSizePrunesAfterPull(t *testing.T) {
	// Room for one image (as unpacking charges it: see entryCost), not two.
	s := openStore(t, Options{MaxSize: 6 * entryCost})
	a, err := s.Pull(t.Context(), writeLayout(t, map[string]v1.Image{"v1": testImage(t, "a")}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Pull(t.Context(), writeLayout(t, map[string]v1.Image{"v1": testImage(t, "b")}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(a.Ref); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("a after pulling b past MaxSize: %v, want pruned", err)
	}
	if _, err := s.Get(b.Ref); err != nil {
		t.Errorf("the image just pulled was pruned: %v", err)
	}
}

func TestOpenRemovesStaleUnpack(t *testing.T) {
	s := openStore(t, Options{})
	stale := s.path(tmpDir, strings.Repeat("a", 64)+"-123")
	if err := os.MkdirAll(filepath.Join(stale, "rootfs", "ro"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(stale, "rootfs", "ro"), 0o555)
	trash := s.path(tmpDir, "trash-1")
	os.Mkdir(trash, 0o755)
	openStore(t, Options{Dir: s.Dir()})
	wantClean(t, s, 0)
}

func TestBadReferences(t *testing.T) {
	s := openStore(t, Options{})
	for _, ref := range []string{"", " python", "UPPER/case", "a:b:c"} {
		if _, err := s.Ensure(t.Context(), ref); !errors.Is(err, execbox.ErrInvalidArgument) {
			t.Errorf("Ensure(%q): %v, want ErrInvalidArgument", ref, err)
		}
	}
	if _, err := s.Get("python:3.12"); !errors.Is(err, execbox.ErrNotFound) || !strings.Contains(err.Error(), "index.docker.io/library/python:3.12") {
		t.Errorf("Get of an uncached ref: %v", err)
	}
	if _, err := Open(Options{Dir: t.TempDir(), Platform: "amd64"}); !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Errorf("Open with platform amd64: %v", err)
	}
}

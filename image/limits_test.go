//go:build linux

package image

import (
	"archive/tar"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/image/imagetest"
)

// wantTooLarge checks that err refuses the pull as too large, naming what.
func wantTooLarge(t testing.TB, err error, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("pulled, want an error naming %s as too large", what)
	}
	t.Logf("pull: %v", err)
	if !errors.Is(err, execbox.ErrResourceExhausted) || !strings.Contains(err.Error(), what) {
		t.Errorf("pull: %v, want ErrResourceExhausted naming %q", err, what)
	}
}

// TestPullHugeConfigIsNotRead: a manifest declaring its configuration at
// 1.5 GiB is refused before the configuration is asked for (a server
// read it whole into memory: red team, issue 22). The registry would
// send 32 MiB of it, without a Content-Length, if asked.
func TestPullHugeConfigIsNotRead(t *testing.T) {
	reg := startFakeRegistry(t)
	img := testImage(t, "huge config")
	var config string
	reg.image(t, img, "repo/img", "1", func(m *v1.Manifest) {
		m.Config.Size = 1536 << 20
		config = blobPath("repo/img", m.Config.Digest)
	})
	reg.handle(config, func(w http.ResponseWriter, r *http.Request) { zeros(w, 32<<20) })
	s := openStore(t, Options{})
	_, err := s.Pull(t.Context(), reg.Host+"/repo/img:1")
	wantTooLarge(t, err, "configuration")
	if n := reg.hit(config); n != 0 {
		t.Errorf("the configuration was asked for %d times", n)
	}
	wantClean(t, s, 0)
}

// TestPullMetadataTooLarge: manifests and indexes over MaxMetadataSize
// are refused, whether they say their size (Content-Length) or not.
// Each is otherwise a valid image: without the limit, the pull succeeds.
func TestPullMetadataTooLarge(t *testing.T) {
	pad := strings.Repeat("x", MaxMetadataSize+1)
	for name, chunked := range map[string]bool{"with length": false, "chunked": true} {
		t.Run("manifest "+name, func(t *testing.T) {
			reg := startFakeRegistry(t)
			reg.image(t, testImage(t, "big manifest"), "repo/img", "1", func(m *v1.Manifest) {
				m.Annotations = map[string]string{"pad": pad}
			})
			if chunked {
				unlength(reg, "/v2/repo/img/manifests/1")
			}
			_, err := openStore(t, Options{}).Pull(t.Context(), reg.Host+"/repo/img:1")
			wantTooLarge(t, err, "manifest")
		})
	}
	t.Run("index", func(t *testing.T) {
		reg := startFakeRegistry(t)
		img := testImage(t, "big index")
		d := reg.image(t, img, "repo/img", "one", nil)
		m, _ := img.Manifest()
		idx := v1.IndexManifest{
			SchemaVersion: 2, MediaType: types.OCIImageIndex,
			Manifests: []v1.Descriptor{{
				MediaType: m.MediaType, Digest: d, Size: int64(len(mustJSON(t, m))),
				Platform: &v1.Platform{OS: "linux", Architecture: "amd64"},
			}},
			Annotations: map[string]string{"pad": pad},
		}
		reg.manifest("repo/img", "1", types.OCIImageIndex, mustJSON(t, idx))
		unlength(reg, "/v2/repo/img/manifests/1")
		_, err := openStore(t, Options{Platform: "linux/amd64"}).Pull(t.Context(), reg.Host+"/repo/img:1")
		wantTooLarge(t, err, "manifest")
	})
}

// unlength makes the route path of reg answer without a Content-Length.
func unlength(reg *fakeRegistry, path string) {
	reg.mu.Lock()
	h := reg.routes[path]
	reg.mu.Unlock()
	reg.handle(path, func(w http.ResponseWriter, r *http.Request) {
		h(noLength{w}, r)
	})
}

// noLength is a ResponseWriter that drops the Content-Length header.
type noLength struct{ http.ResponseWriter }

func (w noLength) WriteHeader(code int) {
	w.Header().Del("Content-Length")
	w.ResponseWriter.WriteHeader(code)
}

func (w noLength) Write(b []byte) (int, error) {
	w.Header().Del("Content-Length")
	return w.ResponseWriter.Write(b)
}

// TestPullTooManyLayers: an image of MaxLayers+1 layers is refused
// before any is fetched.
func TestPullTooManyLayers(t *testing.T) {
	l := imagetest.Layer(imagetest.Tar(file("f", "x")))
	img := empty.Image
	for range MaxLayers + 1 {
		var err error
		if img, err = mutate.AppendLayers(img, l); err != nil {
			t.Fatal(err)
		}
	}
	reg := startFakeRegistry(t)
	reg.image(t, img, "repo/img", "1", nil)
	s := openStore(t, Options{})
	_, err := s.Pull(t.Context(), reg.Host+"/repo/img:1")
	wantTooLarge(t, err, "129 layers")
	d, _ := l.Digest()
	if n := reg.hit(blobPath("repo/img", d)); n != 0 {
		t.Errorf("a layer was fetched %d times", n)
	}
	wantClean(t, s, 0)
}

// TestPullLayoutConfigTooLarge: an OCI layout's configuration is checked
// on disk before it is read, whatever its manifest declares.
func TestPullLayoutConfigTooLarge(t *testing.T) {
	img := testImage(t, "layout")
	dir := writeLayout(t, map[string]v1.Image{"1": img})
	m, _ := img.Manifest()
	blob := filepath.Join(dir, "blobs", "sha256", m.Config.Digest.Hex)
	if err := os.WriteFile(blob, make([]byte, MaxMetadataSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := openStore(t, Options{}).Pull(t.Context(), dir+":1")
	wantTooLarge(t, err, "configuration")
}

// TestPullTarballMetadataTooLarge: a `docker save` tarball's
// manifest.json and configurations are checked by their tar headers
// before ggcr reads them whole.
func TestPullTarballMetadataTooLarge(t *testing.T) {
	big := make([]byte, MaxMetadataSize+1)
	for name, entries := range map[string][]imagetest.Entry{
		"manifest.json": {{Header: tar.Header{Name: "manifest.json", Typeflag: tar.TypeReg},
			Body: `[{"Config":"c.json","RepoTags":["x:1"],"Layers":[]}]` + strings.Repeat(" ", MaxMetadataSize)}},
		"configuration c.json": {
			{Header: tar.Header{Name: "manifest.json", Typeflag: tar.TypeReg}, Body: `[{"Config":"c.json","RepoTags":["x:1"],"Layers":[]}]`},
			{Header: tar.Header{Name: "c.json", Typeflag: tar.TypeReg}, Body: string(big)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "img.tar")
			if err := os.WriteFile(file, imagetest.Tar(entries...), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := openStore(t, Options{}).Pull(t.Context(), file)
			wantTooLarge(t, err, name)
		})
	}
}

// FuzzCheckTarball: checkTarball reads any file without panicking, and
// refuses only with ErrResourceExhausted.
func FuzzCheckTarball(f *testing.F) {
	f.Add(imagetest.Tar(imagetest.Entry{Header: tar.Header{Name: "manifest.json", Typeflag: tar.TypeReg}, Body: `[{"Config":"c.json"}]`},
		imagetest.Entry{Header: tar.Header{Name: "c.json", Typeflag: tar.TypeReg}, Body: "{}"}))
	f.Add([]byte("not a tar"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		file := filepath.Join(dir, "img.tar")
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := checkTarball(file); err != nil && !errors.Is(err, execbox.ErrResourceExhausted) {
			t.Errorf("checkTarball: %v", err)
		}
	})
}

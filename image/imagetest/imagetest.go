// Package imagetest builds OCI images for tests, from host files and from
// hand-written tar entries, and pushes them to a registry (see
// internal/testutil.StartRegistry). It lives beside package image, not in
// internal/testutil, so that only tests of images link
// go-containerregistry.
package imagetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Entry is one entry of a tar layer: its header (Size is set from Body
// for regular files when zero) and, for a regular file, its content.
type Entry struct {
	tar.Header
	Body string
}

// Tar returns the tar stream of entries, in order.
func Tar(entries ...Entry) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := e.Header
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.Body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if err := tw.WriteHeader(&h); err != nil {
			panic(err) // a test's own entries
		}
		io.WriteString(tw, e.Body)
	}
	tw.Close()
	return b.Bytes()
}

// Layer returns a gzip-compressed layer of the tar stream b.
func Layer(b []byte) v1.Layer {
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestSpeed)
	zw.Write(b)
	zw.Close()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(z.Bytes())), nil
	})
	if err != nil {
		panic(err) // only for a malformed gzip stream, which this is not
	}
	return l
}

// Image returns an image of the tar streams layers, in order, with
// config (a zero value gets Env PATH=/bin:/usr/bin), for linux/amd64.
func Image(config v1.Config, layers ...[]byte) (v1.Image, error) {
	img := empty.Image
	for _, b := range layers {
		var err error
		if img, err = mutate.AppendLayers(img, Layer(b)); err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	if config.Env == nil {
		config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	}
	cf.Config = config
	cf.OS, cf.Architecture = "linux", "amd64"
	return mutate.ConfigFile(img, cf)
}

// PushImage writes img to the registry as ref ("127.0.0.1:PORT/repo:tag"),
// failing t on error.
func PushImage(t testing.TB, img v1.Image, ref string, opts ...remote.Option) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, append([]remote.Option{remote.WithContext(t.Context())}, opts...)...); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

// PushIndex writes the index idx to the registry as ref.
func PushIndex(t testing.TB, idx v1.ImageIndex, ref string, opts ...remote.Option) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(r, idx, append([]remote.Option{remote.WithContext(t.Context())}, opts...)...); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

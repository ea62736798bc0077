//go:build linux

package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/image/imagetest"
	"github.com/execbox/execbox/internal/testutil"
)

// TestPullBoundedByMaxSize: a pull stops at the store's bound as it
// unpacks, whether the layer's bytes are in a few large files or in
// many empty ones (inodes), and leaves nothing behind. A red team
// unpacked 234 MiB from a 230 KiB layer into a store bounded to 16 MiB
// (issue 22).
func TestPullBoundedByMaxSize(t *testing.T) {
	const bound = 1 << 20
	big := bytes.Repeat([]byte("not zeros, not sparse. "), (8<<20)/23)
	var empties []imagetest.Entry
	for i := range 2000 {
		empties = append(empties, file(fmt.Sprintf("d/%d", i), ""))
	}
	for name, layer := range map[string][]byte{
		"bytes":  imagetest.Tar(imagetest.Entry{Header: tar.Header{Name: "big", Typeflag: tar.TypeReg}, Body: string(big)}),
		"inodes": imagetest.Tar(empties...),
	} {
		t.Run(name, func(t *testing.T) {
			img, err := imagetest.Image(v1.Config{}, layer)
			if err != nil {
				t.Fatal(err)
			}
			reg := startFakeRegistry(t)
			reg.image(t, img, "repo/img", "1", nil)
			s := openStore(t, Options{MaxSize: bound})
			_, err = s.Pull(t.Context(), reg.Host+"/repo/img:1")
			if !errors.Is(err, execbox.ErrResourceExhausted) || !strings.Contains(err.Error(), "max_size") {
				t.Fatalf("pull: %v, want ErrResourceExhausted naming max_size", err)
			}
			t.Logf("pull: %v", err)
			wantClean(t, s, 0)
			if ents, _ := os.ReadDir(s.path(tmpDir)); len(ents) != 0 {
				t.Errorf("tmp/ holds %d entries after the pull", len(ents))
			}
		})
	}
}

// TestPullBoundCountsRootsInUse: the roots sandboxes use, which no prune
// can remove, take their part of the bound: an image that fits alone
// does not fit beside one in use, and does once it is released.
func TestPullBoundCountsRootsInUse(t *testing.T) {
	s := openStore(t, Options{MaxSize: 6 * entryCost}) // one test image fits, two do not
	a, err := s.Pull(t.Context(), writeLayout(t, map[string]v1.Image{"v1": testImage(t, "a")}))
	if err != nil {
		t.Fatal(err)
	}
	release, err := s.Use(a)
	if err != nil {
		t.Fatal(err)
	}
	b := writeLayout(t, map[string]v1.Image{"v1": testImage(t, "b")})
	if _, err := s.Pull(t.Context(), b); !errors.Is(err, execbox.ErrResourceExhausted) {
		t.Fatalf("pull beside an image in use: %v, want ErrResourceExhausted", err)
	}
	release()
	if _, err := s.Pull(t.Context(), b); err != nil {
		t.Fatalf("pull once released: %v", err)
	}
}

// TestPullPrunesAsItUnpacks: a pull that needs the room of an image no
// sandbox uses removes that image while it unpacks, not after: the
// store holds no more than its bound at any time. The registry stops in
// the middle of the new image's layer until the old image is gone.
func TestPullPrunesAsItUnpacks(t *testing.T) {
	s := openStore(t, Options{MaxSize: 6 * entryCost}) // one test image fits, two do not
	old, err := s.Pull(t.Context(), writeLayout(t, map[string]v1.Image{"v1": testImage(t, "old")}))
	if err != nil {
		t.Fatal(err)
	}
	// A layer of a directory and three empty files (20 KiB charged with
	// the root), then, after a pause, the end of the tar.
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	tw := tar.NewWriter(zw)
	for _, e := range []imagetest.Entry{dir("x", 0o755), file("x/1", ""), file("x/2", ""), file("x/3", "")} {
		tw.WriteHeader(&e.Header)
	}
	tw.Flush()
	zw.Flush()
	half := z.Len()
	tw.Close()
	zw.Close()
	gz := z.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(gz)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	reg := startFakeRegistry(t)
	reg.image(t, img, "repo/new", "1", nil)
	d, _ := l.Digest()
	resume := make(chan struct{})
	reg.handle(blobPath("repo/new", d), func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(gz)))
		w.Write(gz[:half])
		w.(http.Flusher).Flush()
		select {
		case <-resume:
		case <-r.Context().Done():
			return
		}
		w.Write(gz[half:])
	})
	done := make(chan error, 1)
	go func() {
		_, err := s.Pull(t.Context(), reg.Host+"/repo/new:1")
		done <- err
	}()
	pruned := testutil.Poll(t.Context(), 5*time.Second, func() bool {
		_, err := s.Get(old.Ref)
		return errors.Is(err, execbox.ErrNotFound)
	})
	close(resume)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !pruned {
		t.Error("the old image was still in the store in the middle of the new one's layer")
	}
}

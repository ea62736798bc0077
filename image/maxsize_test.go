//go:build linux

package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/image/imagetest"
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

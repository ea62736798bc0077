//go:build linux

package image

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/image/imagetest"
)

// TestRedTeamDeepTreeLeavesGarbage: a layer can build a directory tree
// of any depth (one entry per 2000 levels, each reached through a
// symlink to the previous one's end: openDir follows symlinks in the
// root). Such a root fails its unpack (treeSize: ENAMETOOLONG), and
// removeAll/removeTree (and os.RemoveAll after it) hold one descriptor
// per level: past RLIMIT_NOFILE the temporary directory stays in tmp/,
// and Open's cleanTmp cannot remove it either. Every Create of the image
// unpacks it again and leaves another. On this machine (hard limit 20000)
// 11 hops (22000 levels) do it for real; the test lowers the soft limit
// to 1024 to need only one hop and stay fast.
func TestRedTeamDeepTreeLeavesGarbage(t *testing.T) {
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = min(old.Cur, 1024)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	defer unix.Setrlimit(unix.RLIMIT_NOFILE, &old)

	s := openStore(t, Options{})
	// Whatever the outcome, remove what is left with rm, which copes
	// with any depth, before t.TempDir's own cleanup.
	t.Cleanup(func() { rmDeep(t, s.Dir()) })
	seg := strings.TrimSuffix(strings.Repeat("a/", 2000), "/")
	img, err := imagetest.Image(v1.Config{}, imagetest.Tar(file("x/"+seg+"/f", "f")))
	if err != nil {
		t.Fatal(err)
	}
	ref := writeLayout(t, map[string]v1.Image{"deep": img})
	_, err = s.Pull(t.Context(), ref+":deep")
	t.Logf("pull: %.200v", err)
	openStore(t, Options{Dir: s.Dir()}) // cleanTmp
	if ents, _ := os.ReadDir(s.path(tmpDir)); len(ents) != 0 {
		t.Errorf("a 2000-level deep image (with 1024 descriptors) left %d entries in the store's tmp/ after its failed pull and a reopen: %s",
			len(ents), ents[0].Name())
	}
}

// rmDeep removes dir with rm -rf (fts: any depth).
func rmDeep(t *testing.T, dir string) {
	if err := runRm(dir); err != nil {
		t.Logf("rm -rf %s: %v", dir, err)
	}
}

// TestRedTeamSizeIgnoresMetadata: Image.Size (what MaxSize and Prune
// account) counts only the bytes of regular files, as does the bound of
// the applier (a.left). An image of empty files, long symlinks and user
// xattrs takes disk and inodes on the host without limit while its Size
// is 0: MaxSize never makes room for it, and it escapes the bound. The
// size of a root must account what it takes on disk.
func TestRedTeamSizeIgnoresMetadata(t *testing.T) {
	s := openStore(t, Options{})
	long := strings.Repeat("L", 4000)
	var es []entry
	for i := range 1500 {
		es = append(es, symlink(fmt.Sprintf("l/%d", i), long))
		e := file(fmt.Sprintf("e/%d", i), "")
		e.PAXRecords = map[string]string{"SCHILY.xattr.user.pad": strings.Repeat("x", 3000)}
		es = append(es, e)
	}
	img, err := imagetest.Image(v1.Config{}, imagetest.Tar(es...))
	if err != nil {
		t.Fatal(err)
	}
	ref := writeLayout(t, map[string]v1.Image{"meta": img})
	got, err := s.Pull(t.Context(), ref+":meta")
	if err != nil {
		t.Fatal(err)
	}
	var blocks int64
	filepath.WalkDir(got.RootFS, func(p string, d fs.DirEntry, err error) error {
		var st syscall.Stat_t
		if err == nil && syscall.Lstat(p, &st) == nil {
			blocks += st.Blocks * 512
		}
		return nil
	})
	if blocks > 4<<20 && got.Size < blocks/4 {
		t.Errorf("an image of 3000 empty files and symlinks takes %d bytes on disk, its Size is %d: MaxSize and Prune do not see it", blocks, got.Size)
	}
}

func runRm(dir string) error {
	return execCommand("rm", "-rf", dir)
}

func execCommand(name string, args ...string) error { return exec.Command(name, args...).Run() }

//go:build linux

package testutil

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// SmallTmpfs mounts a tmpfs of size bytes and inodes on a new directory
// of the system's temporary directory (not below t.TempDir, whose
// private directory a sandbox's root cannot traverse), which the test's
// cleanup unmounts and removes. It needs root. Tests put a runtime's
// state and temporary directories there to run it out of space.
func SmallTmpfs(t testing.TB, size, inodes int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "execbox-fulldisk-")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("execbox-fulldisk", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		fmt.Sprintf("size=%d,nr_inodes=%d,mode=0711", size, inodes)); err != nil {
		os.Remove(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Error(err)
		}
		os.Remove(dir)
	})
	return dir
}

// Filling is what of a file system FillTmpfs uses up.
type Filling string

const (
	Inodes Filling = "inodes"
	Blocks Filling = "blocks"
)

// FillTmpfs uses up the file system of mnt, with files in dir (an
// existing, empty directory there), until exactly free inodes or free
// blocks are left; it returns what empties dir again.
func FillTmpfs(t testing.TB, mnt, dir string, what Filling, free int) func() {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	empty := func() {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	switch what {
	case Inodes:
		for i := 0; st.Ffree > uint64(free); i++ {
			f, err := os.Create(filepath.Join(dir, fmt.Sprint(i)))
			if err == nil {
				f.Close()
				err = unix.Statfs(mnt, &st)
			}
			if err != nil {
				empty()
				t.Fatal(err)
			}
		}
	case Blocks:
		f, err := os.Create(filepath.Join(dir, "blocks"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if n := int64(st.Bavail) - int64(free); n > 0 {
			err = unix.Fallocate(int(f.Fd()), 0, 0, n*st.Bsize)
		}
		if err == nil {
			err = unix.Statfs(mnt, &st)
		}
		if err != nil || st.Bavail != uint64(free) {
			empty()
			t.Fatalf("fill %s: %d blocks free, want %d (%v)", mnt, st.Bavail, free, err)
		}
	default:
		t.Fatalf("FillTmpfs: unknown filling %q", what)
	}
	return empty
}

// Tree lists everything under dir, one line per entry, regular files
// with their contents (a uid slot file names its sandbox).
func Tree(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		line := strings.TrimPrefix(p, dir)
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += " = " + string(b)
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// SameTree fails t with the difference between two listings of Tree:
// what was left behind, and what is gone.
func SameTree(t testing.TB, when string, want, got []string) {
	t.Helper()
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("%s: left behind: %s", when, g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("%s: gone: %s", when, w)
		}
	}
}

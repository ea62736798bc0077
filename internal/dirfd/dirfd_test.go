//go:build linux

package dirfd

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
	"golang.org/x/sys/unix"
)

// hostile makes a Dir in a new directory and a target file outside it
// that a user with the directory would like the caller to touch.
func hostile(t *testing.T) (d *Dir, target string) {
	t.Helper()
	base := t.TempDir()
	d, err := MkdirTemp(base, "priv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	target = filepath.Join(base, "target")
	if err := os.WriteFile(target, []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return d, target
}

func wantUnchanged(t *testing.T, target string) {
	t.Helper()
	b, err := os.ReadFile(target)
	if err != nil || string(b) != "keep\n" {
		t.Errorf("target after the hostile step: %q, %v; want \"keep\\n\"", b, err)
	}
}

func TestWriteFileReplacesSymlink(t *testing.T) {
	d, target := hostile(t)
	if err := os.Symlink(target, filepath.Join(d.Path(), "c")); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile("c", []byte("new"), 0o640, -1, -1); err != nil {
		t.Fatal(err)
	}
	wantUnchanged(t, target)
	fi, err := os.Lstat(filepath.Join(d.Path(), "c"))
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o640 {
		t.Errorf("c: %v, %v; want a regular file with mode 0640", fi.Mode(), err)
	}
}

func TestMkfifoReplacesSymlink(t *testing.T) {
	d, target := hostile(t)
	if err := os.Symlink(target, filepath.Join(d.Path(), "o.1")); err != nil {
		t.Fatal(err)
	}
	if err := d.Mkfifo("o.1", os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	f, err := d.OpenFIFO("o.1", os.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		t.Fatalf("OpenFIFO of the new FIFO: %v", err)
	}
	f.Close()
	wantUnchanged(t, target)
}

func TestOpenFIFORefusesOthers(t *testing.T) {
	d, target := hostile(t)
	if err := unix.Mkfifo(target+".fifo", 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		plant func(p string) error
	}{
		{"symlink to a file", func(p string) error { return os.Symlink(target, p) }},
		{"symlink to a FIFO", func(p string) error { return os.Symlink(target+".fifo", p) }},
		{"regular file", func(p string) error { return os.WriteFile(p, nil, 0o600) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.plant(filepath.Join(d.Path(), "i.1")); err != nil {
				t.Fatal(err)
			}
			defer d.Remove("i.1")
			f, err := d.OpenFIFO("i.1", os.O_WRONLY|syscall.O_NONBLOCK)
			if err == nil {
				f.Close()
				t.Fatal("OpenFIFO opened it")
			}
			if !errors.Is(err, ErrNotFIFO) && !errors.Is(err, syscall.ELOOP) {
				t.Errorf("OpenFIFO: %v, want ErrNotFIFO or ELOOP", err)
			}
		})
	}
	wantUnchanged(t, target)
}

func TestChownFIFORefusesSymlink(t *testing.T) {
	testutil.Require(t, testutil.Root)
	d, target := hostile(t)
	if err := os.Symlink(target, filepath.Join(d.Path(), "status")); err != nil {
		t.Fatal(err)
	}
	if err := d.ChownFIFO("status", 65534, 65534); !errors.Is(err, ErrNotFIFO) {
		t.Errorf("ChownFIFO of a symlink: %v, want ErrNotFIFO", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(target, &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid == 65534 {
		t.Error("the symlink's target was chowned")
	}
}

// TestRenamedDir: the user renames the directory away and puts a symlink
// to another directory at its path; the Dir still acts on the directory
// it opened, and RemoveAll leaves the other one alone.
func TestRenamedDir(t *testing.T) {
	d, target := hostile(t)
	other := filepath.Dir(target)
	moved := d.Path() + ".moved"
	if err := os.Rename(d.Path(), moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, d.Path()); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile("target", []byte("new"), 0o600, -1, -1); err != nil {
		t.Fatal(err)
	}
	if err := d.Mkfifo("o.1", -1, -1); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove("target"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(moved, "o.1")); err != nil {
		t.Errorf("the FIFO is not in the directory opened: %v", err)
	}
	if err := d.RemoveAll(); err == nil {
		t.Error("RemoveAll: removed the directory at a path that is now a symlink")
	}
	wantUnchanged(t, target)
	names, err := os.ReadDir(moved)
	if err != nil || len(names) != 0 {
		t.Errorf("the opened directory after RemoveAll: %v, %v; want empty", names, err)
	}
	os.Remove(moved)
}

func TestClosed(t *testing.T) {
	d, _ := hostile(t)
	d.Close()
	if err := d.WriteFile("c", nil, 0o600, -1, -1); !errors.Is(err, os.ErrClosed) {
		t.Errorf("WriteFile after Close: %v, want ErrClosed", err)
	}
	for _, name := range []string{"", ".", "..", "a/b"} {
		if err := d.Remove(name); err == nil {
			t.Errorf("Remove(%q): no error", name)
		}
	}
}

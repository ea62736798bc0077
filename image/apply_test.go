//go:build linux

package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/image/imagetest"
	"github.com/execbox/execbox/internal/testutil"
)

type entry = imagetest.Entry

func dir(name string, mode int64) entry {
	return entry{Header: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode}}
}

func file(name, body string) entry {
	return entry{Header: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644}, Body: body}
}

func symlink(name, target string) entry {
	return entry{Header: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target}}
}

func hardlink(name, target string) entry {
	return entry{Header: tar.Header{Typeflag: tar.TypeLink, Name: name, Linkname: target}}
}

// sandbox is a directory holding the root being filled and, beside it,
// "outside" with one file: what no layer may reach.
func sandbox(t testing.TB) (top, root string) {
	top = t.TempDir()
	root = filepath.Join(top, "root")
	for _, d := range []string{root, filepath.Join(top, "outside")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(top, "outside", "target"), []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	return top, root
}

// applyAll applies the layers in order into root, as a pull does.
func applyAll(root string, layers ...[]entry) error {
	a, err := newApplier(root)
	if err != nil {
		return err
	}
	defer a.Close()
	for _, l := range layers {
		if err := a.applyLayer(context.Background(), bytes.NewReader(imagetest.Tar(l...))); err != nil {
			return err
		}
	}
	return a.finish()
}

// wantOutsideUntouched fails t if anything beside root and outside/target
// exists in top, or if outside/target changed.
func wantOutsideUntouched(t testing.TB, top string) {
	t.Helper()
	ents, _ := os.ReadDir(top)
	if len(ents) != 2 {
		t.Errorf("top holds %d entries, want root and outside", len(ents))
	}
	ents, _ = os.ReadDir(filepath.Join(top, "outside"))
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("outside holds %v, want only target", names)
	}
	b, err := os.ReadFile(filepath.Join(top, "outside", "target"))
	if err != nil || string(b) != "original" {
		t.Errorf("outside/target: %q, %v; want it untouched", b, err)
	}
}

func exists(t testing.TB, p string) bool {
	t.Helper()
	_, err := os.Lstat(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func TestApplyWhiteout(t *testing.T) {
	_, root := sandbox(t)
	err := applyAll(root,
		[]entry{dir("a", 0o755), file("a/f1", "1"), file("a/f2", "2"), dir("b", 0o755), file("b/x", "x")},
		[]entry{file("a/.wh.f1", ""), file(".wh.b", ""), file("c", "c"), file(".wh.c", "")},
	)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{"a/f1": false, "a/f2": true, "b": false, "a/.wh.f1": false, ".wh.b": false, "c": true} {
		if got := exists(t, filepath.Join(root, p)); got != want {
			t.Errorf("%s exists: %v, want %v", p, got, want)
		}
	}
}

func TestApplyOpaqueKeepsSameLayer(t *testing.T) {
	_, root := sandbox(t)
	err := applyAll(root,
		[]entry{dir("d", 0o755), file("d/old", "o"), dir("d/sub", 0o755), file("d/sub/old2", "o"), file("keep", "k")},
		[]entry{file("d/new1", "n"), file("d/.wh..wh..opq", ""), file("d/sub/new2", "n"), dir("e", 0o755), file("e/.wh..wh..opq", "")},
	)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{
		"d/old": false, "d/sub/old2": false, "d/new1": true, "d/sub/new2": true,
		"d/.wh..wh..opq": false, "keep": true, "e": true,
	} {
		if got := exists(t, filepath.Join(root, p)); got != want {
			t.Errorf("%s exists: %v, want %v", p, got, want)
		}
	}
}

func TestApplyHardLinks(t *testing.T) {
	top, root := sandbox(t)
	if err := applyAll(root, []entry{file("f", "data"), dir("d", 0o755), hardlink("d/l", "f"), hardlink("/abs", "/f")}); err != nil {
		t.Fatal(err)
	}
	a, _ := os.Stat(filepath.Join(root, "f"))
	for _, l := range []string{"d/l", "abs"} {
		b, err := os.Stat(filepath.Join(root, l))
		if err != nil || !os.SameFile(a, b) {
			t.Errorf("%s is not a hard link to f: %v", l, err)
		}
	}
	for name, layer := range map[string][]entry{
		"dot-dot":         {hardlink("l", "../outside/target")},
		"through symlink": {symlink("s", "../outside"), hardlink("l", "s/target")},
		"abs symlink":     {symlink("s", filepath.Join(top, "outside")), hardlink("l", "s/target")},
		"missing":         {hardlink("l", "nothing")},
	} {
		t.Run(name, func(t *testing.T) {
			top, root := sandbox(t)
			if err := applyAll(root, layer); err == nil {
				t.Error("applied, want an error")
			}
			wantOutsideUntouched(t, top)
		})
	}
}

func TestApplySymlinkEscapes(t *testing.T) {
	for name, layers := range map[string][][]entry{
		"relative parent":     {{symlink("evil", "../outside"), file("evil/pwned", "x"), file("evil/target", "x")}},
		"absolute parent":     {{symlink("evil", "/"), dir("evil/..", 0o755), file("evil/../outside/pwned", "x")}},
		"later layer":         {{symlink("evil", "../../outside")}, {file("evil/target", "x"), dir("evil/sub", 0o755)}},
		"final symlink":       {{symlink("link", "../outside/target")}, {file("link", "replaced")}},
		"hardlink then write": {{symlink("s", "../outside/target"), hardlink("h", "s")}, {file("h", "x")}},
		"whiteout through":    {{symlink("evil", "../outside")}, {file("evil/.wh.target", "")}},
		"opaque through":      {{symlink("evil", "../outside")}, {file("evil/.wh..wh..opq", "")}},
		"dir through":         {{symlink("evil", "../outside")}, {dir("evil/target", 0o755), dir("evil", 0o755)}},
		"dot-dot name":        {{file("../outside/pwned", "x")}},
		"deep dot-dot":        {{file("a/../../outside/pwned", "x")}},
	} {
		t.Run(name, func(t *testing.T) {
			top, root := sandbox(t)
			err := applyAll(root, layers...)
			t.Logf("apply: %v", err)
			wantOutsideUntouched(t, top)
		})
	}
}

func TestApplyAbsoluteSymlinkStaysInRoot(t *testing.T) {
	// Debian's var/run -> /run: a later entry under var/run lands in the
	// image's /run, as a chroot would resolve it.
	_, root := sandbox(t)
	err := applyAll(root,
		[]entry{dir("run", 0o755), dir("var", 0o755), symlink("var/run", "/run")},
		[]entry{file("var/run/pid", "1")},
	)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "run", "pid")); err != nil || string(b) != "1" {
		t.Errorf("run/pid: %q, %v", b, err)
	}
}

func TestApplyNames(t *testing.T) {
	_, root := sandbox(t)
	if err := applyAll(root, []entry{file("/etc/abs", "a"), file("./rel", "r"), file("a/./b/../c", "c")}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"etc/abs", "rel", "a/c"} {
		if !exists(t, filepath.Join(root, p)) {
			t.Errorf("%s missing", p)
		}
	}
	for _, n := range []string{"../x", "a/../../x", "/../../x/.."} {
		_, root := sandbox(t)
		err := applyAll(root, []entry{file(n, "x")})
		if !errors.Is(err, execbox.ErrPermission) {
			t.Errorf("entry %q: %v, want ErrPermission", n, err)
		}
	}
}

func TestApplyModesAndTimes(t *testing.T) {
	_, root := sandbox(t)
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	suid := file("suid", "x")
	suid.Mode, suid.ModTime = 0o4755, mtime
	sgid := dir("sgid", 0o2775)
	sgid.ModTime = mtime
	ro := dir("ro", 0o555)
	t.Cleanup(func() { os.Chmod(filepath.Join(root, "ro"), 0o755) }) // for TempDir's cleanup, when not root
	err := applyAll(root,
		[]entry{suid, sgid, dir("tmp", 0o1777), ro, file("ro/a", "a")},
		[]entry{file("ro/b", "b")}, // into a read-only directory of the layer before
	)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{".": 0o755, "suid": 0o755, "sgid": 0o775, "ro": 0o555} {
		fi, err := os.Lstat(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm() | fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky); got != want {
			t.Errorf("%s mode %v, want %v", p, got, want)
		}
	}
	if fi, _ := os.Lstat(filepath.Join(root, "tmp")); fi.Mode()&fs.ModeSticky == 0 {
		t.Error("tmp lost its sticky bit")
	}
	for _, p := range []string{"suid", "sgid"} {
		if fi, _ := os.Lstat(filepath.Join(root, p)); !fi.ModTime().Equal(mtime) {
			t.Errorf("%s mtime %v, want %v", p, fi.ModTime(), mtime)
		}
	}
	if !exists(t, filepath.Join(root, "ro", "b")) {
		t.Error("ro/b missing")
	}
}

func TestApplyXattrs(t *testing.T) {
	_, root := sandbox(t)
	f := file("f", "x")
	f.PAXRecords = map[string]string{
		"SCHILY.xattr.user.keep":               "1",
		"SCHILY.xattr.security.capability":     "\x01\x00\x00\x02\xff\xff\xff\xff\x00\x00\x00\x00",
		"SCHILY.xattr.trusted.overlay.opaque":  "y",
		"SCHILY.xattr.system.posix_acl_access": "x",
	}
	if err := applyAll(root, []entry{f}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "f")
	buf := make([]byte, 64)
	if n, err := unix.Lgetxattr(p, "user.keep", buf); err != nil || string(buf[:n]) != "1" {
		t.Errorf("user.keep: %q, %v; want it applied", buf[:max(n, 0)], err)
	}
	for _, a := range []string{"security.capability", "trusted.overlay.opaque", "system.posix_acl_access"} {
		if _, err := unix.Lgetxattr(p, a, buf); err == nil {
			t.Errorf("%s applied, want it dropped", a)
		}
	}
}

func TestApplyOwnership(t *testing.T) {
	testutil.Require(t, testutil.Root)
	_, root := sandbox(t)
	f, d, l := file("f", "x"), dir("d", 0o755), symlink("l", "f")
	for _, e := range []*entry{&f, &d, &l} {
		e.Uid, e.Gid = 1234, 5678
	}
	if err := applyAll(root, []entry{f, d, l}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"f", "d", "l"} {
		fi, err := os.Lstat(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 1234 || st.Gid != 5678 {
			t.Errorf("%s owned by %d:%d, want 1234:5678", p, st.Uid, st.Gid)
		}
	}
}

func TestApplySkipsDevices(t *testing.T) {
	_, root := sandbox(t)
	err := applyAll(root, []entry{
		{Header: tar.Header{Typeflag: tar.TypeChar, Name: "null", Devmajor: 1, Devminor: 3}},
		{Header: tar.Header{Typeflag: tar.TypeBlock, Name: "sda", Devmajor: 8}},
		{Header: tar.Header{Typeflag: tar.TypeFifo, Name: "fifo"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"null", "sda", "fifo"} {
		if exists(t, filepath.Join(root, p)) {
			t.Errorf("%s created", p)
		}
	}
}

// TestApplyHugeSparseEntry: an entry larger than the file system (only
// holes, a few bytes in the tar) is refused, without writing its zeros.
func TestApplyHugeSparseEntry(t *testing.T) {
	_, root := sandbox(t)
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "zeros", Size: 1 << 20, Mode: 0o644})
	tw.Write(make([]byte, 1<<20))
	tw.Close()
	a, err := newApplier(root)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.left = 1 << 19
	err = a.applyLayer(t.Context(), &b)
	if !errors.Is(err, execbox.ErrResourceExhausted) {
		t.Errorf("1 MiB entry with 512 KiB left: %v, want ErrResourceExhausted", err)
	}
	// Zeros are written as holes.
	_, root = sandbox(t)
	if err := applyAll(root, []entry{{Header: tar.Header{Typeflag: tar.TypeReg, Name: "z", Size: 1 << 20}, Body: string(make([]byte, 1<<20))}}); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(filepath.Join(root, "z"))
	if st := fi.Sys().(*syscall.Stat_t); fi.Size() != 1<<20 || st.Blocks*512 >= 1<<20 {
		t.Errorf("z: size %d, %d bytes on disk; want 1 MiB, sparse", fi.Size(), st.Blocks*512)
	}
}

// FuzzApplyLayer applies two arbitrary layers (the second on top of the
// first) and checks that nothing was written outside the root and that
// no setuid or setgid file came out.
func FuzzApplyLayer(f *testing.F) {
	for _, seed := range [][]entry{
		{symlink("evil", "../outside"), file("evil/target", "x")},
		{symlink("evil", "/"), file("evil/../outside/pwned", "x")},
		{symlink("s", "../outside/target"), hardlink("h", "s"), file("h", "x")},
		{file("../outside/pwned", "x"), file("/abs", "a")},
		{dir("d", 0o4755), file("d/.wh..wh..opq", ""), file("d/.wh.x", ""), file(".wh.d", "")},
		{hardlink("l", "../outside/target"), symlink("l2", "/etc/passwd"), hardlink("l3", "l2")},
	} {
		f.Add(imagetest.Tar(seed...), imagetest.Tar(file("evil/target", "y"), file("s", "y"), dir("evil/d", 0o755)))
	}
	f.Fuzz(func(t *testing.T, l1, l2 []byte) {
		top, root := sandbox(t)
		a, err := newApplier(root)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		a.left = 1 << 20 // sparse entries: bound the zeros to produce
		if a.applyLayer(context.Background(), bytes.NewReader(l1)) == nil {
			a.applyLayer(context.Background(), bytes.NewReader(l2))
		}
		a.finish()
		wantOutsideUntouched(t, top)
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
				t.Errorf("%s is setuid or setgid", p)
			}
			if info, err := d.Info(); err == nil && info.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
				t.Errorf("%s is setuid or setgid", p)
			}
			return nil
		})
	})
}

package workspace

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
)

// open opens a workspace on a new temporary directory.
func open(t *testing.T) *Workspace {
	t.Helper()
	w, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// host returns the host path of rel in w.
func host(w *Workspace, rel string) string { return filepath.Join(w.Dir(), rel) }

func writeHost(t *testing.T, path, content string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func wantKind(t *testing.T, err, kind error) {
	t.Helper()
	if kind == nil {
		if err != nil {
			t.Fatalf("got error %v, want none", err)
		}
		return
	}
	if !errors.Is(err, kind) {
		t.Fatalf("got error %v, want kind %v", err, kind)
	}
}

func wantField(t *testing.T, err error, field string, kind error) {
	t.Helper()
	wantKind(t, err, kind)
	fe, ok := errors.AsType[*execbox.FieldError](err)
	if !ok {
		t.Fatalf("got %T %v, want a *execbox.FieldError", err, err)
	}
	if fe.Field != field {
		t.Fatalf("got field %q, want %q (%v)", fe.Field, field, err)
	}
}

// state describes a host tree (without following symlinks), to check that
// nothing changed.
func state(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		desc := fi.Mode().String()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + string(b) + " " + fi.ModTime().String()
		}
		m[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameState(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected %q", k, v)
		}
	}
}

// entry is a tar entry for mkTar.
type entry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func mkTar(t *testing.T, entries ...entry) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Mode: mode, Linkname: e.link, Size: int64(len(e.body)), ModTime: time.Unix(1e9, 0)}
		if typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil && typ == tar.TypeReg {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &b
}

func TestOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	writeHost(t, file, "x", 0o644)
	tests := []struct {
		name string
		dir  string
		kind error
	}{
		{"relative", "some/dir", execbox.ErrInvalidArgument},
		{"nul", dir + "\x00", execbox.ErrInvalidArgument},
		{"missing", filepath.Join(dir, "missing"), execbox.ErrNotFound},
		{"file", file, execbox.ErrInvalidArgument},
		{"ok", dir + "/./", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := Open(tt.dir)
			wantKind(t, err, tt.kind)
			if err == nil {
				if got := w.Dir(); got != dir {
					t.Errorf("Dir: got %q, want %q", got, dir)
				}
				w.Close()
			}
		})
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	real := filepath.Join(parent, "ws")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	alias := filepath.Join(parent, "alias")
	if err := os.Symlink("ws", alias); err != nil {
		t.Fatal(err)
	}
	w, err := Open(alias) // opened through a symlink: both spellings work
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tests := []struct {
		in   string
		want string
		kind error
	}{
		{"", ".", nil},
		{".", ".", nil},
		{"a", "a", nil},
		{"./a/b/", "a/b", nil},
		{"a/../b", "b", nil},
		{"a/..", ".", nil},
		{alias, ".", nil},
		{alias + "/a/b", "a/b", nil},
		{real + "/a", "a", nil},
		{alias + "/../ws/a", "a", nil}, // lexically the real directory
		{"..", "", execbox.ErrPermission},
		{"../x", "", execbox.ErrPermission},
		{"a/../../x", "", execbox.ErrPermission},
		{"/etc/passwd", "", execbox.ErrPermission},
		{"/", "", execbox.ErrPermission},
		{parent + "/wsx/a", "", execbox.ErrPermission}, // shares a prefix, not a directory
		{alias + "/../x", "", execbox.ErrPermission},
		{"a\x00b", "", execbox.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := w.Resolve("dir", tt.in)
			if tt.kind != nil {
				wantField(t, err, "dir", tt.kind)
				return
			}
			wantKind(t, err, nil)
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCheckDir(t *testing.T) {
	t.Parallel()
	w := open(t)
	out := t.TempDir()
	writeHost(t, host(w, "sub/f"), "x", 0o644)
	must(t, os.Symlink("sub", host(w, "in")))
	must(t, os.Symlink(out, host(w, "out")))
	must(t, os.Symlink("../"+filepath.Base(out), host(w, "rel")))
	must(t, os.Symlink(host(w, "sub"), host(w, "absin")))
	tests := []struct {
		in   string
		want string
		kind error
	}{
		{"", w.Dir(), nil},
		{"sub", host(w, "sub"), nil},
		{host(w, "sub"), host(w, "sub"), nil},
		{"in", host(w, "in"), nil},
		{"sub/f", "", execbox.ErrInvalidArgument},
		{"missing", "", execbox.ErrNotFound},
		{"out", "", execbox.ErrPermission},
		{"rel", "", execbox.ErrPermission},
		{"absin", "", execbox.ErrPermission}, // absolute symlinks are never followed
		{"..", "", execbox.ErrPermission},
		{out, "", execbox.ErrPermission},
		{"a\x00", "", execbox.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := w.CheckDir("setup[0].dir", tt.in)
			if tt.kind != nil {
				wantField(t, err, "setup[0].dir", tt.kind)
				return
			}
			wantKind(t, err, nil)
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestPlantedSymlinks plants symlinks out of the workspace, as a command
// could, and checks that no operation goes through them and that the
// outside is untouched.
func TestPlantedSymlinks(t *testing.T) {
	t.Parallel()
	w := open(t)
	out := t.TempDir() // a sibling of the workspace
	writeHost(t, filepath.Join(out, "secret"), "TOP-SECRET", 0o600)
	must(t, os.Mkdir(filepath.Join(out, "dir"), 0o755))
	before := state(t, out)

	must(t, os.Symlink(out, host(w, "abs")))
	must(t, os.Symlink("../"+filepath.Base(out), host(w, "rel")))
	must(t, os.Symlink("/", host(w, "slash")))
	must(t, os.Symlink(filepath.Join(out, "secret"), host(w, "absfile")))
	must(t, os.Symlink("../"+filepath.Base(out)+"/secret", host(w, "relfile")))
	must(t, os.Mkdir(host(w, "d"), 0o755))
	must(t, os.Symlink("../../"+filepath.Base(out), host(w, "d/up2")))

	ctx := t.Context()
	for _, dir := range []string{"abs", "rel", "slash" + out, "d/up2", host(w, "abs")} {
		ops := map[string]func() error{
			"read": func() error {
				_, err := w.ReadFile(ctx, dir+"/secret", execbox.ReadOptions{})
				return err
			},
			"write new": func() error { return w.WriteFile(ctx, dir+"/new", []byte("x"), execbox.WriteOptions{}) },
			"write over": func() error {
				return w.WriteFile(ctx, dir+"/secret", []byte("x"), execbox.WriteOptions{})
			},
			"write parents": func() error {
				return w.WriteFile(ctx, dir+"/a/b", []byte("x"), execbox.WriteOptions{Parents: true})
			},
			"stat":  func() error { _, err := w.Stat(ctx, dir+"/secret"); return err },
			"list":  func() error { _, err := w.List(ctx, dir); return err },
			"mkdir": func() error { return w.Mkdir(ctx, dir+"/m", execbox.MkdirOptions{}) },
			"mkdir parents": func() error {
				return w.Mkdir(ctx, dir+"/m/n", execbox.MkdirOptions{Parents: true})
			},
			"remove": func() error { return w.Remove(ctx, dir+"/secret", execbox.RemoveOptions{}) },
			"remove dir": func() error {
				return w.Remove(ctx, dir+"/dir", execbox.RemoveOptions{Recursive: true})
			},
			"upload into": func() error { return w.Upload(ctx, dir, mkTar(t, entry{name: "x", body: "x"})) },
			"upload below": func() error {
				return w.Upload(ctx, dir+"/dir", mkTar(t, entry{name: "x", body: "x"}))
			},
			"upload entry": func() error {
				return w.Upload(ctx, ".", mkTar(t, entry{name: dir + "/x", body: "x"}))
			},
			"download": func() error { return w.Download(ctx, dir+"/secret", io.Discard) },
			"checkdir": func() error { _, err := w.CheckDir("dir", dir); return err },
		}
		label := dir
		if filepath.IsAbs(dir) {
			label = "absolute"
		}
		for name, op := range ops {
			t.Run(label+"/"+name, func(t *testing.T) {
				wantKind(t, op(), execbox.ErrPermission)
			})
		}
	}
	for _, file := range []string{"absfile", "relfile"} {
		t.Run(file, func(t *testing.T) {
			_, err := w.ReadFile(ctx, file, execbox.ReadOptions{})
			wantKind(t, err, execbox.ErrPermission)
			wantKind(t, w.WriteFile(ctx, file, []byte("x"), execbox.WriteOptions{}), execbox.ErrPermission)
			wantKind(t, w.WriteFile(ctx, file, []byte("x"), execbox.WriteOptions{Mode: 0o777}), execbox.ErrPermission)
		})
	}
	t.Run("snapshot", func(t *testing.T) {
		var b bytes.Buffer
		must(t, w.Snapshot(ctx, &b))
		if bytes.Contains(b.Bytes(), []byte("TOP-SECRET")) {
			t.Error("snapshot contains the outside file")
		}
	})
	t.Run("remove links", func(t *testing.T) {
		// Removing a link removes the link, not its target.
		for _, l := range []string{"abs", "relfile", "d"} {
			must(t, w.Remove(ctx, l, execbox.RemoveOptions{Recursive: true}))
		}
	})
	sameState(t, state(t, out), before)
}

// A hard link planted to a file outside is replaced, not written through.
func TestPlantedHardLink(t *testing.T) {
	t.Parallel()
	w := open(t)
	out := t.TempDir()
	secret := filepath.Join(out, "secret")
	writeHost(t, secret, "secret", 0o644)
	before := state(t, out)
	ctx := t.Context()
	for i, write := range []func(name string) error{
		func(name string) error { return w.WriteFile(ctx, name, []byte("x"), execbox.WriteOptions{}) },
		func(name string) error { return w.Upload(ctx, ".", mkTar(t, entry{name: name, body: "x"})) },
	} {
		name := string(rune('a' + i))
		must(t, os.Link(secret, host(w, name)))
		must(t, write(name))
		got, err := os.ReadFile(host(w, name))
		must(t, err)
		if string(got) != "x" {
			t.Errorf("%s: got %q, want %q", name, got, "x")
		}
	}
	// Through a symlink, WriteFile writes in place: refused.
	must(t, os.Link(secret, host(w, "hl")))
	must(t, os.Symlink("hl", host(w, "sl")))
	wantKind(t, w.WriteFile(ctx, "sl", []byte("x"), execbox.WriteOptions{}), execbox.ErrPermission)
	sameState(t, state(t, out), before)
}

func TestHostileTar(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		entries func(out string) []entry
		field   bool // the refusal is a *FieldError on "tar"
	}{
		{"dotdot", func(string) []entry { return []entry{{name: "../x", body: "x"}} }, true},
		{"dotdot inside", func(string) []entry { return []entry{{name: "a/../../x", body: "x"}} }, true},
		{"absolute", func(out string) []entry { return []entry{{name: out + "/x", body: "x"}} }, true},
		{"absolute dir", func(out string) []entry { return []entry{{name: out + "/d/", typ: tar.TypeDir}} }, true},
		{"symlink then write", func(out string) []entry {
			return []entry{{name: "link", typ: tar.TypeSymlink, link: out}, {name: "link/file", body: "x"}}
		}, false},
		{"symlink then write over", func(out string) []entry {
			return []entry{{name: "link", typ: tar.TypeSymlink, link: out}, {name: "link/secret", body: "x"}}
		}, false},
		{"relative symlink then write", func(out string) []entry {
			return []entry{{name: "link", typ: tar.TypeSymlink, link: "../" + filepath.Base(out)}, {name: "link/file", body: "x"}}
		}, false},
		{"nested symlink then write", func(out string) []entry {
			return []entry{{name: "a/b/link", typ: tar.TypeSymlink, link: "../../.."}, {name: "a/b/link/" + filepath.Base(out) + "/file", body: "x"}}
		}, false},
		{"symlink to root then write", func(out string) []entry {
			return []entry{{name: "link", typ: tar.TypeSymlink, link: "/"}, {name: "link" + out + "/file", body: "x"}}
		}, false},
		{"symlink then dir", func(out string) []entry {
			return []entry{{name: "link", typ: tar.TypeSymlink, link: out}, {name: "link/d/", typ: tar.TypeDir}}
		}, false},
		{"symlink then symlink", func(out string) []entry {
			return []entry{{name: "link", typ: tar.TypeSymlink, link: out}, {name: "link/l", typ: tar.TypeSymlink, link: "x"}}
		}, false},
		{"symlink then hard link", func(out string) []entry {
			return []entry{{name: "link", typ: tar.TypeSymlink, link: out}, {name: "h", typ: tar.TypeLink, link: "link/secret"}}
		}, false},
		{"hard link dotdot", func(out string) []entry {
			return []entry{{name: "h", typ: tar.TypeLink, link: "../" + filepath.Base(out) + "/secret"}}
		}, true},
		{"hard link absolute", func(out string) []entry {
			return []entry{{name: "h", typ: tar.TypeLink, link: out + "/secret"}}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := open(t)
			out := t.TempDir()
			writeHost(t, filepath.Join(out, "secret"), "secret", 0o644)
			before := state(t, out)
			err := w.Upload(t.Context(), ".", mkTar(t, tt.entries(out)...))
			if tt.field {
				wantField(t, err, "tar", execbox.ErrPermission)
			} else {
				wantKind(t, err, execbox.ErrPermission)
			}
			sameState(t, state(t, out), before)
		})
	}

	t.Run("symlinks created as they are", func(t *testing.T) {
		t.Parallel()
		w := open(t)
		must(t, w.Upload(t.Context(), ".", mkTar(t, entry{name: "link", typ: tar.TypeSymlink, link: "/etc"})))
		fi, err := w.Stat(t.Context(), "link")
		must(t, err)
		if fi.Target != "/etc" || fi.Mode&fs.ModeSymlink == 0 {
			t.Errorf("got %+v, want a symlink to /etc", fi)
		}
	})
}

// Upload is confined to its directory, not only to the workspace.
func TestUploadConfinedToDirectory(t *testing.T) {
	t.Parallel()
	w := open(t)
	ctx := t.Context()
	writeHost(t, host(w, "keep"), "keep", 0o644)
	before := state(t, w.Dir())
	err := w.Upload(ctx, "up", mkTar(t,
		entry{name: "link", typ: tar.TypeSymlink, link: ".."},
		entry{name: "link/keep", body: "x"}))
	wantKind(t, err, execbox.ErrPermission)
	after := state(t, w.Dir())
	if after["keep"] != before["keep"] {
		t.Errorf("keep changed: %q", after["keep"])
	}
	wantField(t, w.Upload(ctx, "up", mkTar(t, entry{name: "../keep", body: "x"})), "tar", execbox.ErrPermission)
}

func TestUploadEntries(t *testing.T) {
	t.Parallel()
	w := open(t)
	ctx := t.Context()
	writeHost(t, host(w, "up/replaced-by-dir"), "x", 0o644)
	must(t, os.MkdirAll(host(w, "up/replaced-by-file"), 0o755))
	err := w.Upload(ctx, "up", mkTar(t,
		entry{name: "./", typ: tar.TypeDir, mode: 0o700},
		entry{name: "suid", body: "s", mode: 0o4755},
		entry{name: "sticky/", typ: tar.TypeDir, mode: 0o1777},
		entry{name: "ro/", typ: tar.TypeDir, mode: 0o555},
		entry{name: "ro/f", body: "f", mode: 0o444},
		entry{name: "fifo", typ: tar.TypeFifo},
		entry{name: "dev", typ: tar.TypeChar},
		entry{name: "implicit/parent/f", body: "p"},
		entry{name: "replaced-by-dir/", typ: tar.TypeDir, mode: 0o750},
		entry{name: "dup", body: "one"},
		entry{name: "dup", body: "two"},
		entry{name: "hl", typ: tar.TypeLink, link: "dup"},
	))
	must(t, err)
	tests := []struct {
		path string
		mode fs.FileMode
		body string
	}{
		{"up", fs.ModeDir | 0o755, ""}, // the "./" entry does not change the target
		{"up/suid", 0o755, "s"},
		{"up/sticky", fs.ModeDir | 0o777, ""},
		{"up/ro", fs.ModeDir | 0o555, ""},
		{"up/ro/f", 0o444, "f"},
		{"up/implicit/parent", fs.ModeDir | 0o755, ""},
		{"up/implicit/parent/f", 0o644, "p"},
		{"up/replaced-by-dir", fs.ModeDir | 0o750, ""},
		{"up/dup", 0o644, "two"},
		{"up/hl", 0o644, "two"},
	}
	for _, tt := range tests {
		fi, err := os.Lstat(host(w, tt.path))
		if err != nil {
			t.Error(err)
			continue
		}
		if fi.Mode() != tt.mode {
			t.Errorf("%s: got mode %v, want %v", tt.path, fi.Mode(), tt.mode)
		}
		if !fi.IsDir() {
			b, _ := os.ReadFile(host(w, tt.path))
			if string(b) != tt.body {
				t.Errorf("%s: got %q, want %q", tt.path, b, tt.body)
			}
		}
		if !fi.ModTime().Equal(time.Unix(1e9, 0)) && tt.path != "up" && tt.path != "up/implicit/parent" {
			t.Errorf("%s: got mtime %v, want %v", tt.path, fi.ModTime(), time.Unix(1e9, 0))
		}
	}
	for _, skipped := range []string{"up/fifo", "up/dev"} {
		if _, err := os.Lstat(host(w, skipped)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: got %v, want it skipped", skipped, err)
		}
	}
	a, _ := os.Stat(host(w, "up/dup"))
	b, _ := os.Stat(host(w, "up/hl"))
	if !os.SameFile(a, b) {
		t.Error("up/hl is not a hard link to up/dup")
	}
	// A non-empty directory cannot be replaced by a file.
	err = w.Upload(ctx, "up", mkTar(t, entry{name: "ro", body: "x"}))
	wantKind(t, err, execbox.ErrInvalidArgument)
	// Left-over temporary files.
	matches, _ := filepath.Glob(host(w, "up/.execbox-*"))
	if len(matches) > 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

func TestUploadBadStream(t *testing.T) {
	t.Parallel()
	w := open(t)
	ctx := t.Context()
	good := mkTar(t, entry{name: "f", body: strings.Repeat("x", 2000)}).Bytes()
	tests := []struct {
		name string
		tar  []byte
		kind error
	}{
		{"garbage", bytes.Repeat([]byte("garbage!"), 200), execbox.ErrInvalidArgument},
		{"truncated", good[:1024], execbox.ErrInvalidArgument},
		{"empty", nil, nil},
		{"unsupported type", mkTar(t, entry{name: "x", typ: 'Z'}).Bytes(), execbox.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantKind(t, w.Upload(ctx, tt.name, bytes.NewReader(tt.tar)), tt.kind)
		})
	}
}

func TestUploadCancel(t *testing.T) {
	t.Parallel()
	w := open(t)
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		tw.WriteHeader(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 30})
		buf := make([]byte, 1<<16)
		for i := 0; ; i++ {
			if i == 10 {
				cancel()
			}
			if _, err := tw.Write(buf); err != nil {
				return
			}
		}
	}()
	err := w.Upload(ctx, ".", pr)
	pr.CloseWithError(errors.New("done"))
	wantKind(t, err, context.Canceled)
	matches, _ := filepath.Glob(host(w, ".execbox-*"))
	if len(matches) > 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

// buildTree makes a tree with every kind of entry Download writes.
func buildTree(t *testing.T, dir string) {
	t.Helper()
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	writeHost(t, filepath.Join(dir, "a.txt"), "hello", 0o644)
	writeHost(t, filepath.Join(dir, "bin/run.sh"), "#!/bin/sh\necho hi\n", 0o755)
	writeHost(t, filepath.Join(dir, "private/key"), "k", 0o600)
	writeHost(t, filepath.Join(dir, "ro/f"), "read only", 0o444)
	writeHost(t, filepath.Join(dir, "nested/deep/deeper/file"), strings.Repeat("n", 10000), 0o640)
	writeHost(t, filepath.Join(dir, strings.Repeat("long", 40)), "long name", 0o644)
	must(t, os.MkdirAll(filepath.Join(dir, "empty"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, "nested/empty/too"), 0o755))
	must(t, os.Symlink("a.txt", filepath.Join(dir, "link")))
	must(t, os.Symlink("nowhere", filepath.Join(dir, "dangling")))
	must(t, os.Symlink("bin", filepath.Join(dir, "dirlink")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(dir, "abslink")))
	must(t, os.Link(filepath.Join(dir, "a.txt"), filepath.Join(dir, "nested/hard")))
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		return os.Chtimes(p, mtime, mtime)
	})
	must(t, err)
	must(t, os.Chmod(filepath.Join(dir, "private"), 0o700))
	must(t, os.Chmod(filepath.Join(dir, "ro"), 0o555))
	must(t, os.Chtimes(filepath.Join(dir, "ro"), mtime, mtime))
	must(t, os.Chtimes(filepath.Join(dir, "private"), mtime, mtime))
}

func TestTarRoundTrip(t *testing.T) {
	t.Parallel()
	src := open(t)
	buildTree(t, src.Dir())
	want := state(t, src.Dir())
	delete(want, "fifo") // skipped
	delete(want, ".")    // not an entry

	dst := open(t)
	var b bytes.Buffer
	must(t, src.Snapshot(t.Context(), &b))
	must(t, dst.Restore(t.Context(), &b))
	got := state(t, dst.Dir())
	delete(got, ".")
	sameState(t, got, want)

	// Directory mtimes too (state only has files').
	for _, d := range []string{"ro", "private", "nested/deep", "empty"} {
		fs, err := os.Stat(filepath.Join(src.Dir(), d))
		must(t, err)
		fd, err := os.Stat(filepath.Join(dst.Dir(), d))
		must(t, err)
		if !fs.ModTime().Equal(fd.ModTime()) {
			t.Errorf("%s: got mtime %v, want %v", d, fd.ModTime(), fs.ModTime())
		}
	}
	a, _ := os.Stat(filepath.Join(dst.Dir(), "a.txt"))
	h, _ := os.Stat(filepath.Join(dst.Dir(), "nested/hard"))
	if !os.SameFile(a, h) {
		t.Error("nested/hard is not a hard link to a.txt")
	}

	t.Run("subdirectory", func(t *testing.T) {
		var b bytes.Buffer
		must(t, src.Download(t.Context(), "nested", &b))
		names := tarNames(t, b.Bytes())
		want := "deep/ deep/deeper/ deep/deeper/file empty/ empty/too/ hard"
		if got := strings.Join(names, " "); got != want {
			t.Errorf("got entries %q, want %q", got, want)
		}
	})
	t.Run("file", func(t *testing.T) {
		var b bytes.Buffer
		must(t, src.Download(t.Context(), "bin/run.sh", &b))
		if got := strings.Join(tarNames(t, b.Bytes()), " "); got != "run.sh" {
			t.Errorf("got entries %q, want %q", got, "run.sh")
		}
		must(t, dst.Upload(t.Context(), "x/y", &b))
		fi, err := os.Stat(filepath.Join(dst.Dir(), "x/y/run.sh"))
		must(t, err)
		if fi.Mode() != 0o755 {
			t.Errorf("got mode %v, want 0755", fi.Mode())
		}
	})
	t.Run("symlink", func(t *testing.T) {
		var b bytes.Buffer
		must(t, src.Download(t.Context(), "dirlink", &b))
		if got := strings.Join(tarNames(t, b.Bytes()), " "); got != "dirlink" {
			t.Errorf("got entries %q, want just the link", got)
		}
	})
}

func tarNames(t *testing.T, b []byte) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names
		}
		must(t, err)
		names = append(names, hdr.Name)
	}
}

// TestStreaming moves 100 MiB through Upload and Download and checks that
// neither holds it in memory.
func TestStreaming(t *testing.T) {
	// Not parallel: it measures the allocations of the whole process.
	const size = 100 << 20
	w := open(t)
	ctx := t.Context()
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		if err := tw.WriteHeader(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Mode: 0o644, Size: size}); err != nil {
			pw.CloseWithError(err)
			return
		}
		buf := bytes.Repeat([]byte{'x'}, 1<<16)
		for n := 0; n < size; n += len(buf) {
			if _, err := tw.Write(buf); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(tw.Close())
	}()
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		t.Logf("allocated %d KiB", (after.TotalAlloc-before.TotalAlloc)>>10)
		return after.TotalAlloc - before.TotalAlloc
	}
	const most = 16 << 20
	if n := allocated(func() { must(t, w.Upload(ctx, ".", pr)) }); n > most {
		t.Errorf("Upload allocated %d MiB, want at most %d", n>>20, most>>20)
	}
	fi, err := os.Stat(host(w, "big"))
	must(t, err)
	if fi.Size() != size {
		t.Fatalf("got size %d, want %d", fi.Size(), size)
	}
	var cw countingWriter
	if n := allocated(func() { must(t, w.Download(ctx, ".", &cw)) }); n > most {
		t.Errorf("Download allocated %d MiB, want at most %d", n>>20, most>>20)
	}
	if cw < size {
		t.Errorf("Download wrote %d bytes, want more than %d", cw, size)
	}
	_, err = w.ReadFile(ctx, "big", execbox.ReadOptions{Limit: size})
	must(t, err)
	if n := allocated(func() {
		_, err := w.ReadFile(ctx, "big", execbox.ReadOptions{Limit: size - 1})
		wantKind(t, err, execbox.ErrResourceExhausted)
	}); n > most {
		t.Errorf("ReadFile over the limit allocated %d MiB, want at most %d", n>>20, most>>20)
	}
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

func TestReadFile(t *testing.T) {
	t.Parallel()
	w := open(t)
	ctx := t.Context()
	writeHost(t, host(w, "f"), strings.Repeat("x", 100), 0o644)
	writeHost(t, host(w, "empty"), "", 0o644)
	must(t, os.Symlink("f", host(w, "link")))
	must(t, syscall.Mkfifo(host(w, "fifo"), 0o644))
	tests := []struct {
		path  string
		limit int64
		size  int
		kind  error
	}{
		{"f", 0, 100, nil},
		{"f", 100, 100, nil},
		{"f", 99, 0, execbox.ErrResourceExhausted},
		{"f", -1, 0, execbox.ErrInvalidArgument},
		{"empty", 1, 0, nil},
		{"link", 0, 100, nil},
		{host(w, "f"), 0, 100, nil},
		{".", 0, 0, execbox.ErrInvalidArgument},
		{"fifo", 0, 0, execbox.ErrInvalidArgument}, // and does not hang
		{"missing", 0, 0, execbox.ErrNotFound},
		{"f/x", 0, 0, execbox.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, err := w.ReadFile(ctx, tt.path, execbox.ReadOptions{Limit: tt.limit})
			wantKind(t, err, tt.kind)
			if len(got) != tt.size {
				t.Errorf("got %d bytes, want %d", len(got), tt.size)
			}
		})
	}
	_, err := w.ReadFile(ctx, "missing", execbox.ReadOptions{})
	wantKind(t, err, fs.ErrNotExist) // the OS error is kept in process
}

func TestWriteFile(t *testing.T) {
	t.Parallel()
	w := open(t)
	ctx := t.Context()
	writeHost(t, host(w, "script"), "old", 0o755)
	must(t, os.Mkdir(host(w, "dir"), 0o755))
	must(t, os.Symlink("target", host(w, "link")))
	tests := []struct {
		path     string
		opts     execbox.WriteOptions
		hostPath string
		mode     fs.FileMode
		kind     error
	}{
		{"new", execbox.WriteOptions{}, "new", 0o644, nil},
		{"exact", execbox.WriteOptions{Mode: 0o777}, "exact", 0o777, nil}, // no umask
		{"private", execbox.WriteOptions{Mode: 0o600}, "private", 0o600, nil},
		{"script", execbox.WriteOptions{}, "script", 0o755, nil}, // keeps its mode
		{"a/b/c", execbox.WriteOptions{Parents: true}, "a/b/c", 0o644, nil},
		{"link", execbox.WriteOptions{}, "target", 0o644, nil}, // through an inside symlink
		{"x/y", execbox.WriteOptions{}, "", 0, execbox.ErrNotFound},
		{"dir", execbox.WriteOptions{}, "", 0, execbox.ErrInvalidArgument},
		{".", execbox.WriteOptions{}, "", 0, execbox.ErrInvalidArgument},
		{"script/x", execbox.WriteOptions{Parents: true}, "", 0, execbox.ErrInvalidArgument},
		{"suid", execbox.WriteOptions{Mode: fs.ModeSetuid | 0o755}, "", 0, execbox.ErrInvalidArgument},
		{"../x", execbox.WriteOptions{}, "", 0, execbox.ErrPermission},
		{"x\x00", execbox.WriteOptions{}, "", 0, execbox.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			err := w.WriteFile(ctx, tt.path, []byte("data:"+tt.path), tt.opts)
			wantKind(t, err, tt.kind)
			if err != nil {
				return
			}
			fi, err := os.Lstat(host(w, tt.hostPath))
			must(t, err)
			if fi.Mode() != tt.mode {
				t.Errorf("got mode %v, want %v", fi.Mode(), tt.mode)
			}
			b, _ := os.ReadFile(host(w, tt.hostPath))
			if string(b) != "data:"+tt.path {
				t.Errorf("got %q, want %q", b, "data:"+tt.path)
			}
		})
	}
	if fi, err := os.Lstat(host(w, "link")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("link: got %v %v, want it still a symlink", fi, err)
	}
	matches, _ := filepath.Glob(host(w, ".execbox-*"))
	if len(matches) > 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

func TestStatAndList(t *testing.T) {
	t.Parallel()
	w := open(t)
	ctx := t.Context()
	for _, name := range []string{"b", "a", "C", "_", "aa"} {
		writeHost(t, host(w, "d/"+name), name, 0o644)
	}
	must(t, os.Mkdir(host(w, "d/z"), 0o700))
	must(t, os.Symlink("../nowhere", host(w, "d/l")))
	must(t, os.Symlink("d", host(w, "dl")))

	infos, err := w.List(ctx, "d")
	must(t, err)
	var names []string
	for _, fi := range infos {
		names = append(names, fi.Name)
	}
	if got, want := strings.Join(names, " "), "C _ a aa b l z"; got != want {
		t.Errorf("got names %q, want %q", got, want)
	}
	byName := map[string]execbox.FileInfo{}
	for _, fi := range infos {
		byName[fi.Name] = fi
	}
	if fi := byName["aa"]; fi.Path != "d/aa" || fi.Size != 2 || fi.Mode != 0o644 || fi.IsDir() {
		t.Errorf("aa: got %+v", fi)
	}
	if fi := byName["z"]; fi.Path != "d/z" || fi.Mode != fs.ModeDir|0o700 || !fi.IsDir() {
		t.Errorf("z: got %+v", fi)
	}
	if fi := byName["l"]; fi.Target != "../nowhere" || fi.Mode&fs.ModeSymlink == 0 {
		t.Errorf("l: got %+v", fi)
	}
	// Through a symlinked directory, paths are as asked.
	infos, err = w.List(ctx, "dl")
	must(t, err)
	if len(infos) != 7 || infos[0].Path != "dl/C" {
		t.Errorf("dl: got %+v", infos)
	}
	root, err := w.List(ctx, "")
	must(t, err)
	if len(root) != 2 || root[0].Path != "d" || root[1].Path != "dl" {
		t.Errorf("root: got %+v", root)
	}

	tests := []struct {
		path string
		want execbox.FileInfo
		kind error
	}{
		{"dl", execbox.FileInfo{Path: "dl", Name: "dl", Target: "d"}, nil},
		{"d/a", execbox.FileInfo{Path: "d/a", Name: "a", Size: 1}, nil},
		{".", execbox.FileInfo{Path: ".", Name: "."}, nil},
		{"missing", execbox.FileInfo{}, execbox.ErrNotFound},
		{"d/a/x", execbox.FileInfo{}, execbox.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, err := w.Stat(ctx, tt.path)
			wantKind(t, err, tt.kind)
			if got.Path != tt.want.Path || got.Name != tt.want.Name || got.Target != tt.want.Target || (tt.want.Size != 0 && got.Size != tt.want.Size) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	_, err = w.List(ctx, "d/a")
	wantKind(t, err, execbox.ErrInvalidArgument)
	_, err = w.List(ctx, "missing")
	wantKind(t, err, execbox.ErrNotFound)
}

func TestMkdirRemove(t *testing.T) {
	t.Parallel()
	w := open(t)
	ctx := t.Context()
	writeHost(t, host(w, "f"), "x", 0o644)
	writeHost(t, host(w, "full/f"), "x", 0o644)
	mkdirs := []struct {
		path string
		opts execbox.MkdirOptions
		mode fs.FileMode
		kind error
	}{
		{"a", execbox.MkdirOptions{}, 0o755, nil},
		{"b", execbox.MkdirOptions{Mode: 0o777}, 0o777, nil}, // no umask
		{"a", execbox.MkdirOptions{}, 0, fs.ErrExist},
		{"a", execbox.MkdirOptions{}, 0, execbox.ErrInvalidArgument},
		{"a", execbox.MkdirOptions{Parents: true}, 0o755, nil},
		{".", execbox.MkdirOptions{Parents: true}, 0, nil},
		{".", execbox.MkdirOptions{}, 0, execbox.ErrInvalidArgument},
		{"x/y/z", execbox.MkdirOptions{}, 0, execbox.ErrNotFound},
		{"x/y/z", execbox.MkdirOptions{Parents: true, Mode: 0o700}, 0o700, nil},
		{"f", execbox.MkdirOptions{Parents: true}, 0, execbox.ErrInvalidArgument},
		{"f/g", execbox.MkdirOptions{Parents: true}, 0, execbox.ErrInvalidArgument},
		{"m", execbox.MkdirOptions{Mode: fs.ModeSticky | 0o777}, 0, execbox.ErrInvalidArgument},
		{"../m", execbox.MkdirOptions{}, 0, execbox.ErrPermission},
	}
	for _, tt := range mkdirs {
		err := w.Mkdir(ctx, tt.path, tt.opts)
		if !errors.Is(err, tt.kind) && (tt.kind != nil || err != nil) {
			t.Errorf("Mkdir(%q, %+v): got %v, want %v", tt.path, tt.opts, err, tt.kind)
			continue
		}
		if err == nil && tt.mode != 0 {
			fi, err := os.Stat(host(w, tt.path))
			must(t, err)
			if fi.Mode().Perm() != tt.mode {
				t.Errorf("Mkdir(%q): got mode %v, want %v", tt.path, fi.Mode().Perm(), tt.mode)
			}
		}
	}
	if fi, _ := os.Stat(host(w, "x/y")); fi == nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("x/y: got %v, want a parent with mode 0755", fi)
	}

	removes := []struct {
		path string
		opts execbox.RemoveOptions
		kind error
	}{
		{"full", execbox.RemoveOptions{}, execbox.ErrInvalidArgument},
		{"full", execbox.RemoveOptions{Recursive: true}, nil},
		{"full", execbox.RemoveOptions{Recursive: true}, execbox.ErrNotFound},
		{"missing", execbox.RemoveOptions{}, execbox.ErrNotFound},
		{"f", execbox.RemoveOptions{}, nil},
		{"a", execbox.RemoveOptions{}, nil},
		{".", execbox.RemoveOptions{Recursive: true}, execbox.ErrInvalidArgument},
		{"", execbox.RemoveOptions{Recursive: true}, execbox.ErrInvalidArgument},
		{"..", execbox.RemoveOptions{Recursive: true}, execbox.ErrPermission},
	}
	for _, tt := range removes {
		err := w.Remove(ctx, tt.path, tt.opts)
		if !errors.Is(err, tt.kind) && (tt.kind != nil || err != nil) {
			t.Errorf("Remove(%q, %+v): got %v, want %v", tt.path, tt.opts, err, tt.kind)
		}
	}
	for _, gone := range []string{"full", "f", "a"} {
		if _, err := os.Lstat(host(w, gone)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: got %v, want it removed", gone, err)
		}
	}
	if _, err := os.Stat(w.Dir()); err != nil {
		t.Errorf("workspace: %v", err)
	}
}

func TestChown(t *testing.T) {
	testutil.Require(t, testutil.Root)
	t.Parallel()
	w := open(t)
	ctx := t.Context()
	buildTree(t, w.Dir())
	const uid, gid = 12345, 23456
	must(t, w.Chown(uid, gid))
	must(t, w.WriteFile(ctx, "new/file", []byte("x"), execbox.WriteOptions{Parents: true}))
	must(t, w.WriteFile(ctx, "a.txt", []byte("x"), execbox.WriteOptions{}))
	must(t, w.Mkdir(ctx, "newdir/sub", execbox.MkdirOptions{Parents: true}))
	must(t, w.Upload(ctx, "up", mkTar(t, entry{name: "d/f", body: "x"}, entry{name: "l", typ: tar.TypeSymlink, link: "/"})))
	n := 0
	err := filepath.WalkDir(w.Dir(), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != uid || st.Gid != gid {
			t.Errorf("%s: got owner %d:%d, want %d:%d", p, st.Uid, st.Gid, uid, gid)
		}
		n++
		return nil
	})
	must(t, err)
	if n < 25 {
		t.Errorf("walked %d entries, want the whole tree", n)
	}
	// The symlink's target was not touched.
	st, err := os.Stat("/etc/passwd")
	must(t, err)
	if st.Sys().(*syscall.Stat_t).Uid == uid {
		t.Error("/etc/passwd was chowned through a symlink")
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	w, err := Open(t.TempDir())
	must(t, err)
	must(t, w.Close())
	must(t, w.Close()) // idempotent
	ctx := t.Context()
	_, err = w.ReadFile(ctx, "f", execbox.ReadOptions{})
	wantKind(t, err, execbox.ErrClosed)
	wantKind(t, w.WriteFile(ctx, "f", nil, execbox.WriteOptions{}), execbox.ErrClosed)
	_, err = w.List(ctx, ".")
	wantKind(t, err, execbox.ErrClosed)
	wantKind(t, w.Snapshot(ctx, io.Discard), execbox.ErrClosed)
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	w := open(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	writeHost(t, host(w, "f"), "x", 0o644)
	_, err := w.ReadFile(ctx, "f", execbox.ReadOptions{})
	wantKind(t, err, context.Canceled)
	wantKind(t, w.WriteFile(ctx, "g", nil, execbox.WriteOptions{}), context.Canceled)
	wantKind(t, w.Download(ctx, ".", io.Discard), context.Canceled)
	wantKind(t, w.Upload(ctx, ".", mkTar(t, entry{name: "h", body: "x"})), context.Canceled)
	if _, err := os.Lstat(host(w, "g")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("g was written after cancellation")
	}
}

func TestKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		kind error
	}{
		{syscall.ENOENT, execbox.ErrNotFound},
		{syscall.EACCES, execbox.ErrPermission},
		{syscall.EPERM, execbox.ErrPermission},
		{syscall.EROFS, execbox.ErrPermission},
		{syscall.EEXIST, execbox.ErrInvalidArgument},
		{syscall.ENOTEMPTY, execbox.ErrInvalidArgument},
		{syscall.ENOTDIR, execbox.ErrInvalidArgument},
		{syscall.EISDIR, execbox.ErrInvalidArgument},
		{syscall.ELOOP, execbox.ErrInvalidArgument},
		{syscall.ENAMETOOLONG, execbox.ErrInvalidArgument},
		{syscall.ENOSPC, execbox.ErrResourceExhausted},
		{syscall.EDQUOT, execbox.ErrResourceExhausted},
		{syscall.EMFILE, execbox.ErrResourceExhausted},
		{syscall.ENFILE, execbox.ErrResourceExhausted},
		{syscall.EAGAIN, execbox.ErrResourceExhausted},
		{syscall.ENOMEM, execbox.ErrResourceExhausted},
		{syscall.EFBIG, execbox.ErrResourceExhausted},
		{fs.ErrClosed, execbox.ErrClosed},
		{io.ErrUnexpectedEOF, execbox.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			err := wrap("write", "a/b", &fs.PathError{Op: "openat", Path: "b", Err: tt.err})
			wantKind(t, err, tt.kind)
			wantKind(t, err, tt.err) // the cause is kept
			var pe *fs.PathError
			if !errors.As(err, &pe) {
				t.Errorf("got %v, want it to wrap the *fs.PathError", err)
			}
		})
	}
	for _, err := range []error{context.Canceled, context.DeadlineExceeded} {
		if got := wrap("write", "a", err); got != err {
			t.Errorf("got %v, want %v unchanged", got, err)
		}
	}
	if err := wrap("write", "a", syscall.EIO); errors.Is(err, execbox.ErrInvalidArgument) || !errors.Is(err, syscall.EIO) {
		t.Errorf("EIO: got %v, want no kind", err)
	}
}

// TestSwapRace swaps a directory of the workspace for a symlink to the
// outside while files are written, read and walked through it: os.Root
// must never follow the symlink out, whatever the timing, and a walk must
// not loop through a symlink to an ancestor.
func TestSwapRace(t *testing.T) {
	t.Parallel()
	w := open(t)
	out := t.TempDir()
	writeHost(t, filepath.Join(out, "x"), "TOP-SECRET", 0o644)
	before := state(t, out)
	d := host(w, "d")
	ctx := t.Context()

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		targets := []string{out, ".", "../" + filepath.Base(out)}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			os.RemoveAll(d)
			if i%2 == 0 {
				os.Mkdir(d, 0o755)
			} else {
				os.Symlink(targets[(i/2)%len(targets)], d)
			}
		}
	}()
	for i := range 300 {
		w.WriteFile(ctx, "d/x", []byte("pwned"), execbox.WriteOptions{Parents: true})
		w.Upload(ctx, "d", mkTar(t, entry{name: "x", body: "pwned"}))
		w.Upload(ctx, ".", mkTar(t, entry{name: "d/x", body: "pwned"}))
		w.Mkdir(ctx, "d/m", execbox.MkdirOptions{Parents: true})
		w.Remove(ctx, "d/x", execbox.RemoveOptions{Recursive: true})
		if b, err := w.ReadFile(ctx, "d/x", execbox.ReadOptions{}); err == nil && string(b) == "TOP-SECRET" {
			t.Fatal("read the outside file")
		}
		if i%10 == 0 {
			var b bytes.Buffer
			w.Snapshot(ctx, &b)
			if bytes.Contains(b.Bytes(), []byte("TOP-SECRET")) {
				t.Fatal("snapshot contains the outside file")
			}
		}
	}
	close(stop)
	<-done
	sameState(t, state(t, out), before)
}

package imagetest

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Busybox is the host's static busybox (Debian's busybox-static).
const Busybox = "/bin/busybox"

// BusyboxApplets are the commands BusyboxImage links to busybox in /bin.
var BusyboxApplets = []string{"sh", "ls", "cat", "echo", "id", "env", "sleep", "true", "false",
	"mkdir", "rm", "cp", "mv", "ln", "touch", "chmod", "stat", "pwd", "wc", "head", "grep", "printf", "test", "uname", "whoami"}

// BusyboxImage returns an image whose root is the host's static busybox
// at /bin/busybox, its applets (BusyboxApplets) as symlinks in /bin,
// /etc/passwd and /etc/group with root and user 1000, and /tmp; Env
// PATH=/bin, WorkingDir /. An error if /bin/busybox is missing or is not
// static. Built once per test binary.
var BusyboxImage = sync.OnceValues(func() (v1.Image, error) {
	if err := checkStatic(Busybox); err != nil {
		return nil, err
	}
	t := newTree()
	for _, d := range []string{"bin", "etc", "home/user", "root", "tmp"} {
		t.dir(d)
	}
	t.entries["tmp"].Mode = 0o1777
	t.entries["root"].Mode = 0o700
	t.file("bin/busybox", Busybox)
	for _, a := range BusyboxApplets {
		t.symlink("bin/"+a, "busybox")
	}
	t.content("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n")
	t.content("etc/group", "root:x:0:\nuser:x:1000:\n")
	t.entries["home/user"].Uid, t.entries["home/user"].Gid = 1000, 1000
	b, err := t.tar()
	if err != nil {
		return nil, err
	}
	return Image(v1.Config{Env: []string{"PATH=/bin"}, WorkingDir: "/"}, b)
})

// checkStatic fails unless the file is an ELF program without an
// interpreter.
func checkStatic(file string) error {
	f, err := elf.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is not static", file)
		}
	}
	return nil
}

// HostFilesImage returns an image of host files at the same paths:
// directories with everything below them, symlinks as symlinks (and what
// they point to), and for every ELF file its interpreter and the
// libraries it needs (DT_NEEDED), recursively, found in the usual
// directories of Debian's amd64 loader. Env is PATH=/usr/bin:/bin.
func HostFilesImage(paths ...string) (v1.Image, error) {
	t := newTree()
	for _, p := range paths {
		if err := t.add(p); err != nil {
			return nil, err
		}
	}
	b, err := t.tar()
	if err != nil {
		return nil, err
	}
	return Image(v1.Config{Env: []string{"PATH=/usr/bin:/bin"}}, b)
}

// Python is the interpreter PythonImage holds, with its library.
const Python = "/usr/bin/python3.11"

// PythonImage is HostFilesImage of the host's Python 3.11 (its binary and
// /usr/lib/python3.11, about 60 MB unpacked), built once per test binary.
var PythonImage = sync.OnceValues(func() (v1.Image, error) {
	return HostFilesImage(Python, "/usr/lib/python3.11")
})

// libDirs are where the loader of Debian amd64 looks for libraries.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// tree is a set of tar entries being assembled from the host.
type tree struct {
	entries map[string]*tar.Header // by name without a leading "/"
	host    map[string]string      // content of a regular file: a host path
	bodies  map[string]string      // or this
}

func newTree() *tree {
	return &tree{entries: map[string]*tar.Header{}, host: map[string]string{}, bodies: map[string]string{}}
}

// dir adds the directory name and its parents.
func (t *tree) dir(name string) {
	for name != "." && name != "/" && t.entries[name] == nil {
		t.entries[name] = &tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755}
		name = path.Dir(name)
	}
}

// file adds the regular file name with the content of the host file src.
func (t *tree) file(name, src string) {
	t.dir(path.Dir(name))
	fi, err := os.Stat(src)
	mode := int64(0o644)
	if err == nil {
		mode = int64(fi.Mode().Perm())
	}
	t.entries[name] = &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode}
	t.host[name] = src
}

func (t *tree) content(name, body string) {
	t.dir(path.Dir(name))
	t.entries[name] = &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))}
	t.bodies[name] = body
}

func (t *tree) symlink(name, target string) {
	t.dir(path.Dir(name))
	t.entries[name] = &tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}
}

// add adds the host path p (absolute) as described by HostFilesImage.
func (t *tree) add(p string) error {
	name := strings.TrimPrefix(filepath.Clean(p), "/")
	if t.entries[name] != nil {
		return nil
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		t.symlink(name, target)
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		if err := t.add(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	case fi.IsDir():
		t.dir(name)
		ents, err := os.ReadDir(p)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := t.add(filepath.Join(p, e.Name())); err != nil {
				return err
			}
		}
		return nil
	case fi.Mode().IsRegular():
		t.file(name, p)
		return t.addDeps(p)
	}
	return nil // sockets, devices, FIFOs
}

// addDeps adds the interpreter and libraries of p, if it is ELF.
func (t *tree) addDeps(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return nil // not ELF
	}
	defer f.Close()
	var deps []string
	for _, pr := range f.Progs {
		if pr.Type == elf.PT_INTERP {
			b, err := io.ReadAll(pr.Open())
			if err != nil {
				return err
			}
			deps = append(deps, strings.TrimRight(string(b), "\x00"))
		}
	}
	libs, _ := f.ImportedLibraries()
	for _, l := range libs {
		for _, d := range libDirs {
			if _, err := os.Stat(filepath.Join(d, l)); err == nil {
				deps = append(deps, filepath.Join(d, l))
				break
			}
		}
	}
	for _, d := range deps {
		name := strings.TrimPrefix(d, "/")
		if t.entries[name] != nil {
			continue
		}
		// At the path the loader asks for, with the content it leads to,
		// whatever symlinks lie between (merged /usr: /lib64 -> usr/lib64).
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			return err
		}
		t.file(name, real)
		if err := t.addDeps(real); err != nil {
			return err
		}
	}
	return nil
}

// tar writes the entries, sorted by name (parents first).
func (t *tree) tar() ([]byte, error) {
	names := make([]string, 0, len(t.entries))
	for n := range t.entries {
		names = append(names, n)
	}
	slices.Sort(names)
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, n := range names {
		if err := t.write(tw, n); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), tw.Close()
}

func (t *tree) write(tw *tar.Writer, n string) error {
	h := *t.entries[n]
	src, ok := t.host[n]
	if !ok {
		if err := tw.WriteHeader(&h); err != nil {
			return err
		}
		_, err := io.WriteString(tw, t.bodies[n])
		return err
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	h.Size = fi.Size()
	if err := tw.WriteHeader(&h); err != nil {
		return err
	}
	_, err = io.CopyN(tw, f, h.Size)
	return err
}

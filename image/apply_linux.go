//go:build linux

package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/ctxio"
)

// applier writes the layers of one image, in order, into one directory
// that nobody else uses yet (a temporary directory of the store). Every
// layer is hostile: see the package documentation for the rules.
//
// Every operation is relative to a descriptor of the root. A parent
// directory is opened with openat2(RESOLVE_IN_ROOT): symlinks are
// followed as a chroot would, so an absolute symlink of an earlier layer
// (Debian's var/run -> /run) leads back into the root, never out of it;
// the entry itself is then created, replaced or changed by its single
// name relative to that descriptor, without following a symlink there.
type applier struct {
	root   *os.File // the directory being filled
	asRoot bool     // lchown entries to the ids of the tar

	// dirs holds the final mode and mtime of every directory entry; they
	// are applied by finish, after every layer, so that a read-only
	// directory of one layer can still be filled by the next, and an
	// entry written into a directory does not change its mtime.
	dirs map[string]dirMeta
	// left is how many more bytes the regular files of the image may
	// hold: at first, the size of the file system under the root. An
	// image cannot be unpacked into more than that anyway, and a sparse
	// tar entry of an exabyte of holes would otherwise keep the applier
	// busy producing zeros for years.
	left int64
	// kept names the entries of the layer being applied and their
	// ancestors: what an opaque whiteout of this layer must not remove.
	kept map[string]bool

	// quota is what the store's bound (Options.MaxSize) leaves this
	// image; nil for no bound.
	quota *quota
}

// entryCost is what every entry is charged besides its content: one
// block of the file system, what a directory takes, and more than an
// empty file's inode and directory entry. A file of n bytes takes at
// most n+entryCost on disk, so what is charged bounds what the root
// takes; and inodes are bounded as well as bytes: a layer of a million
// empty files costs 4 GiB.
const entryCost = 4096

type dirMeta struct {
	mode uint32
	hdr  *tar.Header
}

// newApplier prepares to fill dir, an empty directory.
func newApplier(dir string) (*applier, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, err
	}
	left := int64(st.Blocks) * st.Bsize
	return &applier{root: f, asRoot: os.Geteuid() == 0, dirs: map[string]dirMeta{}, left: left}, nil
}

// charge counts an entry of size bytes of content (plus entryCost)
// against the quota, and fails with ErrResourceExhausted past it: the
// pull stops at the first entry over the bound, not after the layer.
// Entries are charged as they are written: what a later layer removes or
// replaces still counts, so an image whose layers rewrite much is charged
// more than it keeps.
func (a *applier) charge(size int64) error {
	return a.quota.take(max(size, 0) + entryCost)
}

// Close releases the root's descriptor.
func (a *applier) Close() error { return a.root.Close() }

// applyLayer applies the uncompressed tar stream r on top of what is in
// the root. It reads r only up to the end of the archive.
func (a *applier) applyLayer(ctx context.Context, r io.Reader) error {
	a.kept = map[string]bool{}
	tr := tar.NewReader(ctxio.Reader(ctx, r))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if errors.Is(err, tar.ErrInsecurePath) && hdr != nil {
			err = nil // entryName decides
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, tar.ErrHeader) {
				err = &kindError{execbox.ErrInvalidArgument, err}
			}
			return fmt.Errorf("bad layer: %w", err)
		}
		if err := a.entry(hdr, tr); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("layer entry %q: %w", hdr.Name, err)
		}
	}
}

// entryName returns the tar name n as a clean relative path; "." is the
// root. A leading "/" is dropped (names are relative to the image's root,
// as Docker and containerd read them); a name that leaves the root with
// ".." is refused.
func entryName(n string) (string, error) {
	if n == "" || strings.IndexByte(n, 0) >= 0 {
		return "", execbox.Invalid("image", "layer entry name %q is empty or contains a NUL byte", n)
	}
	rel := path.Clean(strings.TrimLeft(n, "/"))
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", &execbox.FieldError{Field: "image", Problem: fmt.Sprintf("layer entry %q is outside the image's root", n), Kind: execbox.ErrPermission}
	}
	return rel, nil
}

// entry applies one tar entry.
func (a *applier) entry(hdr *tar.Header, r io.Reader) error {
	name, err := entryName(hdr.Name)
	if err != nil || name == "." {
		return err // the root keeps mode 0755, see finish
	}
	dir, base := path.Split(name)
	if strings.HasPrefix(base, whPrefix) {
		return a.whiteout(path.Clean(dir), base)
	}
	a.keep(name)
	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo, tar.TypeXGlobalHeader:
		return nil // see the package documentation
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse, tar.TypeCont:
		err = a.charge(hdr.Size)
	default:
		err = a.charge(0)
	}
	if err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return a.dir(name, hdr)
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse, tar.TypeCont:
		return a.file(name, hdr, r)
	case tar.TypeSymlink:
		return a.symlink(name, hdr)
	case tar.TypeLink:
		return a.link(name, hdr)
	}
	return execbox.Invalid("image", "layer entry %q has unsupported type %q", hdr.Name, hdr.Typeflag)
}

// keep records name and its ancestors as entries of this layer.
func (a *applier) keep(name string) {
	for name != "." && !a.kept[name] {
		a.kept[name] = true
		name = path.Dir(name)
	}
}

// openDir opens the directory rel of the root, resolving symlinks as in a
// chroot.
func (a *applier) openDir(rel string) (*os.File, error) {
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	}
	for {
		fd, err := unix.Openat2(int(a.root.Fd()), rel, &how)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue // a rename raced with the lookup: retry
		}
		if err != nil {
			return nil, &os.PathError{Op: "openat2", Path: rel, Err: err}
		}
		return os.NewFile(uintptr(fd), rel), nil
	}
}

// parent opens the parent directory of name, creating it (and its
// parents, mode 0755) if missing.
func (a *applier) parent(name string) (*os.File, error) {
	dir := path.Dir(name)
	f, err := a.openDir(dir)
	if !errors.Is(err, unix.ENOENT) || dir == "." {
		return f, err
	}
	p, err := a.parent(dir)
	if err != nil {
		return nil, err
	}
	err = unix.Mkdirat(int(p.Fd()), path.Base(dir), 0o755)
	p.Close()
	if err != nil && err != unix.EEXIST {
		return nil, &os.PathError{Op: "mkdir", Path: dir, Err: err}
	}
	return a.openDir(dir)
}

// finish applies the modes and mtimes of directories, children before
// their parents, and makes the root mode 0755.
func (a *applier) finish() error {
	names := make([]string, 0, len(a.dirs))
	for n := range a.dirs {
		names = append(names, n)
	}
	// Reverse order puts "a/b" before "a".
	slices.Sort(names)
	slices.Reverse(names)
	for _, n := range names {
		if err := a.setDir(n, a.dirs[n]); err != nil {
			return fmt.Errorf("directory %q: %w", n, err)
		}
	}
	return unix.Fchmod(int(a.root.Fd()), 0o755)
}

// setDir sets the mode and mtime of the directory name, unless it is not
// a directory any more.
func (a *applier) setDir(name string, m dirMeta) error {
	p, err := a.openDir(path.Dir(name))
	if err != nil {
		return nil // gone with its parent, or replaced
	}
	defer p.Close()
	fd, err := unix.Openat(int(p.Fd()), path.Base(name), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if err := unix.Fchmod(fd, m.mode); err != nil {
		return err
	}
	return setTimes(f, m.hdr)
}
